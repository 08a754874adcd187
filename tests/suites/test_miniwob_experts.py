"""Every scripted MiniWoB expert solves its task: 5 test seeds per task by default, all
50 default test seeds in the slow tier (`-m slow`), where the mean gold length must also
match the one `rmsweb suite list miniwob` shows (miniwob_experts.gold.GOLD_STEPS)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from rmsweb.agents.expert import ExpertPolicy
from rmsweb.rollout.runner import EpisodeRunner
from rmsweb.spec import MiniWoBSuite
from rmsweb.store.rows import EpisodeRow, MemorySink
from rmsweb.suites.miniwob import MiniWoB
from rmsweb.suites.miniwob_experts import EXPERTS
from rmsweb.suites.miniwob_experts.gold import GOLD_STEPS, GOLD_TOLERANCE, GOLD_TOLERANCE_OF

pytestmark = pytest.mark.browser

TASKS = sorted(EXPERTS)
_SPEC = MiniWoBSuite()
TEST_SEEDS = range(_SPEC.test.start, _SPEC.test.start + 50)  # the default test seeds
FAST_SEEDS = TEST_SEEDS[:5]


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()


@pytest.fixture(scope="module")
def runner(loop: asyncio.AbstractEventLoop) -> Iterator[EpisodeRunner]:
    # the default suite's step limit: a gold path must fit the episodes experiments run
    suite = MiniWoB(TASKS, test_seeds=TEST_SEEDS, max_steps=_SPEC.max_steps)
    r = EpisodeRunner(suite, contexts=2, progress=False)
    loop.run_until_complete(r.start())
    yield r
    loop.run_until_complete(r.close())


def _episodes(loop, runner, task: str, seeds: range) -> list[EpisodeRow]:
    sink = MemorySink()
    loop.run_until_complete(
        runner.run(ExpertPolicy(EXPERTS), [task], list(seeds), sink, split="test")
    )
    return [rec.episode for rec in sink.records]


def _assert_solved(episodes: list[EpisodeRow], n: int) -> None:
    assert len(episodes) == n
    failed = [(e.seed, e.reward, e.n_steps, e.error) for e in episodes if not e.success]
    assert not failed, f"expert failed on (seed, reward, steps, error): {failed}"


@pytest.mark.parametrize("task", TASKS)
def test_expert_solves_5_test_seeds(loop, runner, task: str) -> None:
    _assert_solved(_episodes(loop, runner, task, FAST_SEEDS), len(FAST_SEEDS))


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS)
def test_expert_solves_50_test_seeds(loop, runner, task: str) -> None:
    episodes = _episodes(loop, runner, task, TEST_SEEDS)
    _assert_solved(episodes, len(TEST_SEEDS))
    mean = sum(e.n_steps for e in episodes) / len(episodes)
    tolerance = GOLD_TOLERANCE_OF.get(task, GOLD_TOLERANCE)
    assert abs(mean - GOLD_STEPS[task]) <= tolerance, f"{task}: mean gold length {mean:.2f}"
