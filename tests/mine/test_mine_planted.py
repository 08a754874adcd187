"""Planted errors: mining finds exactly the mistakes a wrapped expert was made to make.

The policy is the scripted expert, except at planted (task, seed, step)s, where it
makes a known mistake of a known kind, and at one planted 50/50 state, where its
samples alternate between the right action and a wrong one. Rolled out through the
real runner, browser and MiningPolicy (oracle labels, k = 4 probes), the mined
critical states must be exactly the planted ones (precision and recall 100%) with the
planted failure modes, and the only fragile state the 50/50 one.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

import pytest

from rmsweb.agents.base import ActResult
from rmsweb.agents.prompt import PromptConfig, build_messages
from rmsweb.env.actions import Action, click, fill, format_action, goto, stop
from rmsweb.env.types import ActRequest
from rmsweb.mine.critical import critical_state, fragile_states, history_before
from rmsweb.mine.label import MiningPolicy, OracleLabeller
from rmsweb.mine.rollouts import run_rollouts
from rmsweb.mine.states import finding_row
from rmsweb.rollout.build import build_runner
from rmsweb.spec import ExperimentSpec
from rmsweb.store.rows import MemorySink

pytestmark = pytest.mark.browser

SEEDS = list(range(7))  # shrunk: 14 episodes, each planted kind once, the rest clean
# (task, seed) -> (step, failure mode the planted mistake must be mined as)
PLANTED: dict[tuple[str, int], tuple[int, str]] = {
    ("click-button", 0): (0, "wrong_element"),
    ("enter-text", 0): (0, "wrong_argument"),
    ("enter-text", 1): (0, "wrong_type"),
    ("enter-text", 2): (0, "premature_answer"),
    ("enter-text", 3): (0, "parse_error"),
    ("enter-text", 4): (1, "loop"),
    ("enter-text", 5): (0, "navigation_error"),
}
FIFTY_FIFTY = ("click-button", 1, 0)  # samples alternate right / wrong here


def wrong_action(kind: str, req: ActRequest, right: Action) -> str:
    """The planted mistake of each kind, as the output text."""
    if kind == "wrong_element":
        other = next(e for e in req.observation.elements if e != right.target)
        return format_action(click(other))
    if kind == "wrong_argument":
        return format_action(fill(right.target or "", (right.text or "") + "zz"))
    if kind == "wrong_type":
        return format_action(click(right.target or ""))
    if kind == "premature_answer":
        return format_action(stop())
    if kind == "parse_error":
        return f"Action: clik({right.target})"
    if kind == "loop":
        return req.history[-1].action_text or ""
    if kind == "navigation_error":
        return format_action(goto("http://example.com/"))
    raise AssertionError(kind)


class PlantedPolicy:
    """The expert with planted mistakes; records every request it answers."""

    name = "planted"

    def __init__(self, experts: dict[str, Any]) -> None:
        self.experts = experts
        self.calls: dict[tuple, int] = defaultdict(int)
        self.seen: dict[tuple, list[dict]] = {}  # (task, seed, attempt, step) -> messages

    async def act(self, req: ActRequest) -> ActResult:
        key = (req.task_id, req.seed, req.step)
        self.seen[(req.task_id, req.seed, req.attempt, req.step)] = build_messages(
            req.instruction, req.observation.text, req.history, PromptConfig()
        )
        right = self.experts[req.task_id].acceptable_actions(
            req.instruction, req.observation, req.history
        )[0]
        planted = PLANTED.get((req.task_id, req.seed))
        if planted and planted[0] == req.step:
            return ActResult(wrong_action(planted[1], req, right))
        if key == FIFTY_FIFTY:
            self.calls[key] += 1
            if self.calls[key] % 2 == 0:  # the 2nd and 4th of the 4 probes
                return ActResult(wrong_action("wrong_element", req, right))
        return ActResult(f"Action: {format_action(right)}")

    async def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def mined() -> tuple[list, PlantedPolicy]:
    spec = ExperimentSpec.model_validate(
        {
            "name": "planted",
            "suite": {
                "tasks": ["click-button", "enter-text"],
                "train": {"start": 0, "count": len(SEEDS)},
                "max_steps": 4,
                "browser": {"contexts": 2},
            },
        }
    )
    sink = MemorySink()

    async def go() -> PlantedPolicy:
        runner = build_runner(spec.suite, run="mine/planted", stage="mine", progress=False)
        async with runner:
            experts = {t: runner.suite.expert(t) for t in runner.suite.task_ids()}
            planted = PlantedPolicy(experts)
            policy = MiningPolicy(planted, OracleLabeller(experts), probes=4)
            await run_rollouts(runner, policy, runner.suite.task_ids(), SEEDS, sink, 1)
        return planted

    planted = asyncio.run(go())
    return sink.records, planted


def test_critical_states_are_the_planted_ones(mined: tuple[list, PlantedPolicy]) -> None:
    records, _ = mined
    assert len(records) == 2 * len(SEEDS)
    assert not any(r.episode.error for r in records)
    found = {}
    for rec in records:
        f = critical_state(rec)
        if f is not None:
            found[(rec.episode.task_id, rec.episode.seed)] = (f.step, f.failure_mode)
    # Same keys: precision and recall 100%; same values: the right step and mode.
    assert found == PLANTED
    clean = [r for r in records if (r.episode.task_id, r.episode.seed) not in PLANTED]
    assert all(r.episode.success for r in clean), "the expert solves every clean episode"


def test_fragile_detection_finds_the_planted_fifty_fifty_state(
    mined: tuple[list, PlantedPolicy],
) -> None:
    records, _ = mined
    fragile = [f for r in records for f in fragile_states(r)]
    assert [(f.record.episode.task_id, f.record.episode.seed, f.step) for f in fragile] == [
        FIFTY_FIFTY
    ]
    (f,) = fragile
    assert f.criticality == 0.5 and f.failure_mode == "wrong_element"
    assert f.record.episode.success, "the executed (first) sample was the right one"
    row = finding_row(f, {"wrong_element": 2.0})
    assert row.source == "fragile" and row.weight == 1.0 and row.wrong_fraction == 0.5
    assert len(row.sampled_actions) == 4 and len(set(row.sampled_actions)) == 2


def test_rows_rebuild_the_prompt_the_policy_saw(mined: tuple[list, PlantedPolicy]) -> None:
    records, planted = mined
    checked = 0
    for rec in records:
        ep = rec.episode
        for st in rec.steps:
            history = history_before(rec.steps, st.step)
            rebuilt = build_messages(ep.instruction, st.obs_text, history, PromptConfig())
            assert rebuilt == planted.seen[(ep.task_id, ep.seed, ep.attempt, st.step)]
            checked += 1
        f = critical_state(rec)
        if f is not None:
            row = finding_row(f, {})
            assert row.reference_actions and row.failure_mode == f.failure_mode
            assert (
                build_messages(row.instruction, row.obs_text, row.history, PromptConfig())
                == planted.seen[(ep.task_id, ep.seed, ep.attempt, row.step)]
            )
    assert checked > len(records)  # multi-step episodes, a parse error in some history
