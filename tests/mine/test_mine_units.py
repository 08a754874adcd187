"""Mining's pure parts: failure-mode rules, judge replies, state selection, resume order."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from rmsweb.env.actions import (
    Action,
    answer,
    click,
    click_xy,
    fill,
    go_back,
    press,
    scroll,
    stop,
)
from rmsweb.env.types import ActRequest, Box, Element, HistoryItem, Observation
from rmsweb.mine.judge import first_error_labels, parse_first_error
from rmsweb.mine.label import ReferenceLabeller, ReferenceStep, box_elements, element_boxes
from rmsweb.mine.modes import FAILURE_MODES, failure_mode
from rmsweb.mine.rollouts import mine_job
from rmsweb.mine.states import kept_records, select_states
from rmsweb.spec.mine import FailureMode
from rmsweb.store.rows import EpisodeRecord, MemorySink, MinedStateRow
from rmsweb.store.synthetic import make_episode


def test_the_taxonomy_is_the_specs() -> None:
    assert set(FAILURE_MODES) == set(FailureMode.__args__)


@pytest.mark.parametrize(
    ("action", "acceptable", "history", "env_error", "mode"),
    [
        (None, [click(3)], [], None, "parse_error"),
        (go_back(), [click(3)], [], None, "navigation_error"),
        (click(9), [click(3)], [], "navigation to http://x.org/ was blocked", "navigation_error"),
        (stop(), [fill(2, "bob")], [], None, "premature_answer"),
        (answer("7"), [click(3)], [], None, "premature_answer"),
        (click(3), [answer("7")], [], None, "missed_answer"),
        (scroll("down"), [stop()], [], None, "missed_answer"),
        (click(4), [click(3)], [HistoryItem("", "click(4)", None)], None, "loop"),
        (fill(2, "bobb"), [fill(2, "bob")], [], None, "wrong_argument"),
        (answer("8"), [answer("7")], [], None, "wrong_argument"),
        (press("Tab"), [press("Enter")], [], None, "wrong_argument"),
        (fill(5, "bob"), [fill(2, "bob")], [], None, "wrong_element"),
        (click(4), [click(3)], [HistoryItem("", "click(5)", None)], None, "wrong_element"),
        (click(2), [fill(2, "bob")], [], None, "wrong_type"),
        (stop(), [answer("7")], [], None, "wrong_type"),
    ],
)
def test_failure_mode_rules(
    action: Action | None,
    acceptable: list[Action],
    history: list[HistoryItem],
    env_error: str | None,
    mode: str,
) -> None:
    assert failure_mode(action, acceptable, history, env_error=env_error) == mode


def test_coordinate_clicks_compare_through_stored_boxes() -> None:
    elements = {
        "3": Element("3", "button", "OK", box=Box(10, 10, 20, 10)),
        "4": Element("4", "button", "No", box=Box(50, 10, 20, 10)),
    }
    boxes = element_boxes(elements, [click(3), click(3), click(7)])
    assert [b.id for b in boxes] == ["3"]  # each named element once; unknown ids skipped
    stored = box_elements(boxes)
    # A click_xy outside the target's box: same kind of action, wrong place.
    assert failure_mode(click_xy(60, 15), [click(3)], [], elements=stored) == "wrong_element"


@pytest.mark.parametrize(
    ("reply", "step", "action"),
    [
        ("Step: 2\nAction: click(5)", 1, "click(5)"),
        ('The first wrong step is step 3.\nAction: fill(2, "x")', 2, 'fill(2, "x")'),
        ("step #1\naction: press('Enter')", 0, 'press("Enter")'),
        ("Step: none\nAction: none", None, None),
        ("Step: 9\nAction: click(5)", None, None),  # out of range (3 steps)
        ("Step: 2", 1, None),  # no action: nothing to label with
        ("Step: 2\nAction: clik(5)", 1, None),
        ("I cannot tell.", None, None),
        ("", None, None),
    ],
)
def test_judge_replies_parse(reply: str, step: int | None, action: str | None) -> None:
    verdict = parse_first_error(reply, n_steps=3)
    assert verdict.step == step
    assert (str(verdict.action) if verdict.action else None) == action


def test_judge_verdict_labels_the_steps_up_to_the_first_error() -> None:
    rec = make_episode(run="mine/x", task="t", seed=0, policy="sft", success=False, n_steps=3)
    rows = first_error_labels(rec, parse_first_error("Step: 2\nAction: click(5)", 3))
    assert [(r.step, r.source) for r in rows] == [(0, "judge"), (1, "judge")]
    taken = str(Action.from_row(rec.steps[0].action))
    assert rows[0].acceptable == [taken] and rows[1].acceptable == ["click(5)"]
    assert first_error_labels(rec, parse_first_error("Step: 2", 3)) == []


def _obs(lines: dict[str, tuple[str, str]]) -> Observation:
    elements = {i: Element(i, role, name) for i, (role, name) in lines.items()}
    text = "\n".join(f'[{i}] {role} "{name}"' for i, (role, name) in lines.items())
    return Observation("http://x/", "", text, elements)


def test_reference_labels_follow_the_trajectory_until_it_diverges() -> None:
    ref_obs = _obs({"1": ("textbox", ""), "2": ("button", "Submit")})
    reference = [
        ReferenceStep(fill(1, "bob"), ref_obs.text),
        ReferenceStep(click(2), ref_obs.text),
    ]
    labeller = ReferenceLabeller({("t", 0): reference})
    # On this page load the ids differ: the reference action is retargeted by role+name.
    here = _obs({"5": ("text", "hi"), "6": ("textbox", ""), "7": ("button", "Submit")})
    req = ActRequest("t", "Enter bob", here, seed=0, step=0)
    assert labeller.label(req) == [fill(6, "bob")]
    labeller.observe(req, fill(6, "bob"), ok=True)
    step1 = dataclasses.replace(req, step=1)
    assert labeller.label(step1) == [click(7)]
    labeller.observe(step1, click(5), ok=False)  # diverged: the reference says no more
    assert labeller.label(dataclasses.replace(req, step=2)) is None
    assert labeller.label(dataclasses.replace(req, step=0)) == [fill(6, "bob")]  # rerun
    assert labeller.label(dataclasses.replace(req, step=5)) == []  # past its end
    assert labeller.label(dataclasses.replace(req, seed=1)) is None  # no reference


def _row(sid: str, source: str, weight: float, mode: str | None = "wrong_element") -> MinedStateRow:
    return MinedStateRow(
        state_id=sid,
        episode_id="e",
        step=0,
        obs_text="",
        screenshot=None,
        history=[],
        reference_actions=["click(1)"],
        policy_action=None,
        failure_mode=None if source == "routine" else mode,
        weight=weight,
        source=source,
    )


def test_selection_dedupes_caps_by_weight_and_mixes_in_routine_states() -> None:
    mined = [
        _row("a", "fragile", 0.5),
        _row("a", "critical", 0.5),  # same state: critical wins the tie
        _row("b", "critical", 2.0),
        _row("c", "fragile", 0.25),
        _row("d", "critical", 1.0),
        _row("e", "critical", 1.0),
    ]
    routine = [_row(f"r{i}", "routine", 1.0) for i in range(20)] + [_row("b", "routine", 1.0)]
    out = select_states(mined, routine, routine_fraction=0.25, max_states=100, seed=0)
    kinds = [(r.state_id, r.source) for r in out[:5]]
    # Weight first (b 2.0; d, e 1.0; a 0.5; c 0.25), then critical before fragile.
    assert kinds == [
        ("b", "critical"),
        ("d", "critical"),
        ("e", "critical"),
        ("a", "critical"),
        ("c", "fragile"),
    ]
    routine_out = out[5:]
    # 5 mined states at f = 0.25: round(5 * 0.25 / 0.75) = 2 routine ones, never "b".
    assert len(routine_out) == 2 and all(r.source == "routine" for r in routine_out)
    assert "b" not in {r.state_id for r in routine_out}
    assert out == select_states(mined, routine, routine_fraction=0.25, max_states=100, seed=0)
    # max_states 4: floor(4 * 0.75) = 3 mined states of highest weight, then 1 routine.
    capped = select_states(mined, routine, routine_fraction=0.25, max_states=4, seed=0)
    assert [r.state_id for r in capped[:3]] == ["b", "d", "e"]
    assert len(capped) == 4 and capped[3].source == "routine"
    assert (
        select_states(mined, routine, routine_fraction=0.0, max_states=100, seed=0)[-1].source
        == "fragile"
    )


def test_kept_records_match_the_sft_stage() -> None:
    from rmsweb.train.sft.samples import kept_records as sft_kept

    records = []
    for seed in range(3):
        for attempt, (ok, n) in enumerate([(False, 2), (True, 4), (True, 3), (True, 3)]):
            records.append(
                make_episode(
                    run="collect/x",
                    task="t",
                    seed=seed,
                    policy="expert",
                    success=ok,
                    n_steps=n,
                    attempt=attempt,
                )
            )
    ours = [(r.episode.seed, r.episode.attempt) for r in kept_records(records)]
    assert ours == [(r.episode.seed, r.episode.attempt) for r in sft_kept(records)]
    assert ours == [(0, 2), (1, 2), (2, 2)]


class FakeRunner:
    """run_episode only: the job's scheduling, without a browser."""

    def __init__(self) -> None:
        self.ran: list[int] = []

    async def run_episode(self, policy, task_id, seed, *, split, attempt):
        self.ran.append(attempt)
        await asyncio.sleep(0.01 * (3 - attempt))  # attempt 0 would finish last
        return make_episode(
            run="mine/x",
            task=task_id,
            seed=seed,
            policy="sft",
            success=True,
            n_steps=1,
            attempt=attempt,
        )


class NoLabels:
    name = "sft"

    def take(self, *args: object) -> list:
        return []


def test_job_writes_attempt_zero_last_and_reruns_only_missing_samples() -> None:
    sink = MemorySink()
    job = mine_job(sink, NoLabels(), samples=3)  # type: ignore[arg-type]
    runner = FakeRunner()
    recs: list[EpisodeRecord] = asyncio.run(job(runner, None, "t", 0))  # type: ignore[arg-type]
    assert sorted(runner.ran) == [0, 1, 2]
    assert recs[-1].episode.attempt == 0  # the resume key goes last
    # A kill after samples 1 and 2 were committed: the rerun does sample 0 only.
    sink.records = recs[:2]
    runner = FakeRunner()
    again = asyncio.run(job(runner, None, "t", 0))  # type: ignore[arg-type]
    assert runner.ran == [0] and [r.episode.attempt for r in again] == [0]
