"""A sweep's results: one row per point, ranked by the sweep's metric, with intervals.

Each point's value is read from the metrics file of the stage that holds the metric
(`eval.rl.success`: the rl policy's eval on val, per training seed; `collect.yield`:
the point's collection). Intervals, 95%:
- `ci_low`/`ci_high` over units: Wilson on the pooled count where the metric is a rate
  with a known denominator (success over n episodes, yield over task-seeds); else, with
  one metrics file, the stage's own `<key>_ci_low`/`_ci_high` (collect's steps_saved
  bootstrap); else none;
- `seed_ci_low`/`seed_ci_high` over training seeds: a t-interval of the per-seed
  values, with two or more seeds.
The best point is the one with the best mean; `ties_best` lists the points whose
intervals overlap the best's (a reader should not take a winner among them on faith).

Files (metrics/sweep/<name>.*): .json (the whole table, the sweep's definition, the
best point), .csv (one row per point, a column per axis), .png (the metric against
the first axis, one line per value of the other axes, with interval bars).
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rmsweb.report.arms import Episode, paired_difference, per_task_differences, t_interval
from rmsweb.store.stats import wilson_interval

# Rates whose denominator the same metrics file holds (for the units interval).
DENOMINATORS = {
    "success": "n",
    "yield": "tasks_x_seeds",
    "yield_first_attempt": "tasks_x_seeds",
    "failure_fraction": "tasks_x_seeds",
    "detour_fraction": "tasks_x_seeds",
}


@dataclass
class PointResult:
    point: str
    axes: dict[str, str]  # axis -> value label
    overrides: dict[str, Any]
    value: float | None = None  # mean over the seeds read
    ci_low: float | None = None
    ci_high: float | None = None
    seed_ci_low: float | None = None
    seed_ci_high: float | None = None
    n: int | None = None  # pooled units (episodes, task-seeds) where known
    seeds: dict[str, float] = field(default_factory=dict)  # role -> value
    missing: list[str] = field(default_factory=list)  # roles without the metric
    # Per task, the mean over seeds, where the metrics file breaks the metric down
    # (an eval's `per_task` success): what the capacity measure reads (report/capacity.py).
    per_task: dict[str, float] = field(default_factory=dict)
    # The paired difference against the sweep's `against` policy (pair_with_baseline).
    against: dict[str, Any] | None = None


def read_point(
    point: str,
    axes: Mapping[str, str],
    overrides: Mapping[str, Any],
    files: Mapping[str, Path],
    key: str,
) -> PointResult:
    """One point's value from its stages' metrics files (role -> file)."""
    result = PointResult(point, dict(axes), dict(overrides))
    hits = successes = 0
    counted = True
    by_task: dict[str, list[float]] = {}
    for role, file in sorted(files.items()):
        data = json.loads(file.read_text(encoding="utf-8")) if file.is_file() else {}
        value = data.get(key)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            result.missing.append(role)
            continue
        result.seeds[role] = float(value)
        per_task = data.get("per_task") if key == "success" else None
        if isinstance(per_task, dict):
            for task, rate in per_task.items():
                if isinstance(rate, (int, float)) and not isinstance(rate, bool):
                    by_task.setdefault(str(task), []).append(float(rate))
        denominator = data.get(DENOMINATORS.get(key, ""), None)
        own_ci = (data.get(f"{key}_ci_low"), data.get(f"{key}_ci_high"))
        if len(files) == 1 and all(isinstance(x, (int, float)) for x in own_ci):
            # The stage's own interval over its units (e.g. collect's steps_saved bootstrap)
            result.ci_low, result.ci_high = float(own_ci[0]), float(own_ci[1])  # type: ignore[arg-type]
            counted = False
        elif isinstance(denominator, int) and denominator > 0 and 0 <= value <= 1:
            hits += denominator
            successes += round(value * denominator)
        else:
            counted = False
    values = list(result.seeds.values())
    if not values:
        return result
    result.value = sum(values) / len(values)
    result.per_task = {t: sum(v) / len(v) for t, v in sorted(by_task.items())}
    if counted and hits:
        result.n = hits
        result.ci_low, result.ci_high = wilson_interval(successes, hits)
    result.seed_ci_low, result.seed_ci_high = t_interval(values)
    return result


EPISODES_SQL = """
SELECT task_id, seed, success AND error IS NULL AS success, n_steps
FROM read_parquet(?) WHERE stage = 'eval' AND split = ?
"""


def run_episodes(arm: str, role: str, run: Path, split: str) -> list[Episode]:
    """One eval run's episodes on `split` (its `episodes/` Parquet), as the arm statistics
    take them; the training seed is the role's `s<k>` (None for an untrained policy)."""
    import duckdb

    tail = role.rsplit("-", 1)[-1]
    train_seed = int(tail[1:]) if tail[:1] == "s" and tail[1:].isdigit() else None
    files = sorted(str(f) for f in (Path(run) / "episodes").glob("*.parquet"))
    if not files:
        return []
    with duckdb.connect() as con:
        rows = con.execute(EPISODES_SQL, [files, split]).fetchall()
    return [Episode(arm, train_seed, t, int(seed), bool(ok), int(n)) for t, seed, ok, n in rows]


