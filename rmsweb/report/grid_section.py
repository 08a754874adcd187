"""A study's grid in its report: every arm and comparison per cell, and the comparisons
against the grid's axis (e.g. the gain over SFT against the demonstrations per task).

`expand` turns the report spec's arms and comparisons into one per cell for the arms
whose experiment has the grid (the spec itself, and each compared spec whose cells are
among the report's inputs); an arm without it (a control run at the default only) stays
as it is, and a comparison with it is made at the spec's own cell. `grid_section` then
reads the paired differences the arms section computed and lays them out per cell:

- one table, a row per cell, a column per comparison: A − B on test with its interval
  over units (paired bootstrap) and over training seeds (t);
- one figure: each comparison against the axis, bars the seed interval where there are
  two seeds or more, else the unit interval;
- the capacity of the baseline arm (the first comparison's B, e.g. SFT): per task, the
  share of the expert − baseline gap at the spec's own cell (the default budget; the
  first cell when the own is the last) that the last cell closes (rmsweb/report/capacity.py);
  the expert is the report's expert arm where it has one.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rmsweb.report.arms import Difference, Episode
from rmsweb.report.capacity import bootstrap, interval_text, pooled, task_row
from rmsweb.report.document import Figure, Para, Section, Table


@dataclass(frozen=True)
class Cell:
    label: str  # e.g. b75
    shown: str  # e.g. "budget 75"
    own: bool  # the report spec's own values


@dataclass
class GridPlan:
    cells: list[Cell]
    # (A label, B label) of the spec -> per cell label: (A arm id, B arm id)
    comparisons: dict[tuple[str, str], dict[str, tuple[str, str]]] = field(default_factory=dict)
    # the baseline's arm id per cell (the first gridded comparison's B)
    baseline: dict[str, str] = field(default_factory=dict)
    expert: str | None = None  # an expert arm id, if the report has one


def _cell_experiment(exp: str, cell: Cell) -> str:
    return exp if cell.own else f"{exp}-{cell.label}"


def expand(
    cells: Sequence[Cell],
    gridded: set[str],
    arms: Sequence[tuple[str, str]],
    comparisons: Sequence[tuple[str, str]],
) -> tuple[list[tuple[str, str]], list[tuple[str, str]], GridPlan]:
    """Arms and comparisons per cell (module doc). `gridded`: the experiments with cells;
    `arms`: (label, <experiment>/<policy>); `comparisons`: (a, b) by label or arm id."""
    own = next(c for c in cells if c.own) if any(c.own for c in cells) else cells[0]
    plan = GridPlan(list(cells))
    by_label = {label: arm for label, arm in arms} | {arm: arm for _, arm in arms}
    label_of = {arm: label for label, arm in arms}
    out_arms: list[tuple[str, str]] = []
    cell_arm: dict[tuple[str, str], str] = {}  # (arm, cell label) -> expanded label
    for label, arm in arms:
        exp, policy = arm.split("/", 1)
        if exp not in gridded:
            out_arms.append((label, arm))
            continue
        for cell in cells:
            expanded = f"{label} [{cell.shown}]"
            out_arms.append((expanded, f"{_cell_experiment(exp, cell)}/{policy}"))
            cell_arm[(arm, cell.label)] = expanded
        if policy == "expert" and plan.expert is None:
            plan.expert = arm
    if plan.expert is None:
        plan.expert = next((arm for _, arm in arms if arm.endswith("/expert")), None)
    out_cmp: list[tuple[str, str]] = []
    for a, b in comparisons:
        arm_a, arm_b = by_label.get(a, a), by_label.get(b, b)
        ga, gb = arm_a.split("/")[0] in gridded, arm_b.split("/")[0] in gridded
        if not (ga or gb):
            out_cmp.append((a, b))
            continue
        run = cells if ga and gb else [own]
        key = (label_of.get(arm_a, a), label_of.get(arm_b, b))
        for cell in run:
            side_a = cell_arm[(arm_a, cell.label)] if ga else a
            side_b = cell_arm[(arm_b, cell.label)] if gb else b
            out_cmp.append((side_a, side_b))
            if ga and gb:
                plan.comparisons.setdefault(key, {})[cell.label] = (
                    _arm_id(arm_a, cell),
                    _arm_id(arm_b, cell),
                )
                if not plan.baseline or key == next(iter(plan.comparisons)):
                    plan.baseline[cell.label] = _arm_id(arm_b, cell)
    return out_arms, out_cmp, plan


def _arm_id(arm: str, cell: Cell) -> str:
    exp, policy = arm.split("/", 1)
    return f"{_cell_experiment(exp, cell)}/{policy}"


def _pct(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "-"
    return f"{100 * x:+.1f}" if signed else f"{100 * x:.1f}"


def _interval(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"[{_pct(low, True)}, {_pct(high, True)}]"


def _outcomes(episodes: Sequence[Episode], arm: str) -> dict[str, list[bool]]:
    """task -> the successes of the arm's episodes (every training seed), tasks sorted."""
    hits: dict[str, list[bool]] = {}
    for e in episodes:
        if e.arm == arm:
            hits.setdefault(e.task_id, []).append(e.success)
    return dict(sorted(hits.items()))


