"""Judges of an attempt: did it succeed, and did it take detours.

- `reward_judge`: success from the suite's reward; no detour detection (no oracle).
- `oracle_judge`: success from the suite's reward; redundant steps are those whose
  action is not acceptable in the state (by the oracle's labels); a success with
  redundant steps or more than reference_length * (1 + slack) steps is a detour.
"""

from __future__ import annotations

from rmsweb.judge.oracle import OracleLabels, redundant_steps
from rmsweb.judge.types import JudgeFn, Verdict, is_detour
from rmsweb.store.rows import EpisodeRecord


async def reward_judge(rec: EpisodeRecord) -> Verdict:
    """Without an oracle: success from the suite's reward, no detour detection."""
    return Verdict(rec.episode.success)


def oracle_judge(labels: OracleLabels, detour_slack: float) -> JudgeFn:
    async def judge(rec: EpisodeRecord) -> Verdict:
        redundant, _ = redundant_steps(rec, labels)
        n = rec.episode.n_steps
        reference = n - len(redundant) if rec.episode.success else None
        detour = rec.episode.success and (bool(redundant) or is_detour(n, reference, detour_slack))
        return Verdict(rec.episode.success, detour, reference, tuple(redundant))

    return judge
