"""The steps section: reflection vs plain SFT arms on solved episodes, per task and pooled
over the multi-step tasks, on synthetic tables whose answer is known."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmsweb.report.arms import Episode
from rmsweb.report.build import build_report
from rmsweb.report.document import to_markdown
from rmsweb.report.steps_section import MULTI, OTHER, steps_rows, steps_section
from rmsweb.store.synthetic import make_episode
from rmsweb.store.writer import ShardWriter

REFLECT, PLAIN = "steps/sft", "steps-plain/sft"
# Gold steps (rmsweb.suites.miniwob_experts.gold): two multi-step tasks and a 1-step one.
GOLD = {"login-user": 3, "email-inbox-forward": 4, "click-button": 1}
UNITS = 30  # test seeds per task


def _arm(arm: str, extra: dict[int, int], tasks: dict[str, int] = GOLD) -> list[Episode]:
    """Every unit solved in gold steps, except that in seed s the first extra[s] units of
    each multi-step task take a 2-step detour; 1-step tasks never do."""
    out = []
    for seed, detours in extra.items():
        for task, gold in tasks.items():
            for u in range(UNITS):
                steps = gold + (2 if gold >= 3 and u < detours else 0)
                out.append(Episode(arm, seed, task, u, True, steps))
    return out


def _by_name(rows: list) -> dict:
    return {r.name: r for r in rows}


def test_reflection_with_fewer_detours_is_shorter_on_the_multi_step_tasks() -> None:
    # Plain data: 12, 15, 10 of 30 units per multi-step task take 2 more steps; reflection
    # 2, 3, 1. Seed 0 on multi-step units: reflect (7*30 + 2*2*2) / (7*30 + 2*12*2) - 1
    # = 218/258 - 1 = -15.5%.
    rows = _by_name(
        steps_rows(
            REFLECT, PLAIN, _arm(REFLECT, {0: 2, 1: 3, 2: 1}), _arm(PLAIN, {0: 12, 1: 15, 2: 10})
        )
    )
    multi = rows[MULTI]
    assert multi.tasks == 2
    seeds = dict(multi.diff.steps_per_seed)
    assert seeds[0] == pytest.approx(218 / 258 - 1)
    assert multi.diff.steps_ratio < -0.10
    assert multi.diff.steps_high < 0 and multi.diff.steps_seed_high < 0
    assert multi.verdict == "A shorter"
    # click-button (gold 1) is "other": no room for a detour, so no difference there.
    assert rows[OTHER].tasks == 1 and rows[OTHER].diff.steps_ratio == 0
    assert rows["click-button"].verdict == "no difference shown"
    assert (
        rows["email-inbox-forward"].gold == 4 and rows["email-inbox-forward"].verdict == "A shorter"
    )
    # The pooled "all tasks" ratio is diluted by the 1-step task, so it is nearer 0.
    assert multi.diff.steps_ratio < rows["all tasks"].diff.steps_ratio < 0


def test_control_equal_detours_gives_an_interval_around_zero() -> None:
    # Same detour counts on average (9, 10, 11 vs 10, 10, 10): per-seed ratios -, 0, +.
    rows = _by_name(
        steps_rows(
            REFLECT, PLAIN, _arm(REFLECT, {0: 9, 1: 10, 2: 11}), _arm(PLAIN, {0: 10, 1: 10, 2: 10})
        )
    )
    d = rows[MULTI].diff
    assert d.steps_ratio == pytest.approx(0, abs=1e-9)
    assert d.steps_seed_low < 0 < d.steps_seed_high
    assert d.steps_low <= 0 <= d.steps_high
    assert rows[MULTI].verdict == "no difference shown"


def test_only_pairs_of_sft_arms_get_the_section() -> None:
    eps = _arm(REFLECT, {0: 1}) + _arm(PLAIN, {0: 5}) + _arm("steps/rl", {0: 1})
    metrics: dict = {}
    assert steps_section(metrics, eps, [("steps/rl", REFLECT)], {}) is None
    sec = steps_section(metrics, eps, [("steps/rl", REFLECT), (REFLECT, PLAIN)], {REFLECT: "R"})
    assert sec is not None and "A = R (steps/sft)" in sec.blocks[0].text
    key = f"steps/{REFLECT}-vs-{PLAIN}/multi_step"
    assert metrics[f"{key}/steps_ratio"] < 0 and metrics[f"{key}/success_a"] == 1.0
    assert not any("steps/rl" in k for k in metrics)


def _write_eval(root: Path, run: str, policy: str, episodes: list[Episode]) -> Path:
    with ShardWriter(root / run) as sink:
        for e in episodes:
            rec = make_episode(
                run=run, task=e.task_id, seed=e.seed, policy=policy, success=e.success,
                n_steps=e.n_steps, screenshots=False,
            )  # fmt: skip
            rec.episode.split = "test"
            sink.write(rec)
    return root / run


def test_the_report_shows_the_steps_of_its_two_sft_arms(tmp_path: Path) -> None:
    tasks = {"login-user": 3, "click-button": 1}
    runs = {}
    for s, (mine, plain) in enumerate([(1, 8), (2, 9), (0, 7)]):
        for exp, role, n in (("steps", "", mine), ("steps-plain", "steps-plain.", plain)):
            eps = [e for e in _arm(f"{exp}/sft", {s: n}, tasks) if e.seed < 12]
            runs[f"{role}eval-sft-s{s}"] = _write_eval(
                tmp_path / "runs", f"eval/{exp}/sft/s{s}", "sft", eps
            )
    rep = build_report(
        runs,
        title="steps",
        experiment="steps",
        arms=[("SFT, reflection data", REFLECT), ("SFT, plain data", PLAIN)],
        comparisons=[("SFT, reflection data", "SFT, plain data")],
    )
    titles = [s.title for s in rep.document.sections]
    assert "Steps on solved episodes per task (SFT arms, test split)" in titles
    assert rep.metrics[f"steps/{REFLECT}-vs-{PLAIN}/multi_step/steps_ratio"] < -0.1
    # It says in words that the size of the effect is the simulator's.
    md = to_markdown(rep.document)
    assert "the size of the effect is the simulator's" in md
    # The default job's report compares no SFT arms and gets no such section.
    one = {"eval-sft-s0": runs["eval-sft-s0"]}
    plain_report = build_report(one, title="x", experiment="steps")
    assert not any(s.title.startswith("Steps on solved") for s in plain_report.document.sections)