def per_task_success(episodes: Sequence[Episode], arm: str) -> dict[str, float]:
    """Per task: mean success over the arm's episodes (every training seed)."""
    return {t: sum(v) / len(v) for t, v in _outcomes(episodes, arm).items()}


def episodes_per_task(episodes: Sequence[Episode], arm: str) -> dict[str, int]:
    """task -> how many of `arm`'s episodes it has (the n behind per_task_success)."""
    return {t: len(v) for t, v in _outcomes(episodes, arm).items()}


def capacity_rows(
    plan: GridPlan, episodes: Sequence[Episode]
) -> tuple[str, str, dict[str, dict[str, Any]], dict[str, Any]] | None:
    """(low cell, high cell, task -> capacity row, intervals) for the baseline arm, or
    None. Each row has its share's 95% interval (`share_ci`); `intervals` is
    rmsweb.report.capacity.bootstrap's, over the arms' episodes per task."""
    cells = [c for c in plan.cells if c.label in plan.baseline]
    if len(cells) < 2:
        return None
    # From the spec's own cell (the default budget) to the last; from the first where the
    # own cell is the last.
    own = next((i for i, c in enumerate(cells) if c.own), 0)
    low, high = cells[own if own < len(cells) - 1 else 0].label, cells[-1].label
    s_low = per_task_success(episodes, plan.baseline[low])
    s_high = per_task_success(episodes, plan.baseline[high])
    expert = per_task_success(episodes, plan.expert) if plan.expert else {}
    tasks = sorted(set(s_low) & set(s_high))
    if not tasks:
        return None
    rows = {t: task_row(expert.get(t, 1.0), s_low[t], s_high[t]) for t in tasks}
    ci = bootstrap(
        rows,
        episodes_per_task(episodes, plan.baseline[low]),
        episodes_per_task(episodes, plan.baseline[high]),
    )
    for t, row in rows.items():
        row["share_ci"] = ci["tasks"][t]
    return low, high, rows, ci


