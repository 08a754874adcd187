"""RL sample efficiency from a run's curve and its checkpoints' val success (pure).

benchmarks/rl_efficiency.py trains Salvage-DS, DAPO-DS and GRPO from one SFT checkpoint
and plays every checkpoint on val; this module turns that into two measures:

1. Samples to half the gain: the trainer's samples_generated, summed over the steps up
   to the first checkpoint whose val success reaches SFT + half of the run's final gain
   (final checkpoint - SFT). The gain counts only when it is above the noise: the
   paired unit-bootstrap 95% interval of final - SFT on the same val units
   (rmsweb.report.arms.paired_difference) lies above 0. Otherwise the figure is
   "undefined (no gain)", and no ratio is formed from it. The crossing is read on the
   checkpoint grid (save_steps), so it is an upper bound within one interval.
2. Samples at equal accepted groups: the samples a run had drawn at the first step where
   its accepted (gated-in) groups, summed, reach a target (Salvage-DS's total); the
   ratio of two runs at the same target compares what each pays per usable group.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rmsweb.report.arms import Episode, paired_difference

UNDEFINED = "undefined (no gain)"


@dataclass(frozen=True)
class Point:
    """One checkpoint: its step, the samples drawn through that step, its val success."""

    step: int
    samples: int
    success: float


@dataclass(frozen=True)
class Gain:
    """Final checkpoint - SFT on val, with its paired 95% interval (unit bootstrap)."""

    diff: float
    low: float
    high: float
    units: int

    @property
    def defined(self) -> bool:
        """Above the noise: the interval lies above 0."""
        return self.diff > 0 and self.low > 0


@dataclass(frozen=True)
class HalfGain:
    """Where a run first reached SFT + half its gain (None everywhere when undefined)."""

    target: float | None
    step: int | None
    samples: int | None
    why: str = ""  # why it is undefined; "" when defined


def cumulative(curve: Sequence[Mapping[str, Any]], column: str) -> dict[int, int]:
    """Step -> the column summed over the steps up to it (a trainer curve, any order)."""
    total, out = 0, {}
    for row in sorted(curve, key=lambda r: int(r["step"])):
        total += int(row[column])
        out[int(row["step"])] = total
    return out


def checkpoint_points(
    curve: Sequence[Mapping[str, Any]], success: Mapping[int, float], sft: float
) -> list[Point]:
    """Step 0 (SFT, no samples) and each evaluated checkpoint, with the samples so far."""
    samples = cumulative(curve, "samples_generated")
    missing = sorted(s for s in success if s and s not in samples)
    if missing:
        raise ValueError(f"checkpoints {missing} are past the curve's last step")
    return [Point(0, 0, sft)] + [
        Point(s, samples[s], success[s]) for s in sorted(success) if s != 0
    ]


def final_gain(sft: Sequence[Episode], final: Sequence[Episode]) -> Gain:
    """Final - SFT on the val units both played, with the unit-bootstrap interval."""
    d = paired_difference("final", "sft", final, sft)
    return Gain(d.diff, d.low, d.high, d.units)


def samples_to_half_gain(points: Sequence[Point], gain: Gain) -> HalfGain:
    """The first checkpoint at or above SFT + gain / 2 (points[0] is SFT, step 0)."""
    if not gain.defined:
        why = (
            f"{UNDEFINED}: final - SFT {gain.diff * 100:+.1f} points, 95% interval "
            f"[{gain.low * 100:+.1f}, {gain.high * 100:+.1f}] contains or is below 0"
        )
        return HalfGain(None, None, None, why)
    ordered = sorted(points, key=lambda p: p.step)
    target = ordered[0].success + gain.diff / 2
    for p in ordered[1:]:
        if p.success >= target - 1e-12:  # float sums: a tie counts as reached
            return HalfGain(target, p.step, p.samples)
    # The final checkpoint is SFT + gain when both were read on the same units, so this
    # only happens when the points and the gain come from different evaluations.
    return HalfGain(target, None, None, "never reached at a checkpoint")


def samples_at_accepted(curve: Sequence[Mapping[str, Any]], target: int) -> tuple[int, int] | None:
    """(step, samples drawn through it) at the first step where the accepted groups,
    summed, reach `target`; None when the run never does."""
    accepted = cumulative(curve, "accepted")
    samples = cumulative(curve, "samples_generated")
    for step in sorted(accepted):
        if accepted[step] >= target:
            return step, samples[step]
    return None


def ratio_text(numerator: int | None, denominator: int | None, why: str = UNDEFINED) -> str:
    """`x.xxx`, or the reason there is no number (a side undefined or zero)."""
    if numerator is None or denominator is None or denominator == 0:
        return why
    return f"{numerator / denominator:.3f}"
