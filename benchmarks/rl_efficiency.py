"""RL sample efficiency: Salvage-DS, DAPO-DS and GRPO from one SFT checkpoint.

    python benchmarks/rl_efficiency.py --exp miniwob-cpu \
        --sft runs/sft/miniwob-cpu/s0 --mine runs/mine/miniwob-cpu/s0 [--eval-every 25]

A benchmark script, not a test: every figure is a ratio against Salvage-DS in the same
run. The experiment's rl section is trained three times, each with its `kind` swapped
and everything else equal (the same SFT checkpoint, mined states, seed and number of
optimizer steps, `--steps`, default rl.steps), as the rl stage sets a run up
(rmsweb.train.salvage_ds.stage.load_inputs):

- salvage_ds with max_resample 0: rejected groups are anchored, never redrawn;
- dapo_ds with the spec's gate settings and `--dapo-resample` rounds (default 3): rejected
  groups are dropped and the shortfall is drawn again from new states;
- grpo: every group is used (no gate, no anchor, no resampling).

The policy is kept every `--eval-every` steps (default rl.save_steps) and at the end, and
each kept policy and the SFT checkpoint (step 0) are played on the same held-out seeds
(`--split`, default val: settings are chosen on val, test is the pipeline's) with the
eval stage's runner, checkpoint policy, job and success metric (the mean over tasks of
the per-task success rate). "Samples" are the trainer's `samples_generated`: completions
sampled, G per group, over every resampling round (its curve's column, summed).

Two measures (rmsweb/report/efficiency.py):
(a) samples to half the gain: the samples drawn up to the first checkpoint whose val
    success reaches SFT + half of that run's final gain (final checkpoint - SFT). The
    gain counts when the paired unit-bootstrap 95% interval of final - SFT on the same
    val units lies above 0; otherwise the figure is "undefined (no gain)" and no ratio
    is formed from it.
(b) samples at equal accepted groups: Salvage-DS's run accepted A groups (passed the
    gate) in S samples; each other run's samples at the first step where its accepted
    groups reach A, over S. A DAPO-DS run short of A is continued past its steps (the
    same run, resumed from its last checkpoint, at its resample cap) until it has them,
    for at most `--max-dapo-steps` steps in all. GRPO has no gate: every group counts.

Printed: per algorithm the run's totals (samples, wall, gate outcomes, stall), the val
success per checkpoint, then (a) and (b) with their reasons, and the last lines

    samples_to_half_gain salvage_ds=N dapo_ds=N grpo=N          (or "undefined")
    half_gain_ratio dapo_over_salvage=X grpo_over_salvage=X      (or "undefined")
    equal_accepted_groups=A samples_ratio dapo_over_salvage=X grpo_over_salvage=X
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rmsweb.errors import UserError  # noqa: E402 (after the sys.path insert)
from rmsweb.report.efficiency import (  # noqa: E402
    UNDEFINED,
    Gain,
    HalfGain,
    checkpoint_points,
    final_gain,
    ratio_text,
    samples_at_accepted,
    samples_to_half_gain,
)

ALGORITHMS = ("salvage_ds", "dapo_ds", "grpo")  # in the order they are trained


def rl_variants(
    spec: Any, steps: int, dapo_resample: int, save_steps: int | None = None
) -> dict[str, Any]:
    """The experiment with its rl section as each algorithm, all else the spec's.

    Fields a kind does not have are dropped (grpo has no gate); fields the spec's kind
    lacks take the target kind's defaults (a grpo spec gives dapo_ds the default gate).
    save_steps (None: the spec's) is where the policies are kept for evaluation.
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
        if save_steps is not None:
            data["save_steps"] = save_steps
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


@dataclass
class Run:
    """One trained variant: its curve, summary metrics and kept policies (step -> folder)."""

    kind: str
    curve: list[dict[str, Any]]
    metrics: dict[str, Any]
    snapshots: dict[int, Path] = field(default_factory=dict)
    continued_to: int | None = None  # dapo_ds run on past its steps for (b)


class _Reached(Exception):
    """Raised from the trainer's step hook once the accepted groups reach the target."""


def train(
    spec: Any,
    sft: Path,
    mine: Path,
    work: Path,
    seed: int,
    *,
    keep: bool = True,
    until_accepted: int | None = None,
) -> Run:
    """Train spec.rl as the rl stage does, into `work` (its checkpoints/ and, with keep,
    the policy at every save_steps and the last step under snapshots/). A rerun with
    more steps in the same `work` continues from the last checkpoint; until_accepted
    stops it after the first step where the accepted groups, summed, reach that many."""
    from rmsweb.evalckpt.replay import checkpoint_steps, save_snapshot, snapshot_dir
    from rmsweb.models.config import lora_kwargs
    from rmsweb.train.salvage_ds.stage import load_inputs, summary, trainer_class
    from rmsweb.train.salvage_ds.trainer import TrainResult

    loaded, states, hyper = load_inputs(spec, sft / "model", mine, seed)
    kept = checkpoint_steps(hyper.steps, hyper.save_steps) if keep else []
    trainer: Any = None

    def on_step(row: dict[str, Any]) -> None:
        if row["step"] in kept:  # the trainer has just checkpointed this step
            save_snapshot(trainer, loaded.processor, snapshot_dir(work / "snapshots", row["step"]))
        accepted = sum(r["accepted"] for r in trainer.curve)
        if until_accepted is not None and accepted >= until_accepted:
            raise _Reached

    trainer = trainer_class(spec.rl.kind)(
        loaded.model,
        loaded.tokenizer,
        states,
        hyper,
        work / "checkpoints",
        processor=loaded.processor,
        is_vl=loaded.is_vl,
        lora=lora_kwargs(spec.model.lora),
        on_step=on_step,
    )
    start = time.perf_counter()
    try:
        result = trainer.train()
    except _Reached:
        result = TrainResult(
            list(trainer.curve),
            list(trainer.group_log),
            0,
            time.perf_counter() - start,
            trainer.generate_s,
            trainer.train_s,
        )
    metrics = summary(result, hyper)
    metrics["stage_wall_s"] = round(time.perf_counter() - start, 2)
    snapshots = {s: snapshot_dir(work / "snapshots", s) for s in kept}
    return Run(spec.rl.kind, result.curve, metrics, snapshots)


def continue_until_accepted(
    spec: Any, sft: Path, mine: Path, work: Path, seed: int, target: int, max_steps: int
) -> Run:
    """The run in `work` resumed past its steps until its accepted groups reach target
    (or max_steps): its whole curve, no new policies kept."""
    longer = spec.model_copy(update={"rl": spec.rl.model_copy(update={"steps": max_steps})})
    run = train(longer, sft, mine, work, seed, keep=False, until_accepted=target)
    run.continued_to = len(run.curve)
    return run


@dataclass
class Played:
    """One policy on the held-out split: success, its episodes (for paired intervals)."""

    success: float
    n: int
    wall_s: float
    episodes: list[Any]


async def held_out(
    spec: Any, models: dict[str, Path], split: str, seeds_per_task: int | None, seed: int
) -> dict[str, Played]:
    """Each model folder played on the split's tasks x seeds, as the eval stage plays it."""
    import torch

    from rmsweb.agents.build import checkpoint_policy
    from rmsweb.evaluate.job import eval_job, split_plan
    from rmsweb.evaluate.metrics import eval_rows
    from rmsweb.report.arms import Episode
    from rmsweb.rollout.build import build_runner
    from rmsweb.store.rows import MemorySink

    torch.set_num_threads(spec.rl.torch_threads or os.cpu_count() or 1)
    runner = build_runner(spec.suite, run="bench/rl_efficiency", stage="bench", progress=False)
    results: dict[str, Played] = {}
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
            episodes = [
                Episode(name, None, r.episode.task_id, r.episode.seed, r.episode.success, 0)
                for r in sink.records
            ]
            results[name] = Played(overall.success_rate, overall.n, wall, episodes)
            print(
                f"eval {name:>18}: success {overall.success_rate:.4f} on {overall.n} episodes "
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


def policy_name(kind: str, step: int) -> str:
    return "sft" if step == 0 else f"{kind}-step-{step}"


@dataclass
class Efficiency:
    """The two measures for one algorithm."""

    points: list[Any]
    gain: Gain
    half: HalfGain
    equal: tuple[int, int] | None  # (step, samples) at Salvage-DS's accepted groups


def measure(
    runs: dict[str, Run], played: dict[str, Played], equal_runs: dict[str, Run]
) -> tuple[int, dict[str, Efficiency]]:
    """Salvage-DS's accepted groups, and each algorithm's (a) and (b)."""
    target = int(runs["salvage_ds"].metrics["accepted"])
    sft = played["sft"]
    out = {}
    for kind, run in runs.items():
        steps = sorted(run.snapshots)
        success = {s: played[policy_name(kind, s)].success for s in steps}
        points = checkpoint_points(run.curve, success, sft.success)
        gain = final_gain(sft.episodes, played[policy_name(kind, steps[-1])].episodes)
        half = samples_to_half_gain(points, gain)
        curve = equal_runs.get(kind, run).curve
        equal = samples_at_accepted(curve, target) if target else None
        out[kind] = Efficiency(points, gain, half, equal)
    return target, out


def report_lines(
    runs: dict[str, Run], eff: dict[str, Efficiency], target: int, split: str
) -> list[str]:
    """The val success per checkpoint, (a), (b) and the summary lines."""
    lines = [f"{split} success per checkpoint (step: success, samples drawn by then):"]
    for kind, e in eff.items():
        cells = " | ".join(f"{p.step}: {p.success:.1%} ({p.samples})" for p in e.points)
        lines.append(f"  {kind}: {cells}")
    lines.append(
        "(a) samples to SFT + half the run's final gain (the gain counts when its paired "
        f"95% interval on {split} lies above 0):"
    )
    for kind, e in eff.items():
        g = e.gain
        head = (
            f"  {kind}: final - SFT {g.diff * 100:+.1f} points "
            f"[{g.low * 100:+.1f}, {g.high * 100:+.1f}] over {g.units} units -> "
        )
        if e.half.samples is None:
            lines.append(head + (e.half.why if e.half.why.startswith(UNDEFINED) else UNDEFINED))
        else:
            lines.append(
                head + f"{e.half.samples} samples (step {e.half.step}, target "
                f"{(e.half.target or 0):.1%})"
            )
    base = eff["salvage_ds"].half.samples
    for kind in ("dapo_ds", "grpo"):
        lines.append(f"  ratio {kind} / salvage_ds: {ratio_text(eff[kind].half.samples, base)}")
    salvage_samples = runs["salvage_ds"].metrics["samples_generated"]
    lines.append(
        f"(b) samples at equal accepted groups: salvage_ds accepted {target} groups in "
        f"{salvage_samples} samples ({runs['salvage_ds'].metrics['steps']} steps)"
    )
    for kind in ("dapo_ds", "grpo"):
        e = eff[kind]
        note = " (no gate: every group counts)" if kind == "grpo" else ""
        if e.equal is None:
            lines.append(f"  {kind}: did not reach {target} accepted groups{note}")
            continue
        step, samples = e.equal
        lines.append(
            f"  {kind}: {target} accepted groups at step {step}, {samples} samples{note}; "
            f"ratio over salvage_ds {ratio_text(samples, salvage_samples)}"
        )
    if target == 0:
        lines.append("  salvage_ds accepted no group: no ratio at equal accepted groups")

    def token(text: str) -> str:
        return "undefined" if not text[0].isdigit() else text

    def samples_of(kind: str) -> str:
        n = eff[kind].half.samples
        return "undefined" if n is None else str(n)

    def equal_ratio(kind: str) -> str:
        e = eff[kind].equal
        return token(ratio_text(e[1] if e else None, salvage_samples if target else None))

    lines.append("samples_to_half_gain " + " ".join(f"{k}={samples_of(k)}" for k in eff))
    lines.append(
        "half_gain_ratio "
        + " ".join(
            f"{k}_over_salvage={token(ratio_text(eff[k].half.samples, base))}"
            for k in ("dapo_ds", "grpo")
        )
    )
    lines.append(
        f"equal_accepted_groups={target} samples_ratio "
        + " ".join(f"{k}_over_salvage={equal_ratio(k)}" for k in ("dapo_ds", "grpo"))
    )
    return lines


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
    eval_every: int | None = None,
    max_dapo_steps: int | None = None,
) -> dict[str, Any]:
    """Train the three variants, play every kept policy and SFT, print both measures."""
    check_inputs(sft, mine)
    if split not in ("train", "val", "test"):
        raise UserError(f"--split {split!r}: expected train, val or test.")
    steps = steps or spec.rl.steps
    eval_every = eval_every or spec.rl.save_steps
    max_dapo_steps = max_dapo_steps or 10 * steps
    if eval_every < 1 or max_dapo_steps < steps:
        raise UserError(
            f"--eval-every {eval_every} must be >= 1 and --max-dapo-steps {max_dapo_steps} "
            f">= the steps ({steps})."
        )
    seed = spec.seeds[0] if seed is None else seed
    # Checkpoints stay under `out`: a cloud checkpoint dir keyed by the stage's run key
    # would let a second benchmark run resume the first one's models.
    os.environ.pop("RMSWEB_CHECKPOINT_DIR", None)
    variants = rl_variants(spec, steps, dapo_resample, eval_every)
    g = variants["dapo_ds"].rl
    print(
        f"{exp}: {steps} optimizer steps each, batch {g.batch_size} = {g.batch_size // g.group_size}"
        f" groups x G {g.group_size}, seed {seed}; gate min_std {g.min_std}, competence "
        f"[{g.competence_min}, {g.competence_max}]; dapo_ds max_resample {g.max_resample}; "
        f"policies kept every {eval_every} steps",
        flush=True,
    )
    runs: dict[str, Run] = {}
    for kind, variant in variants.items():
        print(f"training {kind} ...", flush=True)
        runs[kind] = train(variant, sft, mine, out / kind, seed)
    target = int(runs["salvage_ds"].metrics["accepted"])
    equal_runs: dict[str, Run] = {}
    if target and samples_at_accepted(runs["dapo_ds"].curve, target) is None:
        print(f"continuing dapo_ds until it has accepted {target} groups ...", flush=True)
        equal_runs["dapo_ds"] = continue_until_accepted(
            variants["dapo_ds"], sft, mine, out / "dapo_ds", seed, target, max_dapo_steps
        )
    models = {"sft": sft / "model"}
    for kind, r in runs.items():
        models.update({policy_name(kind, s): path for s, path in r.snapshots.items()})
    played = asyncio.run(held_out(spec, models, split, seeds_per_task, seed))
    for kind in ALGORITHMS:
        print(describe(kind, runs[kind].metrics, steps))
        if kind in equal_runs:
            print(f"  continued to step {equal_runs[kind].continued_to} for (b)")
    print(f"sft baseline: held-out {split} success {played['sft'].success:.4f}")
    target, eff = measure(runs, played, equal_runs)
    lines = report_lines(runs, eff, target, split)
    print("\n".join(lines), flush=True)
    return {"runs": runs, "played": played, "efficiency": eff, "lines": lines}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exp", default="miniwob-cpu", help="an experiment in params.yaml")
    parser.add_argument("--sft", type=Path, required=True, help="SFT run folder (has model/)")
    parser.add_argument("--mine", type=Path, required=True, help="mine run folder")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps (rl.steps)")
    parser.add_argument("--split", default="val", help="held-out split for the success")
    parser.add_argument("--seeds-per-task", type=int, default=None, help="held-out seeds cap")
    parser.add_argument("--dapo-resample", type=int, default=3, help="dapo_ds max_resample")
    parser.add_argument(
        "--eval-every", type=int, default=None, help="keep and play the policy every N steps"
    )
    parser.add_argument(
        "--max-dapo-steps", type=int, default=None, help="cap for (b)'s dapo_ds (10x steps)"
    )
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
            "eval_every": args.eval_every,
            "max_dapo_steps": args.max_dapo_steps,
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
