"""RL sample efficiency: Salvage-DS vs DAPO-DS vs GRPO from one SFT checkpoint.

    python benchmarks/rl_efficiency.py --exp miniwob-cpu \
        --sft runs/sft/miniwob-cpu/s0 --mine runs/mine/miniwob-cpu/s0

A performance script, not a test. The experiment's rl section is run three times by the
rl stage itself (rmsweb.train.salvage_ds.stage.main), each with its `kind` swapped and
everything else equal: the same SFT checkpoint, the same mined states, the same seed and
the same number of optimizer steps (`--steps`, default rl.steps):

- salvage_ds with max_resample 0: rejected groups are anchored, never redrawn;
- dapo_ds with the spec's gate settings and `--dapo-resample` rounds (default 3): rejected
  groups are dropped and the shortfall is drawn again from new states;
- grpo: every group is used (no gate, no anchor, no resampling).

Each resulting policy, and the SFT checkpoint as the baseline, is then played on the same
held-out seeds (`--split`, default val: hyperparameters are chosen on val, test is the
pipeline's) with the eval stage's runner, checkpoint policy, job and success metric (the
mean over tasks of the per-task success rate).

"Samples" are the trainer's `samples_generated`: completions sampled, G per group, over
every resampling round (the sum of the curve's column, as in the rl metrics JSON).
Printed per algorithm: samples, wall seconds (the stage's, and the trainer's generate +
train time with its generating share), groups accepted and rejected by gate reason, and
whether it stalled. The trainer does not stall as verl's DAPO does (raising once it runs out
of generation batches): a step short of accepted groups trains on what it has, and with
none it skips the update but counts. So "stalled" means the run ended short of its steps,
and the steps without an update (the stall of a DAPO step) are printed beside it. The
last line is

    samples_ratio_dapo_over_salvage=X success_salvage=Y success_dapo=Z success_grpo=W
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rmsweb.errors import UserError  # noqa: E402 (after the sys.path insert)

ALGORITHMS = ("salvage_ds", "dapo_ds", "grpo")  # in the order they are trained


def rl_variants(spec: Any, steps: int, dapo_resample: int) -> dict[str, Any]:
    """The experiment with its rl section as each algorithm, all else the spec's.

    Fields a kind does not have are dropped (grpo has no gate); fields the spec's kind
    lacks take the target kind's defaults (a grpo spec gives dapo_ds the default gate).
    """
    from rmsweb.spec import GRPO, DAPODynamicSampling, SalvageDS

    models = {"salvage_ds": SalvageDS, "dapo_ds": DAPODynamicSampling, "grpo": GRPO}
    base = spec.rl.model_dump()
    resample = {"salvage_ds": 0, "dapo_ds": dapo_resample}
    out = {}
    for kind in ALGORITHMS:
        cls = models[kind]
        data = {k: v for k, v in base.items() if k in cls.model_fields}
        data.update(kind=kind, steps=steps)
        if kind in resample:
            data["max_resample"] = resample[kind]
        out[kind] = spec.model_copy(update={"rl": cls.model_validate(data)})
    return out


def check_inputs(sft: Path, mine: Path) -> None:
    """A clear error before any work when an input folder is not there."""
    if not (sft / "model" / "config.json").is_file():
        raise UserError(
            f"--sft {sft}: no SFT model at {sft / 'model'} (config.json). Pass the sft stage's "
            "run folder, e.g. runs/sft/miniwob-cpu/s0; `dvc repro sft-s0_<exp>` makes it."
        )
    if not (mine / "mined_states").is_dir():
        raise UserError(
            f"--mine {mine}: no mined_states table in it. Pass the mine stage's run folder, "
            "e.g. runs/mine/miniwob-cpu/s0; `dvc repro mine-s0_<exp>` makes it."
        )


def train(spec: Any, exp: str, sft: Path, mine: Path, out: Path, seed: int) -> dict[str, Any]:
    """One rl stage run (spec.rl as given) into `out`; its metrics plus the stage's wall."""
    from rmsweb.stage_io import StageIO
    from rmsweb.train.salvage_ds.stage import main as rl_stage

    kind = spec.rl.kind
    metrics = out / "metrics" / f"{kind}.json"
    io = StageIO(exp, spec, {"sft": sft, "mine": mine}, out / kind, metrics, seed=seed)
    start = time.perf_counter()
    rl_stage(io)
    values = json.loads(metrics.read_text())
    values["stage_wall_s"] = round(time.perf_counter() - start, 2)
    values["model"] = str(out / kind / "model")
    return values


async def held_out_success(
    spec: Any, models: dict[str, Path], split: str, seeds_per_task: int | None, seed: int
) -> dict[str, dict[str, Any]]:
    """Each checkpoint played on the split's tasks x seeds, as the eval stage plays it."""
    import torch

    from rmsweb.agents.build import checkpoint_policy
    from rmsweb.evaluate.job import eval_job, split_plan
    from rmsweb.evaluate.metrics import eval_rows
    from rmsweb.rollout.build import build_runner
    from rmsweb.store.rows import MemorySink

    torch.set_num_threads(spec.rl.torch_threads or os.cpu_count() or 1)
    runner = build_runner(spec.suite, run="bench/rl_efficiency", stage="bench", progress=False)
    results: dict[str, dict[str, Any]] = {}
    async with runner:
        tasks, seeds = split_plan(runner.suite, [split], seeds_per_task)[split]
        for name, model_dir in models.items():
            policy = checkpoint_policy(
                model_dir, spec.model, name, temperature=spec.eval.temperature, seed=seed
            )
            sink = MemorySink()
            start = time.perf_counter()
            try:
                await runner.run(policy, tasks, seeds, sink, split=split, job=eval_job(split))
            finally:
                await policy.close()
            wall = time.perf_counter() - start
            overall = eval_rows(
                sink.records,
                run="bench/rl_efficiency",
                policy=name,
                suite=spec.suite.kind,
                split=split,
                wall_s=wall,
            )[-1]
            results[name] = {"success": overall.success_rate, "n": overall.n, "wall_s": wall}
            print(
                f"eval {name:>10}: success {overall.success_rate:.4f} on {overall.n} episodes "
                f"({len(tasks)} tasks x {len(seeds)} {split} seeds; parse errors "
                f"{overall.parse_error_rate:.3f}; {wall:.1f} s)",
                flush=True,
            )
    return results


