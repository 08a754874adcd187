"""Leaving the task page is the policy's mistake: a step error it sees, the episode goes
on, no rerun (before the guard, MiniWoB reported it as an environment error and reran)."""

from __future__ import annotations

import asyncio

import pytest

from rmsweb.agents.base import ActResult
from rmsweb.agents.expert import ExpertPolicy
from rmsweb.env.types import ActRequest
from rmsweb.rollout.runner import EpisodeRunner
from rmsweb.store.rows import MemorySink
from rmsweb.suites.miniwob import MiniWoB
from rmsweb.suites.miniwob_experts import EXPERTS

pytestmark = pytest.mark.browser


class WandersOff(ExpertPolicy):
    """First tries to leave the task page (another page, a reload, a foreign site), then
    solves the task like the expert."""

    name = "wanders-off"

    def __init__(self, detours: list[str]) -> None:
        super().__init__(EXPERTS)
        self.detours = detours
        self.requests: list[ActRequest] = []

    async def act(self, request: ActRequest) -> ActResult:
        self.requests.append(request)
        if request.step < len(self.detours):
            return ActResult(text=self.detours[request.step])
        return await super().act(request)


def test_leaving_a_miniwob_page_is_a_step_error_not_an_env_error() -> None:
    async def go():
        suite = MiniWoB(["click-button"], test_seeds=[100_000])
        async with EpisodeRunner(suite, contexts=1, progress=False, max_env_retries=1) as runner:
            base = suite.base_url
            task_url = f"{base}/miniwob/click-button.html"
            policy = WandersOff(
                [
                    f'goto("{base}/miniwob/click-link.html")',
                    f'goto("{task_url}")',
                    'goto("http://example.com/")',
                ]
            )
            sink = MemorySink()
            await runner.run(policy, ["click-button"], [100_000], sink, split="test")
        return sink.records[0], policy, base, task_url

    rec, policy, base, task_url = asyncio.run(go())
    ep = rec.episode
    assert ep.error is None and ep.env_retries == 0  # no rerun, nothing dropped
    assert ep.success and ep.n_steps == 4
    leave = "(it would leave the task page)"
    assert (
        rec.steps[0].env_error == f"navigation to {base}/miniwob/click-link.html is blocked {leave}"
    )
    assert rec.steps[1].env_error == f"navigation to {task_url} is blocked {leave}"
    assert rec.steps[2].env_error.startswith("navigation to http://example.com/ is blocked")
    # the policy saw each refusal in its next observation
    assert policy.requests[1].observation.last_error == rec.steps[0].env_error
    assert policy.requests[3].observation.last_error == rec.steps[2].env_error