def _figure(plan: GridPlan, diffs: Mapping[tuple[str, str], Difference]) -> bytes:
    from matplotlib.figure import Figure as MplFigure

    fig = MplFigure(figsize=(6.5, 3.6), dpi=110, layout="constrained")
    ax = fig.subplots()
    xs_labels = [c.shown for c in plan.cells]
    for i, ((a, b), per_cell) in enumerate(plan.comparisons.items()):
        xs, ys, lo, hi = [], [], [], []
        for j, cell in enumerate(plan.cells):
            d = diffs.get(per_cell.get(cell.label, ("", "")))
            if d is None:
                continue
            low, high = (d.seed_low, d.seed_high) if d.seed_low is not None else (d.low, d.high)
            xs.append(j + (i - (len(plan.comparisons) - 1) / 2) * 0.05)
            ys.append(100 * d.diff)
            lo.append(100 * (d.diff - (low if low is not None else d.diff)))
            hi.append(100 * ((high if high is not None else d.diff) - d.diff))
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=4, label=f"{a} − {b}")
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_xticks(range(len(xs_labels)), xs_labels)
    ax.set_ylabel("difference on test (points)")
    ax.set_title("bars: 95% CI over training seeds (units where one seed)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def grid_section(rep: Any, plan: GridPlan, episodes: Sequence[Episode], axis_name: str) -> Section:
    """The comparisons per cell (module doc); reads rep.differences (arms section)."""
    sec = Section(f"The grid: comparisons against {axis_name} (test split)")
    diffs = {(d.a, d.b): d for d in getattr(rep, "differences", [])}
    if not plan.comparisons:
        sec.blocks.append(
            Para("No comparison between two arms that both have the grid's cells.", True)
        )
        return sec
    headers = [axis_name]
    for a, b in plan.comparisons:
        headers += [f"{a} − {b}", "95% CI units", "95% CI seeds"]
    rows = []
    for cell in plan.cells:
        row = [cell.shown + (" (the spec's own)" if cell.own else "")]
        for (a, b), per_cell in plan.comparisons.items():
            d = diffs.get(per_cell.get(cell.label, ("", "")))
            if d is None:
                row += ["not evaluated", "-", "-"]
                continue
            row += [
                _pct(d.diff, True),
                _interval(d.low, d.high),
                _interval(d.seed_low, d.seed_high),
            ]
            key = f"grid/{cell.label}/{a}-vs-{b}"
            rep.metrics[f"{key}/success"] = round(d.diff, 4)
            if d.seed_low is not None and d.seed_high is not None:
                rep.metrics[f"{key}/seed_ci_low"] = round(d.seed_low, 4)
                rep.metrics[f"{key}/seed_ci_high"] = round(d.seed_high, 4)
        rows.append(row)
    sec.blocks += [
        Table(headers, rows, ["left"] + ["right"] * (len(headers) - 1)),
        Para(
            "Each cell is the study run again with the grid's values (its own stages; the "
            "collection is shared). A − B in points, paired over the (task, test seed) units "
            "both arms ran, as in the arms section; a difference is shown only when both "
            "intervals exclude 0."
        ),
        Figure("grid", _figure(plan, diffs), f"Each comparison against {axis_name}"),
    ]
    cap = capacity_rows(plan, episodes)
    if cap is not None:
        low, high, rows_by_task, ci = cap
        pool = pooled(rows_by_task)
        table_rows = [
            [
                t,
                _pct(r["expert"]),
                _pct(r["sft_low"]),
                _pct(r["sft_high"]),
                _pct(r["share"]),
                interval_text(r["share_ci"]),
                r["verdict"],
            ]
            for t, r in rows_by_task.items()
        ]
        base = plan.baseline[low].split("/")[1]
        sec.blocks += [
            Table(
                [
                    "task",
                    "expert %",
                    f"{base} {low} %",
                    f"{base} {high} %",
                    "share closed %",
                    "95% interval",
                    "",
                ],
                table_rows,
                ["left", "right", "right", "right", "right", "right", "left"],
            ),
            Para(
                f"Capacity: the share of each task's expert − {base} gap at {low} that {high} "
                "closes; below half, the task is capacity-limited (more demonstrations alone "
                f"do not fix it). Pooled: {_pct(pool['data_limited_share'])}% "
                f"{interval_text(ci['data_limited_share'])} of the gap is in data-limited tasks; "
                f"{_pct(pool['closed_share'])}% {interval_text(ci['closed_share'])} of it closes. "
                f"Intervals: 95%, from {ci['draws']:,} draws of each task's true success at "
                "both budgets (Jeffreys, over its test episodes). "
                + (
                    "Expert: the report's expert arm."
                    if plan.expert
                    else "Expert: assumed 1.0 per task (no expert arm in this report)."
                )
            ),
        ]
        if pool["data_limited_share"] is not None:
            rep.metrics["grid/capacity/data_limited_share"] = round(pool["data_limited_share"], 4)
        if pool["closed_share"] is not None:
            rep.metrics["grid/capacity/closed_share"] = round(pool["closed_share"], 4)
        for key in ("data_limited_share", "closed_share"):
            if ci[key] is not None:
                rep.metrics[f"grid/capacity/{key}_ci_low"] = ci[key][0]
                rep.metrics[f"grid/capacity/{key}_ci_high"] = ci[key][1]
    return sec
