"""The capacity measure: how much of each task's expert − SFT gap more demonstrations close.

A sweep whose axis moves the demonstrations per task (`sft.demos_per_task`, which
shares one collection between budgets, or `suite.train.count`) holds, per
point, the SFT policy's success per task on val. For each combination of its other axes
(a model size, a pretraining budget), the lowest budget B and the highest budget H are
compared task by task:

    gap    = expert − SFT(B)        what there is to gain
    closed = SFT(H) − SFT(B)        what H / B times the demonstrations gained
    share  = closed / gap           1: the gap is data; 0: more data does not help

A task whose share is below one half is capacity-limited (more demonstrations alone do
not fix it: the model, its prompt or its pretraining must change); a task with no gap
(below `MIN_GAP`) is neither. Pooled over the tasks:

    data_limited_share = sum of the gaps of the data-limited tasks / sum of all gaps
    closed_share       = sum of closed / sum of gaps

The recipe's regime asks data_limited_share >= 0.8 at the default budget: the gap RL is
asked to close is one that demonstrations could close, not one the model cannot learn.

The expert's per-task success comes from an eval metrics file on the same split (the
`expert` policy's); without one it is taken as 1.0 (the scripted MiniWoB experts solve
their tasks; the output says so).

`rmsweb sweep capacity NAME` writes metrics/sweep/NAME.capacity.json and prints the table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

BUDGET_KEYS = ("sft.demos_per_task", "suite.train.count")
MIN_GAP = 0.02  # below this there is nothing to close (about one episode in 50)
HALF = 0.5


def budget_axis(summary: Mapping[str, Any]) -> str | None:
    """The axis that moves the demonstrations per task, if any."""
    for axis, keys in summary["axes"].items():
        if any(k in keys for k in BUDGET_KEYS):
            return axis
    return None


def _budget(point: Mapping[str, Any]) -> int:
    key = next(k for k in BUDGET_KEYS if k in point["overrides"])
    return int(point["overrides"][key])


def task_row(expert: float, low: float, high: float) -> dict[str, Any]:
    gap = expert - low
    closed = high - low
    share = closed / gap if gap >= MIN_GAP else None
    if share is None:
        verdict = "no gap"
    else:
        verdict = "data-limited" if share >= HALF - 1e-9 else "capacity-limited"
    return {
        "expert": expert,
        "sft_low": low,
        "sft_high": high,
        "gap": gap,
        "closed": closed,
        "share": share,
        "verdict": verdict,
    }


def pooled(rows: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    gaps = {t: max(r["gap"], 0.0) for t, r in rows.items() if r["share"] is not None}
    total = sum(gaps.values())
    data = sum(g for t, g in gaps.items() if rows[t]["verdict"] == "data-limited")
    closed = sum(rows[t]["closed"] for t in gaps)
    return {
        "gap": total,
        "data_limited_share": data / total if total > 0 else None,
        "closed_share": closed / total if total > 0 else None,
        "capacity_limited": sorted(
            t for t, r in rows.items() if r["verdict"] == "capacity-limited"
        ),
    }


def capacity(
    summary: Mapping[str, Any], expert: Mapping[str, float] | None = None
) -> dict[str, Any]:
    """Per group of the other axes: the per-task table and the pooled shares."""
    axis = budget_axis(summary)
    if axis is None:
        raise ValueError(
            f"sweep {summary['sweep']} has no axis on {' or '.join(BUDGET_KEYS)}: the capacity "
            "measure "
            "compares budgets of demonstrations per task."
        )
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for p in summary["points"]:
        key = ", ".join(f"{a}={v}" for a, v in p["axes"].items() if a != axis) or "all"
        groups.setdefault(key, []).append(p)
    out: dict[str, Any] = {
        "sweep": summary["sweep"],
        "split": summary["split"],
        "axis": axis,
        "expert_source": "eval metrics" if expert else "assumed 1.0 per task",
        "groups": {},
    }
    for key, points in groups.items():
        scored = [p for p in points if p.get("per_task")]
        if len(scored) < 2:
            out["groups"][key] = {"missing": "fewer than two budgets have per-task results"}
            continue
        low = min(scored, key=_budget)
        high = max(scored, key=_budget)
        tasks = sorted(set(low["per_task"]) & set(high["per_task"]))
        rows = {
            t: task_row((expert or {}).get(t, 1.0), low["per_task"][t], high["per_task"][t])
            for t in tasks
        }
        out["groups"][key] = {
            "low": {"point": low["point"], "budget": _budget(low)},
            "high": {"point": high["point"], "budget": _budget(high)},
            "ratio": _budget(high) / max(_budget(low), 1),
            "tasks": rows,
            "pooled": pooled(rows),
        }
    return out


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}"


def table(result: Mapping[str, Any]) -> str:
    lines = [
        f"Capacity of sweep {result['sweep']} on {result['split']} (axis {result['axis']}; "
        f"expert: {result['expert_source']}). share = (SFT(high) - SFT(low)) / "
        f"(expert - SFT(low)); below {HALF:.0%}: capacity-limited.",
    ]
    for key, group in result["groups"].items():
        lines += ["", f"### {key}", ""]
        if "missing" in group:
            lines.append(f"({group['missing']})")
            continue
        lo, hi = group["low"], group["high"]
        lines += [
            f"budgets {lo['budget']} ({lo['point']}) -> {hi['budget']} ({hi['point']}), "
            f"{group['ratio']:g}x",
            "",
            "| task | expert % | SFT low % | SFT high % | gap | closed | share | verdict |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for task, r in group["tasks"].items():
            lines.append(
                f"| {task} | {_pct(r['expert'])} | {_pct(r['sft_low'])} | {_pct(r['sft_high'])} "
                f"| {_pct(r['gap'])} | {_pct(r['closed'])} | {_pct(r['share'])} | "
                f"{r['verdict']} |"
            )
        p = group["pooled"]
        lines += [
            "",
            f"pooled gap {_pct(p['gap'] / max(len(group['tasks']), 1))} points a task; "
            f"data-limited share {_pct(p['data_limited_share'])}%, closed share "
            f"{_pct(p['closed_share'])}%; capacity-limited: "
            f"{', '.join(p['capacity_limited']) or 'none'}",
        ]
    return "\n".join(lines) + "\n"
