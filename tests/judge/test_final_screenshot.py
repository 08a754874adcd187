"""The page after the last action reaches the judge: N+1 screenshots for N page actions,
however the episode ends (max_steps, the task's own end, answer()), as the
Online-Mind2Web layout has them (rmsweb.rollout.runner, rmsweb.judge.episode)."""

from __future__ import annotations

import asyncio

import pytest

from rmsweb.agents.base import ActResult
from rmsweb.agents.expert import ExpertPolicy
from rmsweb.env.types import ActRequest
from rmsweb.judge.episode import from_record
from rmsweb.rollout.runner import EpisodeRunner
from rmsweb.suites.miniwob import MiniWoB
from rmsweb.suites.miniwob_experts import EXPERTS

pytestmark = pytest.mark.browser


class Scripted:
    """A policy that plays `outputs` in order (then repeats the last)."""

    name = "scripted"

    def __init__(self, outputs: list[str]) -> None:
        self.outputs = outputs

    async def act(self, request: ActRequest) -> ActResult:
        return ActResult(text=self.outputs[min(request.step, len(self.outputs) - 1)])

    async def close(self) -> None:
        pass


def test_every_ending_leaves_the_last_page_for_the_judge() -> None:
    suite = MiniWoB(["click-button"], train_seeds=range(3), test_seeds=range(7, 9))

    async def go():
        async with EpisodeRunner(
            suite, contexts=1, progress=False, screenshots=True, max_steps=2
        ) as runner:
            # 1. the step limit: two scrolls, never done
            capped = await runner.run_episode(
                Scripted(['scroll("down")', 'scroll("up")']), "click-button", 0
            )
            # 2. the task ends itself after a click (the expert's gold path)
            expert = ExpertPolicy({"click-button": EXPERTS["click-button"]})
            done = await runner.run_episode(expert, "click-button", 0)
            # 3. the policy claims the end: the answer step's screenshot is the last page
            claimed = await runner.run_episode(Scripted(["stop()"]), "click-button", 0)
        return capped, done, claimed

    capped, done, claimed = asyncio.run(go())
    shas = {s.sha256 for s in capped.screenshots}

    # 1. two page actions, two step screenshots, and the page after the second
    assert capped.episode.n_steps == 2 and capped.episode.final_screenshot in shas
    assert len(from_record(capped).screenshots) == 3
    # 2. the page after the gold click differs from the one it was made on
    assert done.episode.success and done.episode.final_screenshot is not None
    last_step = done.steps[-1].screenshot
    assert done.episode.final_screenshot != last_step
    n_actions = len(from_record(done).actions)
    assert len(from_record(done).screenshots) == n_actions + 1
    # 3. stop() is no page action: its step's screenshot already is the last page
    assert claimed.episode.final_screenshot is None
    assert (len(from_record(claimed).actions), len(from_record(claimed).screenshots)) == (0, 1)


def test_no_final_screenshot_without_screenshots() -> None:
    suite = MiniWoB(["click-button"], train_seeds=range(3), test_seeds=range(7, 9))

    async def go():
        async with EpisodeRunner(suite, contexts=1, progress=False, max_steps=1) as runner:
            return await runner.run_episode(Scripted(['scroll("down")']), "click-button", 0)

    rec = asyncio.run(go())
    assert rec.episode.final_screenshot is None and rec.screenshots == []
