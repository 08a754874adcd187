"""Faults of the policy: an exception of the policy, of the parser or of executing an action,
and of a whole job, fails that step or that episode (counted, stored, reported), never the run.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rmsweb.agents.base import ActResult
from rmsweb.agents.expert import ExpertPolicy
from rmsweb.env.session import PageSession
from rmsweb.env.types import ActRequest
from rmsweb.errors import UserError
from rmsweb.report.tables import eval_rows_for_run, eval_table
from rmsweb.rollout.runner import EpisodeRunner
from rmsweb.store.reader import read_records
from rmsweb.store.rows import EpisodeRecord, MemorySink
from rmsweb.store.writer import ShardWriter
from rmsweb.suites.miniwob import MiniWoB
from rmsweb.suites.miniwob_experts import EXPERTS

pytestmark = [pytest.mark.faults, pytest.mark.browser]

TASKS = ["click-button", "enter-text"]  # enter-text takes 2+ steps: a fault can land mid-way
SEEDS = [100_000, 100_001, 100_002]


class FaultyExpert(ExpertPolicy):
    """The expert, with one fault planted per (task, seed, step) in `faults`."""

    def __init__(self, faults: dict[tuple[str, int, int], str]) -> None:
        super().__init__(EXPERTS, name="faulty")
        self.faults = faults

    async def act(self, request: ActRequest) -> ActResult:
        fault = self.faults.get((request.task_id, request.seed, request.step))
        if fault == "raise":
            raise ValueError("the model returned NaN logits")
        if fault == "not-text":
            return ActResult(text=None)  # type: ignore[arg-type]  # a backend bug
        if fault == "boom-action":
            return ActResult(text='press("Boom")')
        if fault == "user-error":
            raise UserError("endpoint http://127.0.0.1:1/v1 rejected the request (HTTP 401)")
        return await super().act(request)


@pytest.fixture
def boom_on_execute(monkeypatch: pytest.MonkeyPatch) -> None:
    """Executing press("Boom") raises inside the environment code (not an EnvError)."""
    real = PageSession.execute

    async def execute(self: PageSession, action):  # type: ignore[no-untyped-def]
        if action.type == "press" and action.text == "Boom":
            raise RuntimeError("unexpected key table state")
        return await real(self, action)

    monkeypatch.setattr(PageSession, "execute", execute)


def run(policy, sink, job=None):  # type: ignore[no-untyped-def]
    async def go():  # type: ignore[no-untyped-def]
        suite = MiniWoB(TASKS, test_seeds=SEEDS)
        async with EpisodeRunner(suite, contexts=2, progress=False) as runner:
            return await runner.run(policy, TASKS, SEEDS, sink, split="test", job=job)

    return asyncio.run(go())


def test_policy_parser_and_execution_faults_fail_a_step_or_an_episode(
    boom_on_execute: None, tmp_path: Path
) -> None:
    policy = FaultyExpert(
        {
            ("enter-text", 100_001, 1): "raise",  # after one good step
            ("click-button", 100_000, 0): "not-text",
            ("click-button", 100_002, 0): "boom-action",
        }
    )
    out = tmp_path / "eval" / "e" / "faulty"
    with ShardWriter(out) as sink:
        stats = run(policy, sink)
    assert (stats.episodes, stats.policy_errors, stats.env_errors) == (6, 1, 0)
    assert stats.successes == 5  # every other episode went on to succeed
    recs = {(r.episode.task_id, r.episode.seed): r for r in read_records(out)}

    failed = recs[("enter-text", 100_001)].episode
    assert failed.policy_error.startswith("ValueError: the model returned NaN logits (at ")
    assert "test_policy_errors.py:" in failed.policy_error  # where it was raised
    assert (failed.success, failed.n_steps, failed.error) == (False, 1, None)

    not_text = recs[("click-button", 100_000)]
    assert not_text.episode.success and not_text.episode.policy_error is None
    bad = not_text.steps[0]
    assert (bad.parse_ok, bad.action, bad.output_text) == (False, None, "None")
    assert bad.parse_error.startswith("the parser raised ActionInputError")

    boom = recs[("click-button", 100_002)]
    assert boom.episode.success and boom.episode.policy_error is None
    assert boom.steps[0].parse_ok
    assert boom.steps[0].env_error.startswith(
        'could not execute press("Boom"): RuntimeError: unexpected key table state'
    )

    # The report and the eval stage's metrics count it apart, as a failure in n.
    (top, *_) = eval_rows_for_run(out, run="eval/e/faulty")
    assert (top.n, top.policy_errors, top.env_errors) == (6, 1, 0)
    assert eval_table([top]).to_markdown().splitlines()[2].endswith("| 0 | 1 |")


def test_a_job_that_raises_is_stored_as_a_failed_attempt_and_not_rerun() -> None:
    async def job(runner, policy, task_id, seed) -> list[EpisodeRecord]:  # type: ignore[no-untyped-def]
        if (task_id, seed) == ("enter-text", 100_002):
            raise KeyError("reflector lost its prompt")
        return [await runner.run_episode(policy, task_id, seed, split="test")]

    sink = MemorySink()
    stats = run(ExpertPolicy(EXPERTS), sink, job=job)
    assert (stats.episodes, stats.successes, stats.policy_errors) == (6, 5, 1)
    (err,) = [r.episode for r in sink.records if r.episode.policy_error]
    assert err.policy_error.startswith("job failed: KeyError: 'reflector lost its prompt'")
    assert (err.task_id, err.seed, err.attempt, err.success) == ("enter-text", 100_002, 0, False)
    again = run(ExpertPolicy(EXPERTS), sink, job=job)  # a resumed run: nothing left to do
    assert (again.skipped, again.episodes) == (6, 0)


def test_a_user_error_stops_the_run() -> None:
    # A key or URL to fix would fail every episode the same way: stop and say so.
    policy = FaultyExpert({("click-button", 100_001, 0): "user-error"})
    with pytest.raises(UserError, match="HTTP 401"):
        run(policy, MemorySink())
