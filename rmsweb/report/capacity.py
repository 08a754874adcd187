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

Intervals (`bootstrap`): each task's true success at both budgets is drawn from its
Jeffreys posterior given its val successes and episodes (the expert's success held
fixed), and the shares recomputed, 2,000 times; the 95% percentile intervals are given per task
and for the pooled shares. With 50 val episodes a task, a share's interval is about
+-15 points wide, so a task near the 50% line may fall on either side in another run;
the data-limited share (a sum over such verdicts) moves more between runs than the
closed share does, and its interval says how much.

The expert's per-task success comes from an eval metrics file on the same split (the
`expert` policy's); without one it is taken as 1.0 (the scripted MiniWoB experts solve
their tasks; the output says so).

`rmsweb sweep capacity NAME` writes metrics/sweep/NAME.capacity.json and prints the table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rmsweb.report.arms import BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED

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


def _interval(values: Any) -> list[float] | None:
    import numpy as np

    finite = values[np.isfinite(values)]
    if len(finite) < len(values) / 2:  # mostly no gap: no share to bound
        return None
    low, high = np.percentile(finite, [2.5, 97.5])
    return [round(float(low), 4), round(float(high), 4)]


def _rates(rng: Any, rates: list[float], n: list[int], draws: int) -> Any:
    """`draws` x tasks plausible true rates given k = rate * n successes in n episodes
    (per task): Beta(k + 1/2, n - k + 1/2) (the Jeffreys posterior), so a task at 0% or
    100% still varies, as a plain binomial redraw of a 0 or 1 rate would not."""
    import numpy as np

    episodes = np.asarray(n, dtype=float)
    k = np.round(np.asarray(rates) * episodes)
    return rng.beta(k + 0.5, episodes - k + 0.5, size=(draws, len(rates)))


def _per_task(n: int | Mapping[str, int], tasks: list[str]) -> list[int]:
    return [n[t] for t in tasks] if isinstance(n, Mapping) else [n] * len(tasks)


def bootstrap(
    rows: Mapping[str, Mapping[str, Any]],
    n_low: int | Mapping[str, int],
    n_high: int | Mapping[str, int],
    draws: int = BOOTSTRAP_SAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """95% intervals of each task's share and of the pooled shares (module doc):
    {"tasks": {task: [low, high] or None}, "data_limited_share": [..], "closed_share": [..]}.
    `n_low`, `n_high`: episodes per task at each budget (one count, or task -> count)."""
    import numpy as np

    tasks = list(rows)
    rng = np.random.default_rng(seed)
    expert = np.array([rows[t]["expert"] for t in tasks])
    low = _rates(rng, [rows[t]["sft_low"] for t in tasks], _per_task(n_low, tasks), draws)
    high = _rates(rng, [rows[t]["sft_high"] for t in tasks], _per_task(n_high, tasks), draws)
    gap, closed = expert - low, high - low
    has_gap = gap >= MIN_GAP
    share = np.where(has_gap, closed / np.where(has_gap, gap, 1.0), np.nan)
    weight = np.where(has_gap, np.maximum(gap, 0.0), 0.0)
    total = weight.sum(axis=1)
    data = (weight * (np.nan_to_num(share, nan=0.0) >= HALF - 1e-9)).sum(axis=1)
    closed_sum = np.where(has_gap, closed, 0.0).sum(axis=1)
    safe = np.where(total > 0, total, np.nan)
    return {
        "tasks": {t: _interval(share[:, j]) for j, t in enumerate(tasks)},
        "data_limited_share": _interval(data / safe),
        "closed_share": _interval(closed_sum / safe),
        "draws": draws,
        "episodes_per_task": {"low": n_low, "high": n_high},
    }


def _episodes_per_task(point: Mapping[str, Any]) -> int | None:
    """Val episodes per task behind a point's per-task rates (its n over its tasks;
    the split draws the same count for every task)."""
    n, tasks = point.get("n"), len(point.get("per_task") or {})
    return max(1, round(n / tasks)) if n and tasks else None


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
        group = {
            "low": {"point": low["point"], "budget": _budget(low)},
            "high": {"point": high["point"], "budget": _budget(high)},
            "ratio": _budget(high) / max(_budget(low), 1),
            "tasks": rows,
            "pooled": pooled(rows),
        }
        n_low, n_high = _episodes_per_task(low), _episodes_per_task(high)
        if rows and n_low and n_high:
            ci = bootstrap(rows, n_low, n_high)
            for t, row in rows.items():
                row["share_ci"] = ci["tasks"][t]
            group["pooled"]["data_limited_share_ci"] = ci["data_limited_share"]
            group["pooled"]["closed_share_ci"] = ci["closed_share"]
            group["bootstrap"] = {
                "draws": ci["draws"],
                "episodes_per_task": ci["episodes_per_task"],
            }
        out["groups"][key] = group
    return out


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}"


def interval_text(v: list[float] | None) -> str:
    """A 95% interval in points, "[low, high]" ("-" for none)."""
    return "-" if not v else f"[{100 * v[0] + 0.0:.0f}, {100 * v[1] + 0.0:.0f}]"


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
            "| task | expert % | SFT low % | SFT high % | gap | closed | share | share 95% "
            "| verdict |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for task, r in group["tasks"].items():
            lines.append(
                f"| {task} | {_pct(r['expert'])} | {_pct(r['sft_low'])} | {_pct(r['sft_high'])} "
                f"| {_pct(r['gap'])} | {_pct(r['closed'])} | {_pct(r['share'])} | "
                f"{interval_text(r.get('share_ci'))} | {r['verdict']} |"
            )
        p = group["pooled"]
        lines += [
            "",
            f"pooled gap {_pct(p['gap'] / max(len(group['tasks']), 1))} points a task; "
            f"data-limited share {_pct(p['data_limited_share'])}% "
            f"{interval_text(p.get('data_limited_share_ci'))}, closed share "
            f"{_pct(p['closed_share'])}% {interval_text(p.get('closed_share_ci'))}; capacity-limited: "
            f"{', '.join(p['capacity_limited']) or 'none'}",
        ]
        if "bootstrap" in group:
            b = group["bootstrap"]
            lines.append(
                f"95% intervals: {b['draws']} draws of each task's success (Jeffreys) at "
                f"{b['episodes_per_task']['low']} and {b['episodes_per_task']['high']} "
                f"{result['split']} episodes a task (the expert held fixed)."
            )
    return "\n".join(lines) + "\n"
