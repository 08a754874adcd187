"""Headroom, length and reach per task and pooled (pure: episodes and probed states in).

- headroom: the expert's val success − the greedy SFT policy's, per task; pooled, the
  mean over tasks (each task weighs the same, as eval's overall success does). Success
  per task with its Wilson interval comes from rmsweb.evaluate.metrics.eval_rows, so
  the numbers are the eval stage's definitions (an env-error episode is a failure).
- length: the expert's mean steps on its successful val episodes, per task; pooled, the
  mean over the tasks that have one.
- reach: the share of failure states where at least one of the G samples is acceptable
  (pass@G), with the Wilson interval of the counts; pooled over all the states (the
  share of failure states, whatever their task), on the mined states and on the val
  failure states apart.
- reach at the first failure (reach_val_first): the same on the val failure states that
  are their episode's first wrong step (source "first", failures.py), the like of
  mining's critical states; the rest follow an earlier error.
- reach on target: the same with a sample counted when it has a reference's action type
  and element, whatever value it types: where it is far above reach, the policy finds
  the field and fails on the value (a copying skill), not on the element.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rmsweb.evaluate.metrics import eval_rows
from rmsweb.regime.probe import ProbeState
from rmsweb.store.rows import EpisodeRecord, EvalRow
from rmsweb.store.stats import wilson_interval

POOLED = "*"


@dataclass(frozen=True)
class Reach:
    reached: int  # states with an acceptable sample among the G
    states: int

    @property
    def rate(self) -> float | None:
        return self.reached / self.states if self.states else None

    @property
    def interval(self) -> tuple[float | None, float | None]:
        if not self.states:
            return (None, None)
        return wilson_interval(self.reached, self.states)


def reach_by_task(
    states: Iterable[ProbeState], tasks: Sequence[str], on_target: bool = False
) -> dict[str, Reach]:
    """task -> its Reach, plus POOLED over every state (tasks without states: 0 of 0);
    `on_target`: count a state by `reached_target` (action and element, value aside)."""
    reached = dict.fromkeys(tasks, 0)
    total = dict.fromkeys(tasks, 0)
    for s in states:
        hit = s.reached_target if on_target else s.reached
        reached[s.task_id] = reached.get(s.task_id, 0) + int(hit)
        total[s.task_id] = total.get(s.task_id, 0) + 1
    out = {t: Reach(reached[t], total[t]) for t in sorted(total)}
    out[POOLED] = Reach(sum(reached.values()), sum(total.values()))
    return out


def success_by_task(records: Sequence[EpisodeRecord], policy: str) -> dict[str, EvalRow]:
    """task -> the eval row of `policy`'s val episodes (POOLED: the overall row)."""
    mine = [r for r in records if r.episode.policy == policy]
    if not mine:
        return {}
    rows = eval_rows(mine, run="", policy=policy, suite="", split="val", wall_s=0.0)
    return {r.task_id: r for r in rows}


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _reach_fields(prefix: str, r: Reach) -> dict[str, Any]:
    low, high = r.interval
    return {
        prefix: _round(r.rate),
        f"{prefix}_states": r.states,
        f"{prefix}_reached": r.reached,
        f"{prefix}_ci_low": _round(low),
        f"{prefix}_ci_high": _round(high),
    }


def regime_metrics(
    tasks: Sequence[str],
    records: Sequence[EpisodeRecord],
    mined: Sequence[ProbeState],
    val: Sequence[ProbeState],
    *,
    expert: str = "expert",
    sft: str = "sft",
) -> dict[str, dict[str, Any]]:
    """task (and POOLED) -> expert_success_val, sft_success_val (with intervals),
    headroom, expert_steps, reach_mined*, reach_val*, reach_val_first*, reach_*_target*
    (module doc)."""
    ex, sf = success_by_task(records, expert), success_by_task(records, sft)
    reach_mined, reach_val = reach_by_task(mined, tasks), reach_by_task(val, tasks)
    reach_first = reach_by_task([s for s in val if s.source == "first"], tasks)
    target_mined = reach_by_task(mined, tasks, on_target=True)
    target_val = reach_by_task(val, tasks, on_target=True)
    out: dict[str, dict[str, Any]] = {}
    lengths = []
    for task in [*sorted(tasks), POOLED]:
        e, s = ex.get(task), sf.get(task)
        steps = e.mean_steps_solved if e is not None else None
        if task != POOLED and steps is not None:
            lengths.append(steps)
        if task == POOLED:
            steps = sum(lengths) / len(lengths) if lengths else None
        values: dict[str, Any] = {
            "expert_success_val": _round(e.success_rate) if e else None,
            "expert_success_val_ci_low": _round(e.ci_low) if e else None,
            "expert_success_val_ci_high": _round(e.ci_high) if e else None,
            "expert_episodes": e.n if e else 0,
            "sft_success_val": _round(s.success_rate) if s else None,
            "sft_success_val_ci_low": _round(s.ci_low) if s else None,
            "sft_success_val_ci_high": _round(s.ci_high) if s else None,
            "sft_episodes": s.n if s else 0,
            "headroom": _round(e.success_rate - s.success_rate) if e and s else None,
            "expert_steps": _round(steps),
            **_reach_fields("reach_mined", reach_mined.get(task, Reach(0, 0))),
            **_reach_fields("reach_val", reach_val.get(task, Reach(0, 0))),
            **_reach_fields("reach_val_first", reach_first.get(task, Reach(0, 0))),
            **_reach_fields("reach_mined_target", target_mined.get(task, Reach(0, 0))),
            **_reach_fields("reach_val_target", target_val.get(task, Reach(0, 0))),
        }
        out[task] = values
    return out
