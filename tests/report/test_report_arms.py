"""Arm statistics over training seeds, on hand-computed cases."""

from __future__ import annotations

import math
import statistics

import pytest

from rmsweb.report.arms import (
    Episode,
    arm_of_run,
    paired_difference,
    per_task_differences,
    summarize,
    t95,
    task_weighted,
)


def ep(arm: str, seed: int | None, task: str, unit: int, ok: bool, steps: int = 2) -> Episode:
    return Episode(arm, seed, task, unit, ok, steps)


def test_task_weighted_mean_weighs_tasks_equally() -> None:
    # task a: 1/1, task b: 1/3 -> (1 + 1/3) / 2 = 2/3 (the pooled mean would be 2/4)
    assert task_weighted([("a", 1), ("b", 1), ("b", 0), ("b", 0)]) == pytest.approx(2 / 3)


def test_summary_over_three_seeds_by_hand() -> None:
    # Seeds 0, 1, 2 succeed on 2/4, 3/4, 4/4 units of one task: per-seed 0.5, 0.75, 1.0.
    eps = [ep("x/rl", s, "t", u, u < 2 + s) for s in range(3) for u in range(4)]
    s = summarize("x/rl", eps)
    assert s.per_seed == (0.5, 0.75, 1.0)
    assert s.mean == pytest.approx(0.75)
    # stdev = 0.25, half-width = t(2) * 0.25 / sqrt(3) = 4.303 * 0.1443 = 0.6211
    assert s.seed_high - s.mean == pytest.approx(4.303 * 0.25 / math.sqrt(3))
    assert (s.n, s.successes) == (12, 9)
    assert 0.45 < s.pooled_low < 0.75 < s.pooled_high < 0.95  # Wilson of 9/12


def test_one_seed_has_no_seed_interval() -> None:
    s = summarize("x/expert", [ep("x/expert", None, "t", 0, True)])
    assert s.seed_low is None and s.seed_high is None and s.mean == 1.0


def test_paired_difference_is_the_seed_averaged_unit_difference() -> None:
    # A (2 seeds) solves units 0-3 in seed 0 and 0-1 in seed 1: per-unit 1, 1, .5, .5 -> 0.75.
    # B (2 seeds) solves units 0-1 in both: per-unit 1, 1, 0, 0 -> 0.5. Difference 0.25.
    a = [ep("e/a", s, "t", u, u < (4 if s == 0 else 2)) for s in (0, 1) for u in range(4)]
    b = [ep("e/b", s, "t", u, u < 2) for s in (0, 1) for u in range(4)]
    d = paired_difference("e/a", "e/b", a, b, samples=500)
    assert d.units == 4 and d.diff == pytest.approx(0.25)
    assert d.low <= 0.25 <= d.high
    assert d.low >= 0  # no unit favours B, so no resample can
    # Half the units have difference 0: a resample of only those (p = 1/16 > 2.5%) gives 0,
    # so the interval reaches 0 and the arms are not called different.
    assert d.low == 0 and d.verdict == "no difference shown (interval contains 0)"


def test_arms_on_different_seeds_pair_on_the_seeds_they_share() -> None:
    # A trained on seeds 0-4 solves everything on 0-2 and nothing on 3-4; B, on seeds 0-2
    # only, solves half. On the shared seeds A - B = 1 - 0.5 = +0.5 for every seed; mixing
    # A's 5-seed average (0.6) with B's 3-seed one would say +0.1.
    a = [ep("e/a", s, "t", u, s < 3) for s in range(5) for u in range(4)]
    b = [ep("e/b", s, "t", u, u < 2) for s in range(3) for u in range(4)]
    d = paired_difference("e/a", "e/b", a, b, samples=300)
    assert d.diff == pytest.approx(0.5)
    assert [s for s, _ in d.per_seed] == [0, 1, 2]
    assert all(x == pytest.approx(0.5) for _, x in d.per_seed)
    # An untrained arm (seed None) still pairs with every seed of the other.
    teacher = [ep("e/teacher", None, "t", u, u < 2) for u in range(4)]
    assert paired_difference("e/a", "e/teacher", a, teacher, samples=300).diff == pytest.approx(
        0.6 - 0.5
    )


def test_per_task_differences_pool_as_the_paired_difference_does() -> None:
    # As above, on tasks x (A on seeds 0-4, B on 0-2) and y (both tie): x pairs on the
    # shared seeds only (+0.5, not +0.1), and the task-weighted mean of the two tasks is
    # the pooled difference.
    a = [ep("e/a", s, "x", u, s < 3) for s in range(5) for u in range(4)]
    a += [ep("e/a", s, "y", u, u < 1) for s in range(5) for u in range(4)]
    b = [ep("e/b", s, "x", u, u < 2) for s in range(3) for u in range(4)]
    b += [ep("e/b", s, "y", u, u < 1) for s in range(3) for u in range(4)]
    per_task = per_task_differences(a, b)
    assert per_task == {"x": pytest.approx(0.5), "y": 0.0}
    pooled = paired_difference("e/a", "e/b", a, b, samples=100).diff
    assert pooled == pytest.approx(sum(per_task.values()) / 2)


def test_a_clear_gap_is_called_and_a_tie_is_not() -> None:
    a = [ep("e/a", 0, t, u, True) for t in "xy" for u in range(30)]
    b = [ep("e/b", 0, t, u, u % 3 == 0) for t in "xy" for u in range(30)]
    assert paired_difference("e/a", "e/b", a, b, samples=300).verdict == "e/a better"
    assert paired_difference("e/b", "e/a", b, a, samples=300).verdict == "e/a better"
    tie = paired_difference("e/b", "e/b", b, b, samples=300)
    assert (tie.diff, tie.low, tie.high) == (0, 0, 0)
    assert tie.verdict.startswith("no difference")


