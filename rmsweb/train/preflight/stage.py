"""Stage `preflight` (`rmsweb preflight SPEC`, or as the first stage of a GPU spec):
minutes on the spec's own accelerators, with the pinned GPU stack, before anything
expensive runs (checks.py says what each check does).

Under torchrun (RMSWEB_TORCHRUN, as sft and rl) every rank runs the SFT and RL steps at
its own micro-batch and joins the all-reduce; on several nodes the head posts the stage
and the workers join it. Rank 0 then runs the vLLM check (GPU only; `--skip-vllm` or no
`vllm` on PATH: skipped, and said so), writes the figures as DVC metrics and stops the
pipeline on a failed check with a message that names the check and its fix. On CPU the
same code runs with the spec's tiny model (make rehearsal), minus vLLM.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

from rmsweb.errors import UserError
from rmsweb.stage_io import StageIO, write_json_atomic
from rmsweb.train.preflight import checks

BUDGET_S = 600.0  # the ten minutes; over it is reported, not failed

FIXES = {
    "all_reduce": "check that every node runs `rmsweb worker` and that the nodes reach each "
    "other on the master port (security group / firewall), then relaunch",
    "sft_step": "lower sft.batch_size or sft.max_seq_len, or set sft.gradient_checkpointing "
    "true (`rmsweb plan SPEC` shows the memory); a package error: reinstall with "
    "`pip install -c constraints-gpu.txt -e '.[gpu,cloud]'`",
    "rl_step": "lower rl.micro_batch_size, or set rl.gradient_checkpointing true "
    "(`rmsweb plan SPEC` shows the memory, KL probe included)",
    "checkpoint": "check the checkpoint bucket mount ($RMSWEB_CHECKPOINT_DIR, "
    "compute.checkpoint_bucket): it must be writable and readable from this node",
    "vllm": "the pinned stack (constraints-gpu.txt: vllm, torch, transformers) cannot load or "
    "serve an SFT folder; see the check's message and the vllm-serve.log in the stage's out",
}


def run(
    spec: Any,
    out: Path,
    metrics: Path,
    *,
    device: str | None = None,
    skip_vllm: bool = False,
    checkpoint_dir: Path | None = None,
) -> dict[str, Any]:
    """All checks; writes `metrics` (rank 0) and raises UserError on a failed one."""
    import torch

    from rmsweb.train.salvage_ds import ranks

    start = time.perf_counter()
    ranks.init_from_env()
    rank, world = ranks.rank_world()
    cuda = torch.cuda.is_available()
    if device is None:
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}" if cuda else "cpu"
    if device.startswith("cuda"):
        torch.cuda.set_device(device)
    threads = getattr(spec.sft, "torch_threads", None)
    if not cuda and threads:
        torch.set_num_threads(threads)
    out.mkdir(parents=True, exist_ok=True)
    work = out / f"work-{rank}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    folder = checkpoint_dir or (
        Path(os.environ["RMSWEB_CHECKPOINT_DIR"]) / "preflight" / spec.name
        if os.environ.get("RMSWEB_CHECKPOINT_DIR")
        else out / "checkpoints"
    )
    found: list[checks.Check] = []
    found.append(
        checks.run_check("all_reduce", FIXES["all_reduce"], lambda: checks.all_reduce(device))
    )
    found.append(
        checks.run_check(
            "sft_step", FIXES["sft_step"], lambda: checks.sft_step(spec, device, work, world)
        )
    )
    held: dict[str, Any] = {}

    def rl() -> dict[str, Any]:
        policy, trainer = checks.rl_policy_and_trainer(spec, device, work, world)
        held["trainer"] = trainer
        return checks.rl_step(spec, trainer, policy)

    if spec.rl is not None and getattr(spec.rl, "kind", None) != "continued_sft":
        found.append(checks.run_check("rl_step", FIXES["rl_step"], rl))
    else:
        found.append(checks.skipped("rl_step", "the spec has no sampling RL stage"))
    if "trainer" in held:
        trainer = held["trainer"]
        found.append(
            checks.run_check(
                "checkpoint", FIXES["checkpoint"], lambda: checks.checkpoint(trainer, folder)
            )
        )
        del trainer
    held.clear()
    checks.free_memory()
    # Every rank agrees that the steps are over before rank 0 starts vLLM on its GPU.
    ranks.sum_floats(0.0)
    if rank == 0:
        if not cuda:
            found.append(checks.skipped("vllm", "no CUDA here: vLLM runs on GPUs only"))
        elif skip_vllm:
            found.append(checks.skipped("vllm", "--skip-vllm"))
        elif not checks.vllm_available():
            found.append(
                checks.Check(
                    "vllm",
                    False,
                    message="`vllm` is not on PATH",
                    fix="install the GPU stack: `pip install -c constraints-gpu.txt "
                    "-e '.[gpu,cloud]'` (or pass --skip-vllm to check the rest)",
                )
            )
        else:
            found.append(
                checks.run_check("vllm", FIXES["vllm"], lambda: checks.vllm_serve(spec, out))
            )
    wall = time.perf_counter() - start
    failed = [c for c in found if not c.ok]
    # Every rank's failures count: gather them so rank 0 reports a failure on any node.
    failures = ranks.gather({rank: [(c.name, c.message, c.fix) for c in failed]})
    values: dict[str, Any] = {
        "ok": not any(failures.values()),
        "device": torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu",
        "world_size": world,
        "wall_s": round(wall, 1),
        "within_budget": wall <= BUDGET_S,
        "checks": {c.name: c.as_metrics() for c in found},
        "failed_on_ranks": {str(r): [n for n, _, _ in f] for r, f in failures.items() if f},
    }
    if rank == 0:
        write_json_atomic(metrics, values)
    bad = [(r, n, m, f) for r, f in sorted(failures.items()) for n, m, f in f]
    if bad:
        lines = [f"preflight failed on rank {r}: {n}: {m}\n  fix: {f}" for r, n, m, f in bad]
        raise UserError("\n".join(lines))
    return values


def summary_line(values: dict[str, Any]) -> str:
    parts = []
    for name, c in values["checks"].items():
        state = "skipped" if c.get("skipped") else ("ok" if c["ok"] else "FAILED")
        peak = c.get("peak_gib")
        extra = f" peak {peak} GiB / plan {c.get('plan_gib')} GiB" if peak is not None else ""
        if peak is None and "plan_gib" in c:
            extra = f" plan {c['plan_gib']} GiB (no CUDA: peak not measured)"
        parts.append(f"{name} {state} {c['seconds']} s{extra}")
    return f"preflight: {'; '.join(parts)}; {values['wall_s']} s" + (
        "" if values["within_budget"] else f" (over the {BUDGET_S:.0f} s budget)"
    )


# Written into the stage's output when every check passed. Its bytes never change, so
# the stages that wait for the preflight (dvc.yaml: a dep on this file) stay up to date
# when it reruns; its figures live in the metrics file, which nothing depends on.
PASSED = "PASSED"


def main(io: StageIO) -> None:
    run_command(io)
    from rmsweb.train.salvage_ds import ranks

    if ranks.is_writer():
        (io.out / PASSED).write_text("every preflight check passed\n", encoding="utf-8")


def run_command(io: StageIO, skip_vllm: bool = False) -> None:
    """`rmsweb preflight`: the stage's run with the command's options; rank 0 prints."""
    values = run(io.spec, io.out, io.metrics, skip_vllm=skip_vllm)
    from rmsweb.train.salvage_ds import ranks

    if ranks.is_writer():
        print(summary_line(values), flush=True)