def pair_with_baseline(
    result: PointResult,
    runs: Mapping[str, Path],
    baseline_runs: Mapping[str, Path],
    baseline: str,
    split: str,
) -> PointResult:
    """Set `result.against`: the point's metric policy minus `baseline` on the (task,
    episode seed) units both ran, task-weighted, training seeds paired by number, with
    the unit bootstrap and the t-interval over seeds of rmsweb.report.arms."""
    a = [e for role, run in sorted(runs.items()) for e in run_episodes("point", role, run, split)]
    b = [
        e
        for role, run in sorted(baseline_runs.items())
        for e in run_episodes(baseline, role, run, split)
    ]
    if not a or not b:
        return result
    d = paired_difference("point", baseline, a, b)
    result.against = {
        "policy": baseline,
        "diff": d.diff,
        "ci_low": d.low,
        "ci_high": d.high,
        "seed_ci_low": d.seed_low,
        "seed_ci_high": d.seed_high,
        "units": d.units,
        "per_seed": {str(seed): diff for seed, diff in d.per_seed},
        "per_task": per_task_differences(a, b),
        "verdict": d.verdict.replace("point", "this point"),
    }
    return result


def best_point(results: Sequence[PointResult], goal: str) -> PointResult | None:
    scored = [r for r in results if r.value is not None]
    if not scored:
        return None
    sign = 1 if goal == "max" else -1
    # Ties on the mean: the first in grid order (the spec's order of values).
    return max(scored, key=lambda r: sign * (r.value or 0.0))


def _interval(r: PointResult) -> tuple[float | None, float | None]:
    if r.seed_ci_low is not None:
        return r.seed_ci_low, r.seed_ci_high
    return r.ci_low, r.ci_high


def ties_with_best(results: Sequence[PointResult], best: PointResult) -> list[str]:
    """Points (other than the best) whose interval overlaps the best's."""
    lo, hi = _interval(best)
    if lo is None or hi is None:
        return []
    out = []
    for r in results:
        rlo, rhi = _interval(r)
        if r is best or rlo is None or rhi is None:
            continue
        if rlo <= hi and lo <= rhi:
            out.append(r.point)
    return out


def summarize(
    sweep: str,
    experiment: str,
    definition: Mapping[str, Any],
    results: Sequence[PointResult],
) -> dict[str, Any]:
    """The sweep's JSON: its definition, every point, the best point."""
    goal = str(definition.get("goal", "max"))
    best = best_point(results, goal)
    return {
        "sweep": sweep,
        "experiment": experiment,
        "metric": definition["metric"],
        "split": definition["split"],
        "goal": goal,
        "axes": definition["axes"],
        "base": definition.get("base", {}),
        "against": definition.get("against"),
        "points": [asdict(r) for r in results],
        "best": best.point if best else None,
        "best_value": best.value if best else None,
        "ties_best": ties_with_best(results, best) if best else [],
    }


def csv_rows(summary: Mapping[str, Any]) -> tuple[list[str], list[list[Any]]]:
    axes = list(summary["axes"])
    header = ["point", *axes, "value", "ci_low", "ci_high", "seed_ci_low", "seed_ci_high", "n"]
    paired = ("diff", "ci_low", "ci_high", "seed_ci_low", "seed_ci_high", "units")
    if summary.get("against"):
        header += [f"minus_{summary['against']}_{k}" for k in paired]

    def cell(value: Any) -> Any:
        return "" if value is None else round(value, 6)

    rows = []
    for p in summary["points"]:
        row = [
            p["point"],
            *(p["axes"].get(a, "") for a in axes),
            *(cell(p[k]) for k in ("value", "ci_low", "ci_high", "seed_ci_low", "seed_ci_high")),
            "" if p["n"] is None else p["n"],
        ]
        if summary.get("against"):
            against = p.get("against") or {}
            row += [cell(against.get(k)) for k in paired]
        rows.append(row)
    return header, rows


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if abs(value) >= 10 or value < 0 else f"{value:.4f}"


