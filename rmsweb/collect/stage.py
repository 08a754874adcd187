"""Stage `collect`: teacher trajectories on the train split, with retries (recipe part R).

For each task and train seed the retry loop (rmsweb.collect.retry) runs up
to its budget of attempts; every attempt and every reflection is stored
(episodes.attempt, the reflections table, with the oracle's grade of each
reflection). Resumable: a (task, seed) whose attempt 0 is stored is skipped on rerun.
On several SkyPilot nodes each plays its share of the (task, seed) units and the
head merges them into io.out before the metrics (rmsweb.rollout.sharded). On one
machine `collect.processes` > 1 plays them over that many browsers at once
(rmsweb.rollout.processes): the stage runs alone and one browser keeps ~1.2 cores busy.
"""

from __future__ import annotations

import asyncio
import csv
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rmsweb.collect.job import collect_job
from rmsweb.collect.metrics import collection_metrics
from rmsweb.collect.retry import RetryLoop
from rmsweb.distributed import node_rank
from rmsweb.rollout.processes import is_helper
from rmsweb.stage_io import StageIO

if TYPE_CHECKING:
    from rmsweb.agents.base import Policy
    from rmsweb.store.rows import EpisodeRecord


def write_curve(path: Path, curve: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["attempt", "yield"])
        writer.writeheader()
        writer.writerows(curve)


async def _collect(io: StageIO, loop: RetryLoop) -> float:
    from rmsweb.collect.teacher import build_teacher
    from rmsweb.rollout.build import build_runner
    from rmsweb.rollout.sharded import run_sharded

    spec = io.spec
    runner = build_runner(spec.suite, run=f"collect/{io.exp}", stage="collect")
    seeds = runner.suite.seeds("train")
    if spec.collect.episodes_per_task:
        seeds = seeds[: spec.collect.episodes_per_task]
    start = time.perf_counter()
    async with runner:

        async def play(policy: Policy, task_id: str, seed: int) -> EpisodeRecord:
            # The gold expert's episode, for the judge's gold length; not stored.
            return await runner.run_episode(policy, task_id, seed, split="train")

        teacher = build_teacher(spec, runner.suite, play=play)
        job = collect_job(
            loop,
            teacher.judge,
            teacher.reflector,
            forget=teacher.forget,
            labels=teacher.labels,
            mistake_of=teacher.mistake_of,
        )
        try:
            # One node: into io.out. Several: this node's share; the head merges them all.
            await run_sharded(
                runner,
                teacher.policy,
                runner.suite.task_ids("train"),
                seeds,
                io.out,
                split="train",
                job=job,
                description=f"collect ({spec.collect.retry})",
                processes=spec.collect.processes,
                argv=io.argv,
            )
        finally:
            await teacher.close()
    return time.perf_counter() - start


def main(io: StageIO) -> None:
    from rmsweb.store.reader import read_records

    c = io.spec.collect
    loop = RetryLoop(c.retry, c.max_retries, c.teacher_budget)
    io.out.mkdir(parents=True, exist_ok=True)
    wall = asyncio.run(_collect(io, loop))
    if node_rank() != 0 or is_helper():
        return  # a worker node (the head merges its share) or a helper process (same folder)
    metrics, curve = collection_metrics(read_records(io.out), loop.attempts)
    metrics["wall_s"] = round(wall, 1)
    metrics["retry"] = c.retry
    if c.teacher.kind == "expert":  # the mistake model's settings, for the retry study
        metrics["teacher_persistence"] = c.teacher.persistence
        metrics["teacher_adherence"] = c.teacher.adherence
        # 0 without habits: the habit sweeps' rows (rmsweb.report.retry_study).
        metrics["teacher_habit_rate"] = c.teacher.habits.rate if c.teacher.habits else 0.0
    write_curve(io.plot_path("yield.csv"), curve)
    io.write_metrics(metrics)
