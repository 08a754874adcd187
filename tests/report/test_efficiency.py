"""RL sample efficiency's pure parts (report/efficiency.py): the first checkpoint at SFT +
half the gain on a constructed curve, "undefined" when the gain is within the noise, and
the samples at equal accepted groups."""

from __future__ import annotations

import pytest

from rmsweb.report.arms import Episode
from rmsweb.report.efficiency import (
    Gain,
    Point,
    checkpoint_points,
    cumulative,
    final_gain,
    ratio_text,
    samples_at_accepted,
    samples_to_half_gain,
)

# 10 steps of 128 samples; 16 groups a step, 2 accepted on odd steps, 0 on even ones.
CURVE = [{"step": s, "samples_generated": 128, "accepted": 2 if s % 2 else 0} for s in range(1, 11)]


def _episodes(successes: list[bool], task: str = "t") -> list[Episode]:
    return [Episode("a", None, task, k, ok, 1) for k, ok in enumerate(successes)]


def test_cumulative_sums_in_step_order() -> None:
    shuffled = list(reversed(CURVE))
    assert cumulative(shuffled, "samples_generated")[4] == 4 * 128
    assert cumulative(shuffled, "accepted") == {s: 2 * ((s + 1) // 2) for s in range(1, 11)}


def test_first_checkpoint_at_sft_plus_half_the_gain() -> None:
    # SFT 0.60, final 0.80: the target is 0.70. Step 4 reaches 0.68, step 6 0.70 (a tie
    # counts), step 8 dips, step 10 is final: the first crossing is step 6.
    success = {2: 0.62, 4: 0.68, 6: 0.70, 8: 0.66, 10: 0.80}
    points = checkpoint_points(CURVE, success, 0.60)
    assert points[0] == Point(0, 0, 0.60)
    assert [p.samples for p in points[1:]] == [256, 512, 768, 1024, 1280]
    half = samples_to_half_gain(points, Gain(0.20, 0.05, 0.35, 100))
    assert (half.step, half.samples, half.why) == (6, 768, "")
    assert half.target == pytest.approx(0.70)
    # A later, slower run reaches it only at the last checkpoint.
    slow = checkpoint_points(CURVE, {5: 0.61, 10: 0.80}, 0.60)
    assert samples_to_half_gain(slow, Gain(0.20, 0.05, 0.35, 100)).samples == 1280


def test_no_gain_above_the_noise_is_undefined_and_gives_no_ratio() -> None:
    points = checkpoint_points(CURVE, {5: 0.70, 10: 0.62}, 0.60)
    within = samples_to_half_gain(points, Gain(0.02, -0.03, 0.07, 100))
    assert (within.target, within.step, within.samples) == (None, None, None)
    assert within.why.startswith("undefined (no gain)") and "[-3.0, +7.0]" in within.why
    below = samples_to_half_gain(points, Gain(-0.05, -0.09, -0.01, 100))
    assert below.samples is None
    assert ratio_text(within.samples, 1280) == "undefined (no gain)"
    assert ratio_text(2560, None) == "undefined (no gain)"
    assert ratio_text(2560, 1280) == "2.000"


def test_the_gain_is_the_paired_difference_with_its_interval() -> None:
    # 200 val units on two tasks; the final policy solves 40 more: +20 points, clear of 0.
    sft = _episodes([k % 2 == 0 for k in range(100)], "a") + _episodes([False] * 100, "b")
    final = _episodes([k % 2 == 0 for k in range(100)], "a") + _episodes(
        [k < 40 for k in range(100)], "b"
    )
    gain = final_gain(sft, final)
    assert gain.units == 200 and gain.diff == pytest.approx(0.20)
    assert gain.defined and 0 < gain.low < 0.20 < gain.high
    # One more success on one unit of 200 is within the noise.
    tied = final_gain(sft, [*sft[:-1], Episode("a", None, "b", 99, True, 1)])
    assert tied.diff == pytest.approx(0.005) and tied.low <= 0 and not tied.defined


def test_samples_at_equal_accepted_groups() -> None:
    # Accepted groups reach 6 at step 5 (2 + 2 + 2 on steps 1, 3, 5): 5 x 128 samples.
    assert samples_at_accepted(CURVE, 6) == (5, 640)
    assert samples_at_accepted(CURVE, 1) == (1, 128)
    assert samples_at_accepted(CURVE, 11) is None  # 10 accepted in the whole run
    # DAPO-DS drawing 4x the samples a step for the same accepted groups: ratio 4.
    dapo = [{**row, "samples_generated": 512} for row in CURVE]
    salvage_total = sum(r["samples_generated"] for r in CURVE)
    step, samples = samples_at_accepted(dapo, 10)  # type: ignore[misc]
    assert (step, ratio_text(samples, salvage_total)) == (9, "3.600")


def test_a_checkpoint_past_the_curve_is_an_error() -> None:
    with pytest.raises(ValueError, match="past the curve"):
        checkpoint_points(CURVE, {12: 0.7}, 0.6)