def describe(kind: str, m: dict[str, Any], steps: int) -> str:
    """The per-algorithm lines: samples, time, gate outcomes, stall."""
    reasons = ", ".join(f"{r} {n}" for r, n in m["reasons"].items() if n) or "none"
    frac = m["generate_fraction"]
    stalled = m["steps"] < steps
    return (
        f"{kind}: samples_generated {m['samples_generated']} "
        f"({m['samples_generated'] / max(1, m['steps']):.1f}/step over {m['steps']}/{steps} "
        f"steps)\n"
        f"  wall {m['stage_wall_s']:.1f} s (trainer {m['wall_s']:.1f} s, generating "
        f"{'n/a' if frac is None else f'{frac:.1%}'}); {m['samples_per_s']} samples/s\n"
        f"  groups {m['groups']}, accepted {m['accepted']} "
        f"({m['accepted_fraction']:.1%}); by reason: {reasons}\n"
        f"  stalled: {'yes' if stalled else 'no'} (ran {m['steps']}/{steps} steps); "
        f"steps without an update: {m['empty_steps']}"
    )


def summary_line(metrics: dict[str, dict[str, Any]], success: dict[str, dict[str, Any]]) -> str:
    ratio = metrics["dapo_ds"]["samples_generated"] / metrics["salvage_ds"]["samples_generated"]
    return (
        f"samples_ratio_dapo_over_salvage={ratio:.3f} "
        f"success_salvage={success['salvage_ds']['success']:.4f} "
        f"success_dapo={success['dapo_ds']['success']:.4f} "
        f"success_grpo={success['grpo']['success']:.4f}"
    )


def run(
    spec: Any,
    exp: str,
    sft: Path,
    mine: Path,
    out: Path,
    *,
    steps: int | None = None,
    split: str = "val",
    seeds_per_task: int | None = None,
    dapo_resample: int = 3,
    seed: int | None = None,
) -> dict[str, Any]:
    """Train the three variants, evaluate them and the SFT checkpoint, print the summary."""
    check_inputs(sft, mine)
    if split not in ("train", "val", "test"):
        raise UserError(f"--split {split!r}: expected train, val or test.")
    steps = steps or spec.rl.steps
    seed = spec.seeds[0] if seed is None else seed
    # Checkpoints stay under `out`: a cloud checkpoint dir keyed by the stage's run key
    # would let a second benchmark run resume the first one's models.
    os.environ.pop("RMSWEB_CHECKPOINT_DIR", None)
    variants = rl_variants(spec, steps, dapo_resample)
    g = variants["dapo_ds"].rl
    print(
        f"{exp}: {steps} optimizer steps each, batch {g.batch_size} = {g.batch_size // g.group_size}"
        f" groups x G {g.group_size}, seed {seed}; gate min_std {g.min_std}, competence "
        f"[{g.competence_min}, {g.competence_max}]; dapo_ds max_resample {g.max_resample}",
        flush=True,
    )
    metrics = {}
    for kind, variant in variants.items():
        print(f"training {kind} ...", flush=True)
        metrics[kind] = train(variant, exp, sft, mine, out, seed)
    models = {"sft": sft / "model", **{k: Path(m["model"]) for k, m in metrics.items()}}
    success = asyncio.run(held_out_success(spec, models, split, seeds_per_task, seed))
    for kind in ALGORITHMS:
        print(describe(kind, metrics[kind], steps))
        print(f"  held-out {split} success {success[kind]['success']:.4f}")
    print(f"sft baseline: held-out {split} success {success['sft']['success']:.4f}")
    line = summary_line(metrics, success)
    print(line, flush=True)
    return {"metrics": metrics, "success": success, "line": line}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exp", default="miniwob-cpu", help="an experiment in params.yaml")
    parser.add_argument("--sft", type=Path, required=True, help="SFT run folder (has model/)")
    parser.add_argument("--mine", type=Path, required=True, help="mine run folder")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps (rl.steps)")
    parser.add_argument("--split", default="val", help="held-out split for the success")
    parser.add_argument("--seeds-per-task", type=int, default=None, help="held-out seeds cap")
    parser.add_argument("--dapo-resample", type=int, default=3, help="dapo_ds max_resample")
    parser.add_argument("--seed", type=int, default=None, help="training seed (first seed)")
    parser.add_argument("--out", type=Path, default=None, help="work folder (temporary)")
    args = parser.parse_args(argv)

    from rmsweb.spec import SpecErrors, load_from_params

    try:
        spec = load_from_params(ROOT / "params.yaml", args.exp)
        options = {
            "steps": args.steps,
            "split": args.split,
            "seeds_per_task": args.seeds_per_task,
            "dapo_resample": args.dapo_resample,
            "seed": args.seed,
        }
        if args.out is not None:
            run(spec, args.exp, args.sft, args.mine, args.out, **options)
        else:
            with tempfile.TemporaryDirectory(prefix="rl_efficiency_") as tmp:
                run(spec, args.exp, args.sft, args.mine, Path(tmp), **options)
    except (UserError, SpecErrors) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
