"""Habits on real MiniWoB pages (headless Chromium): the collect job with reflect keeps
shorter trajectories than plain collection, which keeps the habits; and the select task
of the steps experiment's suite (choose-list) is where wrong_option occurs."""

from __future__ import annotations

import asyncio

import pytest

from rmsweb.agents.mistaken_expert import MistakenExpert
from rmsweb.collect.job import collect_job
from rmsweb.collect.metrics import collection_metrics
from rmsweb.collect.retry import RetryLoop
from rmsweb.collect.teacher import build_teacher
from rmsweb.rollout.build import build_runner
from rmsweb.rollout.runner import EpisodeRunner
from rmsweb.spec import ExperimentSpec
from rmsweb.store.rows import MemorySink
from rmsweb.suites.miniwob import MiniWoB
from rmsweb.suites.miniwob_experts import EXPERTS

pytestmark = pytest.mark.browser

TASKS = ["login-user", "multi-layouts"]


def collect(retry: str) -> list:
    spec = ExperimentSpec.model_validate(
        {
            "name": "habits",
            "suite": {
                "tasks": TASKS,
                "train": {"start": 0, "count": 3},
                "browser": {"contexts": 2},
            },
            # Habits only (no per-attempt mistakes or detours), at a high rate.
            "collect": {
                "teacher": {"kind": "expert", "adherence": 1.0, "habits": {"rate": 0.9}},
                "retry": retry,
                "max_retries": 0 if retry == "none" else 2,
                "reference_seeds": 2,
            },
        }
    )
    sink = MemorySink()

    async def go() -> None:
        runner = build_runner(spec.suite, run="collect/habits", stage="collect", progress=False)
        async with runner:

            async def play(policy, task_id, seed):  # the gold expert, for reference lengths
                return await runner.run_episode(policy, task_id, seed, split="train")

            t = build_teacher(spec, runner.suite, play=play)
            c = spec.collect
            job = collect_job(RetryLoop(c.retry, c.max_retries), t.judge, t.reflector)
            seeds = runner.suite.seeds("train")
            await runner.run(t.policy, runner.suite.task_ids(), seeds, sink, job=job)
            await t.close()

    asyncio.run(go())
    return sink.records


def test_reflect_keeps_shorter_attempts_than_plain_collection_with_habits() -> None:
    plain, _ = collection_metrics(collect("none"), 1)
    reflected, _ = collection_metrics(collect("reflect"), 3)
    assert plain["yield"] == reflected["yield"] == 1.0
    # The habits cost steps on every unit here; reflections remove them on the retries.
    assert plain["kept_mean_steps"] >= 4.5
    assert reflected["kept_mean_steps"] <= plain["kept_mean_steps"] - 1.0
    assert plain["steps_saved"] == 0.0 and reflected["steps_saved"] > 0.2


def test_wrong_option_occurs_on_the_select_task() -> None:
    suite = MiniWoB(["choose-list"], train_seeds=range(6), test_seeds=range(100, 101))
    teacher = MistakenExpert(
        {"choose-list": EXPERTS["choose-list"]},
        1.0,
        0.0,
        ["wrong_option"],
        ["scroll"],
        max_mistake_step=1,
    )

    async def go() -> list:
        runner = EpisodeRunner(suite, contexts=2, progress=False, screenshots=False)
        await runner.start()
        try:
            return [
                await runner.run_episode(teacher, "choose-list", s, split="train") for s in range(6)
            ]
        finally:
            await runner.close()

    records = asyncio.run(go())
    made = [teacher.mistake_of("choose-list", s, 0) for s in range(6)]
    assert made.count((0, "wrong_option")) >= 4, made
    for m, r in zip(made, records, strict=True):
        if m is not None:  # another option of the list, then the expert resets it
            assert r.steps[0].output_text.startswith("select(1, ")
            assert r.steps[1].output_text.startswith("select(1, ")