def test_steps_ratio_on_units_both_solved() -> None:
    # Both solve units 0 and 1; A takes 3 steps where B takes 4: 6/8 - 1 = -25%.
    a = [ep("e/a", 0, "t", u, u < 2, steps=3) for u in range(3)]
    b = [ep("e/b", 0, "t", u, True, steps=4) for u in range(3)]
    d = paired_difference("e/a", "e/b", a, b, samples=200)
    assert d.steps_units == 2 and d.steps_ratio == pytest.approx(-0.25)


def test_no_shared_units_is_an_error() -> None:
    with pytest.raises(ValueError, match="share no"):
        paired_difference("a", "b", [ep("a", 0, "t", 1, True)], [ep("b", 0, "t", 2, True)])


def test_arm_and_seed_from_the_run_folder() -> None:
    assert arm_of_run(("runs", "eval", "owner", "sft", "s2"), "study") == ("study/sft", 2)
    assert arm_of_run(("runs", "eval", "owner", "expert"), "study") == ("study/expert", None)


def test_t_quantiles() -> None:
    assert t95(2) == 4.303 and t95(12) == 2.228 and t95(100) == 1.96
    with pytest.raises(ValueError):
        t95(0)


def _three_seed_arm(arm: str, solved_per_seed: tuple[int, int, int], units: int = 40) -> list:
    # One task; seed k solves the first solved_per_seed[k] of `units` test units.
    return [ep(arm, s, "t", u, u < solved_per_seed[s]) for s in range(3) for u in range(units)]


def test_per_seed_differences_pair_seeds_by_number() -> None:
    # A - B per seed: 30/40 - 20/40 = +.25, 10/40 - 14/40 = -.10, 32/40 - 20/40 = +.30
    a = _three_seed_arm("e/a", (30, 10, 32))
    b = _three_seed_arm("e/b", (20, 14, 20))
    d = paired_difference("e/a", "e/b", a, b, samples=300)
    assert [s for s, _ in d.per_seed] == [0, 1, 2]
    assert [x for _, x in d.per_seed] == pytest.approx([0.25, -0.10, 0.30])
    values = [0.25, -0.10, 0.30]
    half = 4.303 * statistics.stdev(values) / math.sqrt(3)
    assert d.seed_low == pytest.approx(sum(values) / 3 - half)
    assert d.seed_high == pytest.approx(sum(values) / 3 + half)


def test_runs_that_swing_are_not_called_better_on_the_unit_interval_alone() -> None:
    # Averaged over seeds A - B is +0.15 over 40 units, and the unit bootstrap excludes 0
    # (it holds the three runs fixed); but seed 1 goes the other way (-0.10), and the
    # interval over the 3 seeds' differences spans 0: no verdict.
    a = _three_seed_arm("e/a", (30, 10, 32))
    b = _three_seed_arm("e/b", (20, 14, 20))
    d = paired_difference("e/a", "e/b", a, b, samples=500)
    assert d.low > 0
    assert d.seed_low is not None and d.seed_low < 0 < d.seed_high
    assert d.verdict == "no difference shown (interval over seeds contains 0)"
    # Consistent seeds (+.25, +.20, +.30): both intervals exclude 0, A is called better.
    steady = _three_seed_arm("e/a", (30, 22, 32))
    d2 = paired_difference("e/a", "e/b", steady, _three_seed_arm("e/b", (20, 14, 20)), samples=500)
    assert d2.low > 0 and d2.seed_low > 0 and d2.verdict == "e/a better"


def test_a_one_run_arm_pairs_with_every_seed() -> None:
    a = _three_seed_arm("e/a", (30, 20, 10))
    teacher = [ep("e/teacher", None, "t", u, u < 20) for u in range(40)]
    d = paired_difference("e/a", "e/teacher", a, teacher, samples=200)
    assert [s for s, _ in d.per_seed] == [0, 1, 2]
    assert [x for _, x in d.per_seed] == pytest.approx([0.25, 0.0, -0.25])
    one = paired_difference("e/b", "e/teacher", [ep("e/b", 0, "t", 1, True)], teacher[:2])
    assert one.seed_low is None and one.seed_high is None  # one pair: no seed interval


def test_steps_ratio_per_seed_on_units_each_pair_solved() -> None:
    # Seed 0: A solves units 0-1 in 3 steps, B solves all in 4: 6/8 - 1 = -25%.
    # Seed 1: A solves units 0-2 in 4 steps, B solves units 0-1 in 4: 8/8 - 1 = 0%.
    a = [ep("e/a", 0, "t", u, u < 2, steps=3) for u in range(3)]
    a += [ep("e/a", 1, "t", u, True, steps=4) for u in range(3)]
    b = [ep("e/b", 0, "t", u, True, steps=4) for u in range(3)]
    b += [ep("e/b", 1, "t", u, u < 2, steps=4) for u in range(3)]
    d = paired_difference("e/a", "e/b", a, b, samples=200)
    assert [s for s, _ in d.steps_per_seed] == [0, 1]
    assert [r for _, r in d.steps_per_seed] == pytest.approx([-0.25, 0.0])
    half = 12.706 * statistics.stdev([-0.25, 0.0]) / math.sqrt(2)
    assert d.steps_seed_low == pytest.approx(-0.125 - half)
    assert d.steps_seed_high == pytest.approx(-0.125 + half)
