"""The tokenizer's training texts: what the suite shows a policy, independent of any arm.

Each task runs on the first train seeds with its scripted expert (a task without an
expert stops at once, so its start page is still seen). The texts are the
instructions, observations and expert outputs, plus the prompt's fixed texts, so
element ids and common UI words become single tokens. Collected data is not used:
arms that collect differently must still start from the same model.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Mapping
from typing import Any

from rmsweb.agents.base import ActResult
from rmsweb.agents.prompt import SYSTEM_PROMPTS
from rmsweb.env.actions import format_action
from rmsweb.env.types import ActRequest, Expert
from rmsweb.rollout.build import build_runner
from rmsweb.store.rows import EpisodeRecord, MemorySink


class _ExpertOrStop:
    """The expert's first acceptable action; `stop()` where a task has no expert."""

    name = "corpus"

    def __init__(self, experts: Mapping[str, Expert | None]) -> None:
        self.experts = experts

    async def act(self, request: ActRequest) -> ActResult:
        t = time.perf_counter()
        expert = self.experts.get(request.task_id)
        actions = (
            expert.acceptable_actions(request.instruction, request.observation, request.history)
            if expert
            else []
        )
        text = format_action(actions[0]) if actions else "stop()"
        return ActResult(text=text, latency_s=time.perf_counter() - t)

    async def close(self) -> None:
        pass


async def _rollouts(suite_spec: Any, seeds_per_task: int) -> list[EpisodeRecord]:
    runner = build_runner(suite_spec, run="model/corpus", stage="model", progress=False)
    sink = MemorySink()
    async with runner:
        suite = runner.suite
        tasks = suite.task_ids("train")  # live suites split tasks: train ones only
        policy = _ExpertOrStop({t: suite.expert(t) for t in tasks})
        seeds = suite.seeds("train")[:seeds_per_task]
        await runner.run(policy, tasks, seeds, sink, split="train")
    return sink.records


def texts(records: list[EpisodeRecord]) -> Iterator[str]:
    yield from (t for t in SYSTEM_PROMPTS.values() if t)
    for rec in records:
        yield rec.episode.instruction
        for st in rec.steps:
            yield st.obs_text
            yield st.output_text


def suite_corpus(suite_spec: Any, seeds_per_task: int) -> list[str]:
    """The tokenizer corpus of a suite spec (runs a browser for a few hundred episodes)."""
    return list(texts(asyncio.run(_rollouts(suite_spec, seeds_per_task))))


def budget_free(suite_spec: Any, seeds_per_task: int) -> Any:
    """The suite spec with its train range set to the corpus's own seeds.

    With pretraining on, one model serves every demonstration budget of a study, so the
    corpus must not depend on suite.train.count: it runs on `seeds_per_task` seeds from
    suite.train.start whatever the count (the suite refuses a range that reaches the
    val, test or mine seeds). Suites without a train seed range are returned as they are.
    """
    from rmsweb.spec.common import SeedRange

    train = getattr(suite_spec, "train", None)
    if not isinstance(train, SeedRange):
        return suite_spec
    return suite_spec.model_copy(
        update={"train": SeedRange(start=train.start, count=seeds_per_task)}
    )


def suite_corpus_and_instructions(
    suite_spec: Any, seeds_per_task: int
) -> tuple[list[str], list[str]]:
    """The tokenizer corpus and the distinct task instructions (in first-seen order)."""
    records = asyncio.run(_rollouts(suite_spec, seeds_per_task))
    instructions = list(dict.fromkeys(rec.episode.instruction for rec in records))
    return list(texts(records)), instructions
