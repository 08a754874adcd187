"""Judges of an attempt: did it succeed, and did it take detours.

`attempt_judge` is the one judge of the collect stage, for every teacher:
- success: the suite's reward (the task's own 0/1 evaluation);
- wasted steps: from the trajectory alone (rmsweb.judge.trajectory), so an LLM
  teacher's detours are found as well as the scripted one's;
- reference length: task-level (rmsweb.judge.reference), never the attempt's own;
- detour: a success with wasted steps, or with more than reference * (1 + slack)
  steps. Both are needed: wasted steps catch detours of any length the trajectory
  shows; the length test catches detours it does not show (a field filled twice
  with the same text, a roundabout path), and `detour_slack` tunes only that test.
"""

from __future__ import annotations

from rmsweb.judge.reference import ReferenceLengths
from rmsweb.judge.trajectory import wasted_step_ids
from rmsweb.judge.types import JudgeFn, Verdict, is_detour
from rmsweb.store.rows import EpisodeRecord


def attempt_judge(reference: ReferenceLengths, detour_slack: float) -> JudgeFn:
    async def judge(rec: EpisodeRecord) -> Verdict:
        ep = rec.episode
        wasted = wasted_step_ids(rec)
        ref = await reference.reference(rec) if ep.success else None
        reference.observe(rec)
        detour = ep.success and (bool(wasted) or is_detour(ep.n_steps, ref, detour_slack))
        return Verdict(ep.success, detour, ref, wasted)

    return judge
