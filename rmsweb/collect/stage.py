"""Stage `collect`: teacher trajectories on the train split, with retries (recipe part R).

For each task and train seed the retry loop (rmsweb.collect.retry) runs up
to its budget of attempts; every attempt and every reflection is stored
(episodes.attempt, the reflections table). Resumable: a (task, seed) whose
attempt 0 is stored is skipped on rerun.
"""

from __future__ import annotations

import asyncio
import csv
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rmsweb.collect.retry import RetryLoop, RetryOutcome
from rmsweb.store.rows import EpisodeRecord, ReflectionRow


def collect_job(
    loop: RetryLoop, judge: Any, reflector: Any, split: str = "train", forget: Any = None
) -> Any:
    """A runner Job: the retry loop for one (task, seed); returns every attempt's record."""

    async def job(runner: Any, policy: Any, task_id: str, seed: int) -> list[EpisodeRecord]:
        async def attempt(k: int, reflections: Sequence[str]) -> EpisodeRecord:
            return await runner.run_episode(
                policy, task_id, seed, split=split, attempt=k, reflections=reflections
            )

        outcome: RetryOutcome = await loop.run(attempt, judge, reflector)
        for rec, verdict in zip(outcome.attempts, outcome.verdicts, strict=True):
            rec.episode.reference_steps = verdict.reference_length
        if forget is not None:
            forget(task_id, seed)  # the oracle's labels of these states are no longer needed
        # A reflection is stored with the attempt it reflects on.
        for r in outcome.reflections:
            rec = outcome.attempts[r.attempt]
            rec.reflections.append(
                ReflectionRow(
                    rec.episode.episode_id, r.attempt, r.text, r.source, r.tokens_in, r.tokens_out
                )
            )
        return outcome.attempts

    return job


def collection_metrics(records: list[EpisodeRecord], max_attempts: int) -> tuple[dict, list[dict]]:
    """Yield after each attempt index, kept steps, teacher cost per kept trajectory."""
    by_key: dict[tuple[str, int], list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        by_key[(r.episode.task_id, r.episode.seed)].append(r)
    n = len(by_key)
    curve = []
    for k in range(max_attempts):
        solved = sum(
            any(r.episode.success for r in rs if r.episode.attempt <= k) for rs in by_key.values()
        )
        curve.append({"attempt": k, "yield": round(solved / n, 4) if n else 0.0})
    # The kept trajectory of a unit: its shortest success (ties: the earlier attempt), as
    # in the report's KEPT query.
    kept_eps = [
        min(wins, key=lambda e: (e.n_steps, e.attempt))
        for rs in by_key.values()
        if (wins := [r.episode for r in rs if r.episode.success])
    ]
    kept = len(kept_eps)
    # Against the oracle's gold length (where the teacher has an oracle): a success with
    # more steps than gold took a detour.
    graded = [r.episode for r in records if r.episode.success and r.episode.reference_steps]
    detoured = sum(1 for e in graded if e.n_steps > e.reference_steps)
    kept_ratio = [e.n_steps / e.reference_steps for e in kept_eps if e.reference_steps]
    failures = sum(1 for r in records if not r.episode.success)
    calls = sum(len(r.steps) for r in records)
    tokens = sum(r.episode.tokens_in + r.episode.tokens_out for r in records)
    seconds = sum(r.episode.wall_s for r in records)
    attempts = len(records)
    metrics = {
        "tasks_x_seeds": n,
        "attempts": attempts,
        "attempts_per_task_seed": round(attempts / n, 3) if n else 0.0,
        "yield": curve[-1]["yield"] if curve else 0.0,
        "yield_first_attempt": curve[0]["yield"] if curve else 0.0,
        "kept": kept,
        "kept_mean_steps": round(sum(e.n_steps for e in kept_eps) / kept, 3) if kept else None,
        "kept_steps_over_gold": round(sum(kept_ratio) / len(kept_ratio), 4) if kept_ratio else None,
        "detour_fraction": round(detoured / len(graded), 4) if graded else None,
        "failure_fraction": round(failures / attempts, 4) if attempts else None,
        "env_errors": sum(1 for r in records if r.episode.error),
        "teacher_calls_per_kept": round(calls / kept, 3) if kept else None,
        "teacher_tokens_per_kept": round(tokens / kept, 1) if kept else None,
        "teacher_seconds_per_kept": round(seconds / kept, 3) if kept else None,
        "reflections": sum(len(r.reflections) for r in records),
    }
    return metrics, curve


def write_curve(path: Path, curve: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["attempt", "yield"])
        writer.writeheader()
        writer.writerows(curve)


async def _collect(io: Any, loop: RetryLoop) -> float:
    from rmsweb.collect.teacher import build_teacher
    from rmsweb.store.writer import ShardWriter
    from rmsweb.suites.factory import build_runner

    spec = io.spec
    runner = build_runner(spec.suite, run=f"collect/{io.exp}", stage="collect")
    seeds = runner.suite.seeds("train")
    if spec.collect.episodes_per_task:
        seeds = seeds[: spec.collect.episodes_per_task]
    start = time.perf_counter()
    async with runner:
        teacher = build_teacher(spec, runner.suite)
        try:
            with ShardWriter(io.out) as sink:
                await runner.run(
                    teacher.policy,
                    runner.suite.task_ids(),
                    seeds,
                    sink,
                    split="train",
                    job=collect_job(loop, teacher.judge, teacher.reflector, forget=teacher.forget),
                    description=f"collect ({spec.collect.retry})",
                )
        finally:
            await teacher.policy.close()
    return time.perf_counter() - start


def main(io: Any) -> None:  # io: rmsweb.stage_io.StageIO
    from rmsweb.store.reader import read_records

    c = io.spec.collect
    loop = RetryLoop(c.retry, c.max_retries, c.teacher_budget)
    io.out.mkdir(parents=True, exist_ok=True)
    wall = asyncio.run(_collect(io, loop))
    metrics, curve = collection_metrics(read_records(io.out), loop.attempts)
    metrics["wall_s"] = round(wall, 1)
    metrics["retry"] = c.retry
    write_curve(io.plot_path("yield.csv"), curve)
    io.write_metrics(metrics)
