"""Routine states are scored against the oracle's acceptable set: the kept trajectory is
replayed in the browser (same seed, same recorded outputs) and the expert labels each
state, as it does for the mining rollouts."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from rmsweb.agents.expert import ExpertPolicy
from rmsweb.mine.routine import relabel, replay_labels
from rmsweb.mine.states import routine_rows
from rmsweb.rollout.runner import EpisodeRunner
from rmsweb.spec.suite import MiniWoBSuite
from rmsweb.store.rows import MemorySink
from rmsweb.suites.miniwob import MiniWoB
from rmsweb.suites.miniwob_experts import EXPERTS

pytestmark = pytest.mark.browser

TASKS = ["login-user", "click-button"]


def _kept(seeds: list[int]) -> list:
    """The expert's own episodes on train seeds, standing in for kept teacher ones."""

    async def go() -> list:
        suite = MiniWoB(TASKS, train_seeds=seeds)
        sink = MemorySink()
        async with EpisodeRunner(suite, contexts=1, progress=False) as runner:
            await runner.run(ExpertPolicy(EXPERTS, name="teacher"), TASKS, seeds, sink)
        return sink.records

    return asyncio.run(go())


def test_replay_labels_every_routine_state_and_flags_a_detour(tmp_path: Path) -> None:
    kept = _kept([0, 1])
    rows = routine_rows(kept)
    assert len(rows) >= 6  # login-user takes 3+ steps, click-button 1
    spec = MiniWoBSuite(tasks=TASKS, train={"start": 0, "count": 2})
    replays = asyncio.run(replay_labels(spec, EXPERTS, kept, tmp_path / "replay"))
    result = relabel(rows, replays)
    # Deterministic pages: every replayed state is the stored one, and labelled.
    assert result.relabelled == len(rows) and result.kept_teacher == 0
    assert result.teacher_not_acceptable == 0  # the expert's own actions are acceptable
    # A detour: the stored reference is an action the oracle would not take there.
    # Relabelling replaces it with the oracle's set and counts it.
    bad = replace(rows[0], reference_actions=["click(9999)"])
    again = relabel([bad, *rows[1:]], replays)
    assert again.teacher_not_acceptable == 1
    assert again.rows[0].reference_actions == result.rows[0].reference_actions != ["click(9999)"]
    # A state whose page text differs from the replay's keeps its stored reference.
    moved = replace(rows[0], obs_text=rows[0].obs_text + '\n[9999] button "x"')
    kept_row = relabel([moved], replays)
    assert kept_row.kept_teacher == 1 and kept_row.rows[0] is moved