def table(summary: Mapping[str, Any]) -> str:
    """The sweep as a markdown table, best point marked (`rmsweb sweep show`)."""
    axes = list(summary["axes"])
    lines = [
        f"Sweep {summary['sweep']} of {summary['experiment']}: {summary['metric']} on "
        f"{summary['split']} ({summary['goal']}imize)",
        "",
        "| point | " + " | ".join(axes) + " | value | units 95% CI | seeds 95% CI | n | seeds |",
        "|---" * (len(axes) + 6) + "|",
    ]
    baseline = summary.get("against")
    if baseline:
        lines[2] += f" − {baseline} (paired) | units 95% CI | seeds 95% CI |"
        lines[3] += "---|" * 3
    for p in summary["points"]:
        mark = " **best**" if p["point"] == summary["best"] else ""
        units = f"[{_fmt(p['ci_low'])}, {_fmt(p['ci_high'])}]" if p["ci_low"] is not None else "-"
        seeds = (
            f"[{_fmt(p['seed_ci_low'])}, {_fmt(p['seed_ci_high'])}]"
            if p["seed_ci_low"] is not None
            else "-"
        )
        missing = f" (missing: {', '.join(p['missing'])})" if p["missing"] else ""
        lines.append(
            f"| {p['point']}{mark} | "
            + " | ".join(p["axes"].get(a, "") for a in axes)
            + f" | {_fmt(p['value'])} | {units} | {seeds} | {p['n'] or '-'} | "
            f"{len(p['seeds'])}{missing} |" + (_paired_cells(p.get("against")) if baseline else "")
        )
    if summary["best"]:
        ties = summary["ties_best"]
        lines += [
            "",
            f"Best: {summary['best']} ({_fmt(summary['best_value'])})"
            + (f"; its interval overlaps {', '.join(ties)}." if ties else "."),
        ]
    return "\n".join(lines) + "\n"


def _paired_cells(against: Mapping[str, Any] | None) -> str:
    if not against:
        return " - | - | - |"
    seeds = (
        f"[{_fmt(against['seed_ci_low'])}, {_fmt(against['seed_ci_high'])}]"
        if against["seed_ci_low"] is not None
        else "-"
    )
    return (
        f" {against['diff']:+.4f} | [{against['ci_low']:+.4f}, {against['ci_high']:+.4f}] "
        f"| {seeds} |"
    )


def figure(summary: Mapping[str, Any]) -> bytes:
    """The metric against the first axis, one line per combination of the other axes."""
    from matplotlib.figure import Figure

    axes = list(summary["axes"])
    first, rest = axes[0], axes[1:]
    lines: dict[str, list[dict[str, Any]]] = {}
    order: list[str] = []
    for p in summary["points"]:
        key = ", ".join(f"{a}={p['axes'][a]}" for a in rest) or summary["metric"]
        lines.setdefault(key, []).append(p)
        if p["axes"][first] not in order:
            order.append(p["axes"][first])
    fig = Figure(figsize=(6.5, 3.8), dpi=110, layout="constrained")
    ax = fig.subplots()
    for i, (label, points) in enumerate(lines.items()):
        xs, ys, lo, hi = [], [], [], []
        for p in points:
            if p["value"] is None:
                continue
            low, high = _interval_of(p)
            shift = (i - (len(lines) - 1) / 2) * 0.04  # overlapping bars stay apart
            xs.append(order.index(p["axes"][first]) + shift)
            ys.append(p["value"])
            lo.append(p["value"] - low if low is not None else 0.0)
            hi.append(high - p["value"] if high is not None else 0.0)
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=4, label=label)
    ax.set_xticks(range(len(order)), order)
    ax.set_xlabel(f"{first}: {', '.join(k for k in summary['axes'][first] if k != 'labels')}")
    ax.set_ylabel(f"{summary['metric']} ({summary['split']})")
    ax.set_title(f"sweep {summary['sweep']} (bars: 95% CI, seeds where >= 2, else units)")
    ax.grid(True, alpha=0.3)
    if len(lines) > 1:
        ax.legend(fontsize=8)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _interval_of(p: Mapping[str, Any]) -> tuple[float | None, float | None]:
    if p["seed_ci_low"] is not None:
        return p["seed_ci_low"], p["seed_ci_high"]
    return p["ci_low"], p["ci_high"]
