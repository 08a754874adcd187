"""The contrast-and-competence gate: which groups drive the policy gradient (DESIGN.md §1 S).

A group is the G completions sampled for one state. It is accepted when
1. contrast: it holds both correct and wrong samples and its reward std >= `min_std`
   (with the polarized reward "both signs present"; a group without contrast has all
   advantages ~0 after normalisation, so it adds nothing but noise and token mass), and
2. competence: its fraction of correct samples lies in [`competence_min`,
   `competence_max`] (a state the policy almost never solves gives a gradient led by
   one lucky sample; one it almost always solves has little left to teach).

Every group gets a reason, logged in the rl_groups table:
  accepted, ungated (gate off: every group is used), all_wrong, all_right (no contrast),
  low_std (both present but std < min_std), too_hard, too_easy (competence).
The checks run in that order, so a group has exactly one reason.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

REASONS: tuple[str, ...] = (
    "accepted",
    "ungated",
    "all_wrong",
    "all_right",
    "low_std",
    "too_hard",
    "too_easy",
)


@dataclass(frozen=True, slots=True)
class GroupStats:
    mean: float
    std: float  # sample std (Bessel-corrected), the one the advantages divide by
    frac_correct: float


@dataclass(frozen=True, slots=True)
class GateDecision:
    accepted: bool
    reason: str  # one of REASONS


def group_stats(rewards: Sequence[float], correct: Sequence[bool]) -> GroupStats:
    n = len(rewards)
    if n < 2 or len(correct) != n:
        raise ValueError(f"a group needs >= 2 rewards and one verdict each, got {n}")
    mean = sum(rewards) / n
    # Bessel's correction: the same std as the advantage normalisation (and TRL's GRPO).
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (n - 1))
    return GroupStats(mean, std, sum(correct) / n)


def gate(
    stats: GroupStats,
    *,
    enabled: bool,
    min_std: float,
    competence_min: float,
    competence_max: float,
) -> GateDecision:
    """Accept or reject one group, with the reason (see the module docstring)."""
    if not enabled:
        return GateDecision(True, "ungated")
    if stats.frac_correct == 0.0:
        return GateDecision(False, "all_wrong")
    if stats.frac_correct == 1.0:
        return GateDecision(False, "all_right")
    if stats.std < min_std:
        return GateDecision(False, "low_std")
    if stats.frac_correct < competence_min:
        return GateDecision(False, "too_hard")
    if stats.frac_correct > competence_max:
        return GateDecision(False, "too_easy")
    return GateDecision(True, "accepted")
