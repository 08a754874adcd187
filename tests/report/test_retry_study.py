"""The retry-study section agrees with the collect metrics on the same stored runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmsweb.collect.metrics import collection_metrics
from rmsweb.env.actions import ActionRow
from rmsweb.judge.critic import GUESS
from rmsweb.report.build import build_report
from rmsweb.report.document import to_markdown
from rmsweb.store.reader import read_records
from rmsweb.store.rows import EpisodeRecord, EpisodeRow, ReflectionRow, StepRow, episode_key
from rmsweb.store.stats import wilson_interval
from rmsweb.store.writer import ShardWriter


def rec(task: str, seed: int, attempt: int, ok: bool, n: int, gold: int | None, tokens: int = 0):
    ep = EpisodeRow(
        episode_key(task, seed, "expert", attempt),
        "",
        "collect",
        "miniwob",
        task,
        seed,
        "train",
        "expert",
        attempt,
        ok,
        1.0 if ok else -1.0,
        n,
    )
    ep.reference_steps, ep.tokens_in = gold, tokens
    steps = [
        StepRow(
            ep.episode_id,
            i,
            "u",
            "[1] button",
            None,
            "click(1)",
            ActionRow("click", "1"),
            True,
            None,
            0.0,
            i == n - 1,
            0.0,
        )
        for i in range(n)
    ]
    return EpisodeRecord(ep, steps)


def reflect(
    r: EpisodeRecord,
    named: list[int],
    bad: list[int] | None,
    tokens: int = 0,
    kind: str | None = None,
    text: str = "note",
):
    r.reflections.append(
        ReflectionRow(
            r.episode.episode_id,
            r.episode.attempt,
            text,
            "rule",
            tokens,
            0,
            named_steps=named,
            oracle_bad_steps=bad,
            mistake_kind=kind,
            mistake_step=bad[0] if kind and bad else None,
        )
    )
    return r


def arm(root: Path, name: str, records: list[EpisodeRecord]) -> Path:
    out = root / "runs" / "collect" / name  # the run name (and stage) come from the path
    with ShardWriter(out) as sink:
        for r in records:
            sink.write(r)
    return out


@pytest.fixture
def runs(tmp_path: Path) -> dict[str, Path]:
    reflect_arm = [
        # right first error
        reflect(rec("a", 0, 0, False, 2, None, 5), [1], [1], tokens=7, kind="literal_value"),
        rec("a", 0, 1, True, 2, 2),
        reflect(rec("a", 1, 0, True, 4, 2), [1, 2], [2, 3]),  # detour: 1 of 2 named is bad
        rec("a", 1, 1, True, 2, 2),
        reflect(rec("b", 0, 0, False, 1, None), [0], [0], kind="distractor_click"),
        reflect(rec("b", 0, 1, False, 3, None), [2], [0], kind="literal_value"),  # wrong step
        rec("b", 0, 2, True, 1, 1),
        reflect(rec("b", 1, 0, False, 1, None), [], [0]),  # names no step
        rec("b", 1, 1, False, 1, None),
        rec("b", 1, 2, False, 1, None),
    ]
    none_arm = [rec("a", 0, 0, False, 2, None), rec("a", 1, 0, True, 4, 2)]
    return {
        "collect": arm(tmp_path, "x", reflect_arm),
        "other": arm(tmp_path, "x-none", none_arm),
    }


def test_retry_study_matches_collect_metrics(runs: dict[str, Path]) -> None:
    rep = build_report(runs, title="t")
    md = to_markdown(rep.document)
    assert "Retry study" in md and "Critic: first error P" in md
    m = rep.metrics
    expected, curve = collection_metrics(read_records(runs["collect"]), 3)
    for c in curve:
        assert m[f"retry/x/yield_{c['attempt']}"] == pytest.approx(c["yield"])
    rounded = {"abs": 1e-3}  # the collect metrics are rounded
    assert m["retry/x/kept_over_gold"] == pytest.approx(expected["kept_steps_over_gold"], **rounded)
    assert m["retry/x/calls_per_unit"] == pytest.approx(
        expected["teacher_calls_per_task_seed"], **rounded
    )
    assert m["retry/x/calls_per_kept"] == pytest.approx(
        expected["teacher_calls_per_kept"], **rounded
    )
    assert m["retry/x/tokens_per_unit"] == pytest.approx(
        expected["teacher_tokens_per_task_seed"], **rounded
    )
    for name in (
        "first_error_precision",
        "first_error_recall",
        "detour_precision",
        "detour_recall",
    ):
        assert m[f"retry/x/{name}"] == pytest.approx(expected[f"critic_{name}"], abs=1e-4)
    # By hand: failed reflections name steps in 3 of 4, rightly in 2 -> P 2/3; 4 attempts
    # with a bad step -> R 2/4. The detour names 2 steps, 1 bad of 2 bad -> P 1/2, R 1/2.
    assert m["retry/x/first_error_precision"] == pytest.approx(2 / 3)
    assert m["retry/x/first_error_recall"] == pytest.approx(2 / 4)
    assert m["retry/x/detour_precision"] == pytest.approx(1 / 2)
    assert m["retry/x/attempts_per_unit"] == pytest.approx(10 / 4)
    # 18 steps + 5 reflections over 4 units; tokens: 5 (an attempt) + 7 (a reflection)
    assert m["retry/x/calls_per_unit"] == pytest.approx(23 / 4)
    assert m["retry/x/tokens_per_unit"] == pytest.approx(12 / 4)
    # the none arm: one attempt, no reflections, no critic
    assert m["retry/x-none/yield_0"] == pytest.approx(0.5)
    assert m["retry/x-none/first_error_precision"] is None
    # The none arm collected 2 of the 4 units: a second table compares on those only.
    assert "on the 2 units (task, seed) that every run collected" in md
    assert m["retry_matched/x/yield_0"] == pytest.approx(0.5)
    assert m["retry_matched/x/yield_1"] == pytest.approx(1.0)
    assert m["retry_matched/x-none/yield_0"] == pytest.approx(0.5)


def test_critic_per_kind_matches_collect_metrics_untargeted_apart(runs) -> None:
    rep = build_report(runs, title="t")
    md = to_markdown(rep.document)
    assert "Mistake kind" in md and "all untargeted" in md
    m = rep.metrics
    expected, _ = collection_metrics(read_records(runs["collect"]), 3)
    for kind in ("literal_value", "distractor_click"):
        for score in ("precision", "recall"):
            got = m[f"critic_kind/x/{kind}/first_error_{score}"]
            assert got == pytest.approx(expected[f"critic_kind_{kind}_first_error_{score}"])
    # literal_value (no rule targets it): 1 of 2 named rightly; distractor_click: 1 of 1
    assert m["critic_kind/x/literal_value/first_error_precision"] == pytest.approx(1 / 2)
    assert m["critic_kind/x/all_untargeted/first_error_recall"] == pytest.approx(1 / 2)
    assert m["critic_kind/x/all_targeted/first_error_precision"] == pytest.approx(1.0)
    assert expected["critic_untargeted_first_error_precision"] == pytest.approx(1 / 2)
    # the failure without a teacher's mistake (names no step) is its own row
    assert m["critic_kind/x/none/first_error_recall"] == pytest.approx(0.0)
    assert m["critic_kind/x/none/no_error_found"] == 1


def test_reflect_vs_blind_per_persistence_and_adherence() -> None:
    from rmsweb.report.retry_study import sweep_rows

    def arm(run: str, units: int, last: float) -> dict:
        return {"run": run, "units": units, "yields": [0.5, last]}

    arms = [arm("r08", 10, 0.9), arm("r08a0", 10, 0.7), arm("b08", 10, 0.7)]
    arms += [arm("r1", 10, 0.8), arm("b1", 10, 0.5), arm("r0", 10, 0.95)]
    settings = {
        "r08": {"retry": "reflect", "teacher_persistence": 0.8, "teacher_adherence": 0.9},
        "r08a0": {"retry": "reflect", "teacher_persistence": 0.8, "teacher_adherence": 0.0},
        "b08": {"retry": "blind", "teacher_persistence": 0.8, "teacher_adherence": 0.9},
        "r1": {"retry": "reflect", "teacher_persistence": 1.0, "teacher_adherence": 0.9},
        "b1": {"retry": "blind", "teacher_persistence": 1.0, "teacher_adherence": 0.9},
        "r0": {"retry": "reflect", "teacher_persistence": 0.0, "teacher_adherence": 0.9},
    }
    rows = {(r["persistence"], r["adherence"]): r for r in sweep_rows(arms, settings)}
    assert all(r["habit_rate"] == 0.0 for r in rows.values())  # runs from before habits
    assert set(rows) == {(0.0, 0.9), (0.8, 0.0), (0.8, 0.9), (1.0, 0.9)}
    assert rows[(0.8, 0.9)]["blind"] == "b08" and rows[(0.8, 0.9)]["gain"] == pytest.approx(0.2)
    assert rows[(0.8, 0.0)]["gain"] == pytest.approx(0.0)  # adherence 0: reflect is blind
    assert rows[(1.0, 0.9)]["gain"] == pytest.approx(0.3)
    assert rows[(0.0, 0.9)]["blind"] is None and rows[(0.0, 0.9)]["gain"] is None


GUESS_TEXT = 'The attempt failed (reward -1). Step 2: clicked [3] button "OK"; ' + GUESS + "."


def test_critic_table_per_arm_precision_and_recall_apart(tmp_path: Path) -> None:
    """Two reflect arms share attempt 0 (the same reflections): each counts in its own
    rows. The critic finds no error in one failed attempt (its guess at the last step),
    so precision (over errors found) and recall (over attempts with a bad step) differ."""
    from rmsweb.report.retry_study import kind_rows, queries
    from rmsweb.store.views import connect

    def attempts(guess_right: bool) -> list[EpisodeRecord]:
        return [
            reflect(rec("a", 0, 0, False, 2, None), [0], [0], kind="distractor_click"),
            reflect(rec("a", 1, 0, False, 2, None), [1], [0], kind="distractor_click"),
            reflect(rec("a", 2, 0, False, 2, None), [0], [0], kind="distractor_click"),
            reflect(rec("a", 3, 0, False, 3, None), [2], [2 if guess_right else 0],
                    kind="distractor_click", text=GUESS_TEXT),
        ]  # fmt: skip

    runs = {
        "r1": arm(tmp_path, "r1", attempts(False)),
        "r2": arm(tmp_path, "r2", attempts(True)),
    }
    con = connect({f"collect/{k}": v for k, v in runs.items()})
    try:
        data = queries(con)
    finally:
        con.close()
    rows = {(r["run"], r["kind"]): r for r in kind_rows(data)}
    r1 = rows[("collect/r1", "distractor_click")]
    # 4 failed attempts, each with a bad step; rules found an error in 3, rightly in 2.
    assert (r1["graded"], r1["fe_named"], r1["no_error_found"], r1["fe_truths"]) == (4, 3, 1, 4)
    assert r1["precision"] == pytest.approx(2 / 3) and r1["recall"] == pytest.approx(2 / 4)
    assert r1["precision_ci"] == pytest.approx(wilson_interval(2, 3))
    assert r1["recall_ci"] == pytest.approx(wilson_interval(2, 4))
    assert r1["guess_hits"] == 0
    # Not pooled: r2's identical attempts count in r2's rows only (not 8 graded).
    r2 = rows[("collect/r2", "distractor_click")]
    assert r2["graded"] == 4 and r2["guess_hits"] == 1 and r2["recall"] == pytest.approx(2 / 4)
    assert rows[("collect/r1", "all targeted")]["graded"] == 4
    rep = build_report(runs, title="t")
    md = to_markdown(rep.document)
    assert "No error found" in md and "wrong_option" in md  # a kind never made is named
    assert rep.metrics["critic_kind/r1/distractor_click/first_error_precision"] == pytest.approx(
        2 / 3
    )
    expected, _ = collection_metrics(read_records(runs["r1"]), 1)
    assert expected["critic_kind_distractor_click_first_error_precision"] == pytest.approx(
        2 / 3, abs=1e-4
    )
    assert expected["critic_kind_distractor_click_first_error_recall"] == pytest.approx(2 / 4)
    assert expected["critic_kind_distractor_click_no_error_found"] == 1


def test_reflect_minus_blind_paired_intervals_and_steps_saved() -> None:
    from rmsweb.report.retry_study import paired_yield, saved_rows, steps_saved, sweep_rows

    def unit(task: str, seed: int, solved: bool, first: int | None, kept: int | None) -> dict:
        return {"task_id": task, "seed": seed, "solved": solved, "first_steps": first,
                "kept_steps": kept}  # fmt: skip

    # 20 units: attempt 0 solves 10 in 6 steps (a habit each); reflect keeps 3-step
    # retries of those and solves 6 more; blind keeps the 6-step attempt 0 and solves 2 more.
    reflect_units, blind_units = {}, {}
    for s in range(20):
        first = 6 if s < 10 else None
        reflect_units[("t", s)] = unit("t", s, s < 16, first, 3 if s < 16 else None)
        blind_units[("t", s)] = unit("t", s, s < 12, first, 6 if s < 12 else None)
    d = paired_yield(reflect_units, blind_units)
    assert d["units"] == 20 and d["diff"] == pytest.approx(0.2)
    assert 0 < d["low"] < 0.2 < d["high"] < 0.45
    same = paired_yield(blind_units, blind_units)
    assert same["diff"] == 0 and same["low"] == same["high"] == 0
    saved = steps_saved(reflect_units)
    assert saved["units"] == 10 and saved["saved"] == pytest.approx(0.5)
    assert steps_saved(blind_units)["saved"] == pytest.approx(0.0)
    arms = [{"run": "r", "units": 20, "yields": [0.5, 0.8]},
            {"run": "b", "units": 20, "yields": [0.5, 0.6]}]  # fmt: skip
    settings = {
        "r": {"retry": "reflect", "teacher_persistence": 0.8, "teacher_adherence": 0.9,
              "teacher_habit_rate": 0.6},
        "b": {"retry": "blind", "teacher_persistence": 0.8, "teacher_adherence": 0.9,
              "teacher_habit_rate": 0.6},
    }  # fmt: skip
    units = {"r": reflect_units, "b": blind_units}
    (row,) = sweep_rows(arms, settings, units)
    assert row["blind"] == "b" and row["habit_rate"] == 0.6
    assert (row["gain_low"], row["gain_high"]) == (d["low"], d["high"])
    rows = {r["run"]: r for r in saved_rows(arms, settings, units)}
    assert rows["r"]["vs_blind"] == pytest.approx(0.5) and rows["r"]["vs_blind_units"] == 10
    assert rows["r"]["vs_blind_low"] == pytest.approx(0.5)  # every unit saves the same
    assert rows["b"]["blind"] is None
    # Another habit rate does not pair with this blind arm.
    settings["b"] = {**settings["b"], "teacher_habit_rate": 0.3}
    (row,) = sweep_rows(arms, settings, units)
    assert row["blind"] is None and row["gain_low"] is None
