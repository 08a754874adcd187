"""Invariant: `retry: none` collects exactly the episodes of plain collection."""

from __future__ import annotations

import asyncio
from dataclasses import asdict

import pytest

from rmsweb.collect.job import collect_job
from rmsweb.collect.retry import RetryLoop
from rmsweb.collect.teacher import build_teacher
from rmsweb.rollout.build import build_runner
from rmsweb.spec import ExperimentSpec
from rmsweb.store.rows import MemorySink

pytestmark = pytest.mark.browser

TIMING = {"started_at", "wall_s", "latency_s"}
# The judge's annotation of an attempt (its task-level reference length), not what
# the teacher did: plain collection has no judge, so it is compared apart below.
ANNOTATIONS = {"reference_steps"}


def strip(record):
    ep = {k: v for k, v in asdict(record.episode).items() if k not in TIMING | ANNOTATIONS}
    steps = [{k: v for k, v in asdict(s).items() if k not in TIMING} for s in record.steps]
    return ep, steps


def test_retry_none_equals_plain_collection() -> None:
    spec = ExperimentSpec.model_validate(
        {
            "name": "inv",
            "suite": {
                "tasks": ["click-button", "enter-text"],
                "train": {"start": 0, "count": 6},  # shrunk: 12 episodes per arm
                "browser": {"contexts": 2},
            },
            # High rates so the teacher's mistakes show up in both arms.
            "collect": {
                "teacher": {"kind": "expert", "error_rate": 0.5, "detour_rate": 0.5},
                "retry": "none",
                "max_retries": 0,
            },
        }
    )
    plain, retried = MemorySink(), MemorySink()

    async def go() -> None:
        runner = build_runner(spec.suite, run="collect/inv", stage="collect", progress=False)
        async with runner:
            seeds = runner.suite.seeds("train")
            teacher = build_teacher(spec, runner.suite)
            await runner.run(teacher.policy, runner.suite.task_ids(), seeds, plain)

            async def play(policy, task_id, seed):  # the gold expert, for gold lengths
                return await runner.run_episode(policy, task_id, seed, split="train")

            teacher = build_teacher(spec, runner.suite, play=play)
            job = collect_job(
                RetryLoop("none", 0), teacher.judge, teacher.reflector, labels=teacher.labels
            )
            await runner.run(teacher.policy, runner.suite.task_ids(), seeds, retried, job=job)

    asyncio.run(go())
    a = sorted((strip(r) for r in plain.records), key=lambda x: x[0]["episode_id"])
    b = sorted((strip(r) for r in retried.records), key=lambda x: x[0]["episode_id"])
    assert len(a) == 12
    assert a == b
    assert any(not ep["success"] for ep, _ in a), "the mistake model made some attempts fail"
    assert all(not r.reflections for r in retried.records)
    # The judge saw every solved attempt and gave it a reference length; plain collection
    # did not.
    assert all(r.episode.reference_steps is None for r in plain.records)
    assert all(r.episode.reference_steps for r in retried.records if r.episode.success), (
        "the judge annotates solved attempts with their reference length"
    )
