"""Stage `evalckpt`: val success of SFT (step 0) and every RL checkpoint, one training seed.

Opt-in per rl policy (`eval.policies[*].every_checkpoint`); the paper study turns it on,
the default job does not (it stays under 30 minutes). Per seed it
1. replays the RL run from the rl stage's inputs, keeping the policy at every checkpoint
   step (replay.py: the rl stage deletes its checkpoints when it finishes), and measures
   how far the replay's final weights are from the rl stage's model (0: the same run);
2. evaluates the SFT model and each kept policy greedily (eval.temperature) on the val
   split with eval's machinery (split_plan, eval_job, the runner, checkpoint_policy), in
   one browser, each step as policy `<policy>-step-<N>`;
3. writes the episodes, steps and evals tables to `out`, the curve (one row per step)
   and the per-task table (step, task, successes, episodes) beside the metrics file, and
   the metrics JSON; then deletes the kept policies and the replay's checkpoints, so DVC
   caches episodes, not weights.
Resumable: a rerun with every kept policy on disk skips the replay (a half replay starts
over: minutes) and skips the episodes already stored.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

from rmsweb.evalckpt.curve import (
    CURVE_COLUMNS,
    SPLIT,
    TASK_COLUMNS,
    curve_metrics,
    curve_rows,
    step_policy,
    write_csv,
)
from rmsweb.evalckpt.replay import (
    checkpoint_steps,
    complete_snapshots,
    replay_rl,
    snapshot_dir,
    weights_diff,
)
from rmsweb.stage_io import StageInputError, StageIO
from rmsweb.store.layout import run_name


async def _evaluate(io: StageIO, models: dict[int, Path], run: str) -> dict[int, float]:
    """Each model folder on the val split, in one runner; wall seconds per step."""
    from rmsweb.agents.build import checkpoint_policy
    from rmsweb.evaluate.job import eval_job, split_plan
    from rmsweb.rollout.build import build_runner
    from rmsweb.store.writer import ShardWriter
    from rmsweb.suites.factory import LIVE_SUITES

    spec = io.spec
    runner = build_runner(spec.suite, run=run, stage="evalckpt")
    tasks, seeds = split_plan(runner.suite, [SPLIT], spec.eval.seeds_per_task)[SPLIT]
    walls: dict[int, float] = {}
    judge = None
    async with runner:
        try:
            if spec.suite.kind in LIVE_SUITES:
                from rmsweb.judge.live import build_live_judge

                judge = build_live_judge(spec.suite, runner.suite)
            with ShardWriter(io.out) as sink:
                for step, folder in models.items():
                    name = step_policy(str(io.policy), step)
                    policy = checkpoint_policy(
                        folder,
                        spec.model,
                        name,
                        temperature=spec.eval.temperature,
                        seed=io.train_seed,
                    )
                    start = time.perf_counter()
                    try:
                        await runner.run(
                            policy,
                            tasks,
                            seeds,
                            sink,
                            split=SPLIT,
                            job=eval_job(SPLIT, judge=judge),
                            description=f"evalckpt {name} ({SPLIT})",
                        )
                    finally:
                        await policy.close()
                    walls[step] = time.perf_counter() - start
        finally:
            if judge is not None:
                await judge.close()
    return walls


def _replace_evals(run_dir: Path, rows: list) -> None:
    """The evals table summarizes all episodes: rewritten whole on every (re)run."""
    from rmsweb.store.writer import TableWriter

    shutil.rmtree(run_dir / "evals", ignore_errors=True)
    with TableWriter(run_dir, "evals") as writer:
        writer.write_many(rows)


def main(io: StageIO) -> None:
    from rmsweb.store.reader import read_records

    spec = io.spec
    policy = next((p for p in spec.eval.policies if p.name == io.policy), None)
    if getattr(policy, "source", None) != "rl":
        raise StageInputError(
            f"evalckpt evaluates the checkpoints of an rl policy; {io.policy!r} of experiment "
            f"{io.exp!r} is not one (give --policy the rl policy that sets every_checkpoint)."
        )
    sft_model = io.input("sft") / "model"
    rl_model = io.input("rl") / "model"
    mine_dir = io.input("mine")
    snapshots, work_dir = io.out / "snapshots", io.out / "checkpoints"
    io.out.mkdir(parents=True, exist_ok=True)
    steps = checkpoint_steps(spec.rl.steps, spec.rl.save_steps)
    start = time.perf_counter()
    if not complete_snapshots(snapshots, steps):
        shutil.rmtree(snapshots, ignore_errors=True)
        shutil.rmtree(work_dir, ignore_errors=True)
        replay_rl(spec, sft_model, mine_dir, io.train_seed, work_dir, snapshots)
    replay_s = time.perf_counter() - start
    diff = weights_diff(snapshot_dir(snapshots, steps[-1]), rl_model)
    models = {0: sft_model, **{s: snapshot_dir(snapshots, s) for s in steps}}
    run = run_name(io.out)
    walls = asyncio.run(_evaluate(io, models, run))
    curve = curve_rows(
        read_records(io.out),
        run=run,
        policy=str(io.policy),
        suite=spec.suite.kind,
        steps=list(models),
        walls=walls,
    )
    _replace_evals(io.out, curve.evals)
    write_csv(io.plot_path("curve.csv"), CURVE_COLUMNS, curve.overall)
    write_csv(io.plot_path("tasks.csv"), TASK_COLUMNS, curve.tasks)
    metrics = curve_metrics(curve, str(io.policy), io.seed)
    metrics["replay"] = {
        # 0.0: the replay is the rl stage's run, so its last point is that model's
        "max_abs_weight_diff": diff,
        "same_as_rl": diff == 0.0,
        "wall_s": round(replay_s, 1),
    }
    metrics["wall_s"] = round(time.perf_counter() - start, 1)
    io.write_metrics(metrics)
    shutil.rmtree(snapshots, ignore_errors=True)
    shutil.rmtree(work_dir, ignore_errors=True)
