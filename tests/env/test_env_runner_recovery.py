"""Environment errors: a killed or hung browser is recovered, the episode rerun, the run
goes on, and nothing of Chromium is left once the runner exits."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from rmsweb.agents.base import ActResult
from rmsweb.agents.expert import ExpertPolicy
from rmsweb.env.launch import group_pids
from rmsweb.env.server import StaticServer
from rmsweb.env.types import ActRequest
from rmsweb.rollout.runner import EpisodeRunner
from rmsweb.store.rows import EpisodeRecord, EpisodeRow, MemorySink, episode_key
from rmsweb.suites.base import Outcome
from rmsweb.suites.miniwob import MiniWoB
from rmsweb.suites.miniwob_experts import EXPERTS

pytestmark = pytest.mark.browser
PAGES = Path(__file__).parent / "pages"


class LocalTask:
    """done.html: "Finish" ends the episode with success; "Hang" freezes the page."""

    suite = "local"
    expert = None
    screenshot_clip = None

    def __init__(self, task_id: str, seed: int, split: str, base: str) -> None:
        self.id, self.seed, self.split = task_id, seed, split
        self.start_url = f"{base}/done.html"
        self.instruction = ""

    async def setup(self, session) -> str:
        await session.call(session.page.goto(self.start_url), "load")
        self.instruction = f"Press {self.id}."
        return self.instruction

    async def evaluate(self, session, answer) -> Outcome:
        done = await session.evaluate("() => !!window.finished")
        return Outcome(reward=float(done), success=done, done=done)


class LocalSuite:
    name = "local"
    max_steps = 3
    exclude = ()

    def __init__(self) -> None:
        self.server: StaticServer | None = None
        self.allowed_origins: tuple[str, ...] | None = None

    async def start(self) -> None:
        self.server = StaticServer(PAGES)
        self.allowed_origins = (self.server.origin,)

    async def close(self) -> None:
        if self.server:
            self.server.close()

    def task_ids(self, split: str | None = None) -> list[str]:
        return ["Finish", "Hang"]

    def seeds(self, split: str) -> list[int]:
        return [0, 1]

    def expert(self, task_id: str):
        return None

    def task(self, task_id: str, seed: int, split: str) -> LocalTask:
        assert self.server is not None
        return LocalTask(task_id, seed, split, self.server.origin)


class PressPolicy:
    """Clicks the button named like the task."""

    name = "press"

    async def act(self, request: ActRequest) -> ActResult:
        for e in request.observation.elements.values():
            if e.role == "button" and e.name == request.task_id:
                return ActResult(text=f"click({e.id})")
        return ActResult(text="stop()")

    async def close(self) -> None:
        pass


class KillingPolicy(ExpertPolicy):
    """The expert, but on its `kill_at`-th call it SIGKILLs Chromium first."""

    def __init__(self, runner: EpisodeRunner, kill_at: int) -> None:
        super().__init__(EXPERTS)
        self.runner, self.kill_at, self.calls = runner, kill_at, 0
        self.killed_pid: int | None = None

    async def act(self, request: ActRequest) -> ActResult:
        self.calls += 1
        if self.calls == self.kill_at:
            assert self.runner.pool is not None and self.runner.pool.browser_pid
            self.killed_pid = self.runner.pool.browser_pid
            os.kill(self.killed_pid, signal.SIGKILL)
        return await super().act(request)


def test_killed_browser_is_relaunched_and_episode_rerun() -> None:
    async def go():
        suite = MiniWoB(["click-button", "enter-text"], test_seeds=range(100_000, 100_003))
        runner = EpisodeRunner(suite, contexts=2, progress=False, max_env_retries=2)
        async with runner:
            policy = KillingPolicy(runner, kill_at=3)
            sink = MemorySink()
            stats = await runner.run(
                policy, suite.task_ids(), suite.seeds("test"), sink, split="test"
            )
            assert runner.pool is not None
            pgids = [policy.killed_pid, runner.pool.browser_pid]
            relaunches = runner.pool.relaunches
        return stats, sink, pgids, relaunches

    stats, sink, pgids, relaunches = asyncio.run(go())
    assert stats.episodes == 6
    assert stats.successes == 6  # every episode completed, after reruns
    assert stats.env_errors == 0
    assert stats.env_retries >= 1  # the episodes in flight at the kill were rerun
    rerun = [r.episode for r in sink.records if r.episode.env_retries > 0]
    assert rerun and all(ep.success and ep.error is None for ep in rerun)
    assert relaunches == 1
    assert pgids[0] != pgids[1]
    for pgid in pgids:  # shutdown left no process of either browser behind
        assert pgid is not None and group_pids(pgid) == []


def test_hung_page_is_an_env_error_and_the_run_goes_on() -> None:
    async def go():
        runner = EpisodeRunner(
            # 3 s: ~60 x what an action on done.html takes, so only the frozen page hits it
            # on a loaded machine (the Hang task costs 2 x 3 s)
            LocalSuite(),
            contexts=1,
            progress=False,
            action_timeout_s=3.0,
            max_env_retries=1,
        )
        async with runner:
            sink = MemorySink()
            stats = await runner.run(PressPolicy(), ["Hang", "Finish"], [0], sink)
            assert runner.pool is not None
            pid = runner.pool.browser_pid
        return stats, sink, pid

    stats, sink, pid = asyncio.run(go())
    by_task = {r.episode.task_id: r.episode for r in sink.records}
    hang, finish = by_task["Hang"], by_task["Finish"]
    assert hang.error is not None and "no answer within 3.0 s" in hang.error
    assert (hang.success, hang.env_retries, hang.n_steps) == (False, 1, 0)
    assert finish.success and finish.error is None  # the next episode runs normally
    assert stats.env_errors == 1
    assert pid is not None and group_pids(pid) == []


def test_episode_timeout_and_resume() -> None:
    class SlowPolicy(PressPolicy):
        async def act(self, request: ActRequest) -> ActResult:
            await asyncio.sleep(1.0)
            return await super().act(request)

    done = EpisodeRecord(
        episode=EpisodeRow(
            episode_id=episode_key("Finish", 1, "press"),
            run="",
            stage="",
            suite="local",
            task_id="Finish",
            seed=1,
            split="train",
            policy="press",
        ),
        steps=[],
    )

    async def go():
        runner = EpisodeRunner(
            LocalSuite(), contexts=2, progress=False, episode_timeout_s=0.5, max_env_retries=0
        )
        async with runner:
            sink = MemorySink()
            sink.write(done)
            stats = await runner.run(SlowPolicy(), ["Finish"], [0, 1], sink)
        return stats, sink

    stats, sink = asyncio.run(go())
    assert stats.skipped == 1 and stats.episodes == 1  # seed 1 was in the sink already
    ep = sink.records[-1].episode
    assert ep.seed == 0 and ep.error == "episode took longer than 0.5 s"


class ScriptedOutputs(PressPolicy):
    """Says a fixed list of outputs, then presses the task's button; keeps its requests."""

    name = "scripted"

    def __init__(self, outputs: list[str]) -> None:
        self.outputs = list(outputs)
        self.requests: list[ActRequest] = []

    async def act(self, request: ActRequest) -> ActResult:
        self.requests.append(request)
        if self.outputs:
            return ActResult(text=self.outputs.pop(0))
        return await super().act(request)


