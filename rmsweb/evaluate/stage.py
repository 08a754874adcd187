"""Stage `eval`: one policy on the held-out split through the episode runner.

Writes the episodes/steps tables of every episode (resumable: a rerun skips
finished episodes), an `evals` table (one row per task plus the overall row)
and the metrics JSON that `dvc metrics show` / `dvc exp show` read.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from rmsweb.evaluate.metrics import eval_rows


async def _run(io: Any, policy_spec: Any) -> float:
    from rmsweb.agents.build import eval_policy
    from rmsweb.rollout.build import build_runner
    from rmsweb.store.writer import ShardWriter

    spec = io.spec
    split = spec.eval.split
    runner = build_runner(spec.suite, run=f"eval/{io.exp}/{io.policy}", stage="eval")
    seeds = runner.suite.seeds(split)
    if spec.eval.seeds_per_task:
        seeds = seeds[: spec.eval.seeds_per_task]
    start = time.perf_counter()
    async with runner:
        policy = eval_policy(policy_spec, spec, runner.suite, io.inputs)
        try:
            with ShardWriter(io.out) as sink:
                await runner.run(
                    policy,
                    runner.suite.task_ids(),
                    seeds,
                    sink,
                    split=split,
                    description=f"eval {io.policy}",
                )
        finally:
            await policy.close()
    return time.perf_counter() - start


def main(io: Any) -> None:  # io: rmsweb.stage_io.StageIO
    from rmsweb.store.reader import read_records

    spec = io.spec
    policy_spec = next(p for p in spec.eval.policies if p.name == io.policy)
    io.out.mkdir(parents=True, exist_ok=True)
    wall = asyncio.run(_run(io, policy_spec))
    records = read_records(io.out)
    rows = eval_rows(
        records,
        run=f"eval/{io.exp}/{io.policy}",
        policy=io.policy,
        suite=spec.suite.kind,
        split=spec.eval.split,
        wall_s=wall,
    )
    _replace_table(io.out, "evals", rows)
    overall = rows[-1]
    metrics: dict[str, Any] = {
        "policy": io.policy,
        "n": overall.n,
        "success": round(overall.success_rate, 4),
        "ci_low": round(overall.ci_low, 4),
        "ci_high": round(overall.ci_high, 4),
        "mean_steps_solved": overall.mean_steps_solved,
        "parse_error_rate": round(overall.parse_error_rate, 4),
        "env_errors": sum(1 for r in records if r.episode.error),
        "wall_s": round(wall, 1),
        "per_task": {r.task_id: round(r.success_rate, 4) for r in rows[:-1]},
    }
    io.write_metrics(metrics)


def _replace_table(run_dir: Any, table: str, rows: list[Any]) -> None:
    """The evals table summarizes all episodes: rewrite it whole on every (re)run."""
    import shutil

    from rmsweb.store.writer import TableWriter

    shutil.rmtree(run_dir / table, ignore_errors=True)
    with TableWriter(run_dir, table) as writer:
        writer.write_many(rows)
