"""The retry loop and the mistake model, without a browser."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from rmsweb.agents.mistaken_expert import MistakenExpert
from rmsweb.collect.retry import RetryLoop
from rmsweb.env.actions import click, fill
from rmsweb.env.types import ActRequest, Element, Observation
from rmsweb.judge.types import Reflection, Verdict
from rmsweb.store.rows import EpisodeRecord, EpisodeRow


def record(attempt: int, success: bool, n_steps: int) -> EpisodeRecord:
    ep = EpisodeRow(f"t/0/p/{attempt}", "r", "collect", "s", "t", 0, "train", "p", attempt, success)
    ep.n_steps = n_steps
    return EpisodeRecord(ep, [])


def run_loop(mode: str, outcomes: list[tuple[bool, bool, int]], max_retries: int = 3, budget=None):
    """outcomes[k] = (success, detour, n_steps) of attempt k."""
    prompted: list[tuple[int, tuple[str, ...]]] = []

    async def attempt(k: int, reflections: Sequence[str]) -> EpisodeRecord:
        prompted.append((k, tuple(reflections)))
        ok, _, n = outcomes[k]
        return record(k, ok, n)

    async def judge(rec: EpisodeRecord) -> Verdict:
        ok, detour, _ = outcomes[rec.episode.attempt]
        return Verdict(ok, detour)

    async def reflect(rec: EpisodeRecord, verdict: Verdict, earlier: Sequence[str]) -> Reflection:
        return Reflection(rec.episode.attempt, f"lesson {rec.episode.attempt}", "rule")

    out = asyncio.run(RetryLoop(mode, max_retries, budget).run(attempt, judge, reflect))
    return out, prompted


def test_reflect_conditions_on_all_reflections_and_keeps_the_shortest_success() -> None:
    outcomes = [(False, False, 3), (True, True, 5), (True, False, 2), (True, False, 1)]
    out, prompted = run_loop("reflect", outcomes)
    assert prompted == [(0, ()), (1, ("lesson 0",)), (2, ("lesson 0", "lesson 1"))]
    assert len(out.attempts) == 3  # stopped at the clean success
    assert out.kept == 2
    assert [r.attempt for r in out.reflections] == [0, 1]


def test_blind_retries_without_reflections_and_none_tries_once() -> None:
    outcomes = [(False, False, 3), (False, False, 3), (True, False, 4), (True, False, 1)]
    out, prompted = run_loop("blind", outcomes)
    assert prompted == [(0, ()), (1, ()), (2, ())]
    assert out.reflections == [] and out.kept == 2
    out, prompted = run_loop("none", outcomes)
    assert len(out.attempts) == 1 and out.kept is None


def test_budget_caps_every_mode_and_detoured_success_is_kept_when_nothing_better() -> None:
    outcomes = [(True, True, 6), (True, True, 4), (True, True, 5), (True, False, 1)]
    out, _ = run_loop("reflect", outcomes, max_retries=3, budget=3)
    assert len(out.attempts) == 3
    assert out.kept == 1  # shortest of the detoured successes


def obs(n_buttons: int = 3) -> Observation:
    els = {str(i): Element(str(i), "button", f"b{i}") for i in range(1, n_buttons + 1)}
    els["9"] = Element("9", "textbox", "name")
    els["8"] = Element("8", "textbox", "other")
    els["7"] = Element("7", "text", "some words")
    return Observation("u", "t", "", els)


class OneExpert:
    def acceptable_actions(self, instruction, observation, history):
        return [click("2")]


def test_mistake_model_is_deterministic_and_keeps_base_rates() -> None:
    m = MistakenExpert({"t": OneExpert()}, 0.3, 0.2, ["distractor_click"], ["scroll"])
    assert m.plan("t", 5, 2) == m.plan("t", 5, 2)
    n = 4000
    for attempt in (0, 1, 2):
        errors = sum(m.plan("t", s, attempt).error_step is not None for s in range(n)) / n
        detours = sum(m.plan("t", s, attempt).detour_step is not None for s in range(n)) / n
        assert abs(errors - 0.3) < 0.03 and abs(detours - 0.2) < 0.03
    # persistence: most retries repeat the first attempt's plan
    same = sum(m.plan("t", s, 1) == m.plan("t", s, 0) for s in range(n)) / n
    assert 0.75 < same < 0.9


def test_a_repeated_plan_repeats_the_same_wrong_action() -> None:
    m = MistakenExpert(
        {"t": OneExpert()},
        1.0,
        0.0,
        ["distractor_click"],
        ["scroll"],
        persistence=1.0,
        max_mistake_step=1,
    )
    outs = {
        asyncio.run(m.act(ActRequest("t", "Click b2", obs(5), seed=s, attempt=k))).text
        for s in (3,)
        for k in range(4)
    }
    assert len(outs) == 1 and outs != {"click(2)"}


def test_wrong_field_fills_another_textbox() -> None:
    class FillExpert:
        def acceptable_actions(self, instruction, observation, history):
            return [fill("9", "Bob")]

    m = MistakenExpert(
        {"t": FillExpert()}, 1.0, 0.0, ["wrong_field"], ["scroll"], max_mistake_step=1
    )
    out = asyncio.run(m.act(ActRequest("t", "Enter Bob", obs(), seed=1)))
    assert out.text == 'fill(8, "Bob")'


def test_collection_metrics_yield_detours_and_gold() -> None:
    from rmsweb.collect.metrics import collection_metrics

    def rec(seed: int, attempt: int, ok: bool, n: int, gold: int | None) -> EpisodeRecord:
        r = record(attempt, ok, n)
        r.episode.seed, r.episode.reference_steps = seed, gold
        return r

    records = [
        rec(0, 0, False, 1, None),  # failed, then solved cleanly
        rec(0, 1, True, 2, 2),
        rec(1, 0, True, 4, 2),  # detour, then clean
        rec(1, 1, True, 2, 2),
        rec(2, 0, True, 3, 3),  # clean at once
        rec(3, 0, False, 1, None),  # never solved
        rec(3, 1, False, 1, None),
    ]
    metrics, curve = collection_metrics(records, 3)
    assert curve == [
        {"attempt": 0, "yield": 0.5},
        {"attempt": 1, "yield": 0.75},
        {"attempt": 2, "yield": 0.75},
    ]
    assert metrics["kept"] == 3 and metrics["kept_mean_steps"] == round(7 / 3, 3)
    assert metrics["detour_fraction"] == 0.25  # 1 of 4 successful attempts
    assert metrics["kept_steps_over_gold"] == 1.0
    assert metrics["failure_fraction"] == round(3 / 7, 4)


def test_error_kinds_are_rates_per_kind_and_a_list_gives_equal_shares() -> None:
    import pytest

    from rmsweb.spec import ExpertTeacher

    listed = ExpertTeacher.model_validate({"error_kinds": ["wrong_label", "literal_value"]})
    assert listed.error_kinds == {"wrong_label": 1.0, "literal_value": 1.0}
    rated = ExpertTeacher.model_validate({"error_kinds": {"wrong_label": 3, "premature_stop": 0}})
    assert rated.error_kinds == {"wrong_label": 3.0, "premature_stop": 0.0}
    with pytest.raises(ValueError):
        ExpertTeacher.model_validate({"error_kinds": {"wrong_label": 0}})
    with pytest.raises(ValueError):
        ExpertTeacher.model_validate({"error_kinds": {"typo": 1}})
    # the rates are the kinds' shares of error_rate: a 0-rate kind is never drawn
    m = MistakenExpert({}, 1.0, 0.0, {"wrong_label": 3, "premature_stop": 0}, ["scroll"])
    kinds = {m.plan("t", s, 0).error_kind for s in range(200)}
    assert kinds == {"wrong_label"}
    m = MistakenExpert({}, 1.0, 0.0, {"wrong_label": 3, "literal_value": 1}, ["scroll"])
    drawn = [m.plan("t", s, 0).error_kind for s in range(2000)]
    assert 0.7 < drawn.count("wrong_label") / len(drawn) < 0.8
