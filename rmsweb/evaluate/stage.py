"""Stage `eval`: one policy on the spec's eval splits (val, test) through the episode runner.

Writes the episodes/steps tables of every episode (resumable: a rerun skips
finished episodes), an `evals` table (per split: one row per task plus the
overall row) and the metrics JSON that `dvc metrics show` / `dvc exp show` read:
`success` etc. for the first reported split (test when evaluated), the others
under `<split>/...`. A trained policy's eval runs once per training seed.
On live suites every episode is judged by the suite's LLM judge before it is stored
(its verdict is the success; the judge's calls go to the judgments table).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from rmsweb.evaluate.job import eval_job, split_plan
from rmsweb.evaluate.metrics import category_rates, eval_rows
from rmsweb.stage_io import StageIO
from rmsweb.store.layout import run_name
from rmsweb.store.rows import EpisodeRecord, EvalRow

# The split whose numbers are the stage's headline metrics: test when it is evaluated.
REPORT_ORDER = ("test", "val", "train")


def _target(spec: Any, variant: str) -> tuple[Any, Any, list[str]]:
    """(suite spec, policy spec, splits) an eval stage's variant names: the training
    suite's eval splits, or one evaluation suite (`eval.suites`) at its own split."""
    ev, policy_spec = spec.eval.resolve(variant)
    if ev is None:
        return spec.suite, policy_spec, spec.eval.splits_of(policy_spec)
    return ev.suite, policy_spec, [ev.eval_split]


async def _run(io: StageIO, policy_spec: Any, run: str) -> dict[str, float]:
    """Every eval split in one runner (one browser); wall seconds per split."""
    from rmsweb.agents.build import eval_policy
    from rmsweb.rollout.build import build_runner
    from rmsweb.store.writer import ShardWriter
    from rmsweb.suites.factory import LIVE_SUITES

    spec = io.spec
    ev, _ = spec.eval.resolve(io.policy)
    suite_spec, _, splits = _target(spec, io.policy)
    runner = build_runner(suite_spec, run=run, stage="eval")
    if ev is not None and ev.split == "all":
        runner.suite.hold_out_all()
    plan = split_plan(runner.suite, splits, spec.eval.seeds_per_task)
    prices = getattr(policy_spec, "prices", None)  # expert and random cost nothing
    walls: dict[str, float] = {}
    judge = None
    async with runner:
        policy = eval_policy(policy_spec, spec, runner.suite, io.inputs, seed=io.train_seed)
        try:
            if suite_spec.kind in LIVE_SUITES:
                from rmsweb.judge.live import build_live_judge

                judge = build_live_judge(suite_spec, runner.suite)
            with ShardWriter(io.out) as sink:
                for split, (tasks, seeds) in plan.items():
                    start = time.perf_counter()
                    await runner.run(
                        policy,
                        tasks,
                        seeds,
                        sink,
                        split=split,
                        job=eval_job(
                            split, judge=judge, cost_usd=prices.cost_usd if prices else None
                        ),
                        description=f"eval {io.policy} ({split})",
                    )
                    walls[split] = time.perf_counter() - start
        finally:
            await policy.close()
            if judge is not None:
                await judge.close()
    return walls


def _split_metrics(rows: list[EvalRow], records: list[EpisodeRecord]) -> dict[str, Any]:
    overall = rows[-1]
    return {
        "n": overall.n,
        "success": round(overall.success_rate, 4),
        "ci_low": round(overall.ci_low, 4),
        "ci_high": round(overall.ci_high, 4),
        "mean_steps_solved": overall.mean_steps_solved,
        "parse_error_rate": round(overall.parse_error_rate, 4),
        "env_errors": overall.env_errors,
        "policy_errors": overall.policy_errors,
        "wall_s": round(overall.wall_s, 1),
        # Live suites have hundreds of tasks, each run once: their metrics go by category
        # (site, level, segment), so `dvc exp show` gets a dozen columns, not hundreds.
        **(
            {"per_category": category_rates(records)}
            if any(r.episode.category for r in records)
            else {"per_task": {r.task_id: round(r.success_rate, 4) for r in rows[:-1]}}
        ),
    }


def main(io: StageIO) -> None:
    from rmsweb.store.reader import read_records

    spec = io.spec
    suite_spec, policy_spec, splits = _target(spec, io.policy)
    ev = spec.eval.resolve(io.policy)[0]
    run = run_name(io.out)
    io.out.mkdir(parents=True, exist_ok=True)
    walls = asyncio.run(_run(io, policy_spec, run))
    records = read_records(io.out)
    all_rows: list[EvalRow] = []
    metrics: dict[str, Any] = {"policy": policy_spec.name}
    if ev is not None:
        metrics["suite"] = ev.name
    if io.seed is not None:
        metrics["seed"] = io.seed
    splits = sorted(splits, key=REPORT_ORDER.index)
    for i, split in enumerate(splits):
        mine = [r for r in records if r.episode.split == split]
        rows = eval_rows(
            mine,
            run=run,
            policy=policy_spec.name,
            suite=suite_spec.kind,
            split=split,
            wall_s=walls.get(split, 0.0),
        )
        all_rows += rows
        values = {"split": split, **_split_metrics(rows, mine)}
        if i == 0:
            metrics.update(values)
        else:
            metrics[split] = values
    _replace_table(io.out, "evals", all_rows)
    io.write_metrics(metrics)


def _replace_table(run_dir: Any, table: str, rows: list[Any]) -> None:
    """The evals table summarizes all episodes: rewrite it whole on every (re)run."""
    import shutil

    from rmsweb.store.writer import TableWriter

    shutil.rmtree(run_dir / table, ignore_errors=True)
    with TableWriter(run_dir, table) as writer:
        writer.write_many(rows)