def test_missing_id_and_garbage_are_step_errors_not_crashes() -> None:
    policy = ScriptedOutputs(["click(999)", "I would like to press it"])

    async def go():
        async with EpisodeRunner(LocalSuite(), contexts=1, progress=False) as runner:
            return await runner.run_episode(policy, "Finish", 0, attempt=2, reflections=["r1"])

    rec = asyncio.run(go())
    ep, steps = rec.episode, rec.steps
    assert ep.success and ep.error is None and ep.n_steps == 3 and ep.attempt == 2
    assert ep.episode_id == episode_key("Finish", 0, "scripted", 2)
    assert steps[0].env_error == "no element with id 999 on the page"
    assert steps[0].parse_ok and steps[0].action is not None and steps[0].action.target == "999"
    assert not steps[1].parse_ok and steps[1].action is None and steps[1].env_error is None
    assert steps[1].parse_error == 'no action found; expected e.g. click(3) or fill(3, "text")'
    assert steps[2].done and steps[2].reward == 1.0
    # the policy saw each error in the next observation and in its history
    second, third = policy.requests[1], policy.requests[2]
    assert second.observation.last_error == "no element with id 999 on the page"
    assert second.history[0].action_text == "click(999)"
    assert third.observation.last_error.startswith("could not parse the action: no action found")
    assert third.history[1].action_text is None
    assert [r.reflections for r in policy.requests] == [["r1"]] * 3
    assert [r.attempt for r in policy.requests] == [2, 2, 2]
