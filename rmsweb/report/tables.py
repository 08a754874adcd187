"""Eval results as typed rows and README-ready tables; the API the eval stage shares.

rows = eval_rows_for_run(out_dir, run="eval/miniwob-cpu/sft")  # eval stage
print(eval_table(rows).to_markdown())                          # README table
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmsweb.report.document import Table
from rmsweb.report.queries import eval_by_task
from rmsweb.store.rows import EvalRow
from rmsweb.store.stats import wilson_interval

if TYPE_CHECKING:
    import duckdb

SUITE_LEVEL = "*"  # EvalRow.task_id of the row that sums a suite's tasks
# The split whose numbers head the report (per-task table, figure, flat metrics) and that
# the trajectory viewer shows by default: test where it was evaluated.
REPORT_SPLITS = ("test", "val", "train")


def _row(key: dict[str, Any], agg: dict[str, float], task_id: str, rate: float) -> EvalRow:
    n, k = int(agg["n"]), int(agg["successes"])
    low, high = wilson_interval(k, n)
    return EvalRow(
        run=key["run"],
        policy=key["policy"],
        suite=key["suite"],
        split=key["split"],
        n=n,
        success_rate=rate,
        ci_low=low,
        ci_high=high,
        mean_steps_solved=agg["solved_steps"] / k if k else None,
        parse_error_rate=agg["parse_errors"] / agg["steps"] if agg["steps"] else 0.0,
        wall_s=float(agg["wall_s"]),
        task_id=task_id,
        env_errors=int(agg["env_errors"]),
        policy_errors=int(agg["policy_errors"]),
    )


SUMS = (
    "n",
    "successes",
    "env_errors",
    "policy_errors",
    "solved_steps",
    "steps",
    "parse_errors",
    "wall_s",
)


def eval_rows(con: duckdb.DuckDBPyConnection, *, stage: str | None = "eval") -> list[EvalRow]:
    """EvalRows from the episodes and steps views: per suite (task_id "*") then per task.

    `stage=None` takes every run in the views. Definitions as the eval stage's
    (rmsweb/evaluate/metrics.py): see `eval_rows_from`.
    """
    return eval_rows_from(eval_by_task(con, stage=stage))


def eval_rows_from(by_task: list[dict[str, Any]]) -> list[EvalRow]:
    """EvalRows from the rows of `queries.eval_by_task` (when the caller already has them).

    A task's success rate is its share of successful episodes. The suite row's
    rate is the mean over tasks (each task weighs the same, as in the eval
    stage); its CI is the Wilson interval of the pooled counts, and its other
    columns pool the task rows' counts. With equal seeds per task, mean over
    tasks and pooled rate coincide.
    """
    suites: dict[tuple, dict[str, float]] = {}
    rates: dict[tuple, list[float]] = {}
    keys: dict[tuple, dict[str, Any]] = {}
    task_rows = []
    for r in by_task:
        key = (r["run"], r["policy"], r["suite"], r["split"])
        keys[key] = r
        total = suites.setdefault(key, dict.fromkeys(SUMS, 0.0))
        for s in SUMS:
            total[s] += r[s]
        rate = r["successes"] / r["n"] if r["n"] else math.nan
        rates.setdefault(key, []).append(rate)
        task_rows.append(_row(r, r, r["task_id"], rate))
    rows = [
        _row(keys[k], total, SUITE_LEVEL, sum(rates[k]) / len(rates[k]))
        for k, total in suites.items()
    ]
    return rows + task_rows


def eval_rows_for_run(run_dir: Path, run: str | None = None) -> list[EvalRow]:
    """EvalRows of one run folder (what the eval stage writes to its evals table)."""
    from rmsweb.store.layout import run_name
    from rmsweb.store.views import connect

    con = connect({run or run_name(run_dir): Path(run_dir)})
    try:
        return eval_rows(con, stage=None)
    finally:
        con.close()


# --------------------------------------------------------------------------- formatting


def pct(x: float | None, digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{100 * x:.{digits}f}%"


def ci(low: float, high: float) -> str:
    return f"[{100 * low:.1f}, {100 * high:.1f}]"


def num(x: float | None, digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:.{digits}f}"


def suite_rows(rows: Sequence[EvalRow]) -> list[EvalRow]:
    return [r for r in rows if r.task_id == SUITE_LEVEL]


def eval_table(rows: Sequence[EvalRow]) -> Table:
    """The results table: one line per policy and suite, success with its 95% Wilson CI."""
    return Table(
        headers=[
            "Policy",
            "Suite",
            "Split",
            "n",
            "Success",
            "95% CI",
            "Steps (solved)",
            "Parse errors",
            "Env errors",
            "Policy errors",
        ],
        rows=[
            [
                r.policy,
                r.suite,
                r.split,
                str(r.n),
                pct(r.success_rate),
                ci(r.ci_low, r.ci_high),
                num(r.mean_steps_solved),
                pct(r.parse_error_rate),
                str(r.env_errors),
                str(r.policy_errors),
            ]
            for r in suite_rows(rows)
        ],
        align=["left"] * 3 + ["right"] * 7,
    )


def per_task_table(
    rows: Sequence[EvalRow], href: Callable[[str, str], str | None] | None = None
) -> Table:
    """Task x policy success rates, "83.3% (6)" with n in brackets. `href(run, task)`: the
    link of a cell (in HTML), e.g. that run's viewer filtered to the task."""
    policies = list(dict.fromkeys(r.policy for r in suite_rows(rows)))
    cells: dict[tuple[str, str], EvalRow] = {}
    for r in rows:
        if r.task_id != SUITE_LEVEL:
            cells[(r.task_id, r.policy)] = r
    tasks = sorted({t for t, _ in cells})
    body = []
    links: dict[tuple[int, int], str] = {}
    for i, task in enumerate(tasks):
        line = [task]
        for j, p in enumerate(policies, start=1):
            r = cells.get((task, p))
            line.append(f"{pct(r.success_rate)} ({r.n})" if r else "—")
            if r and href and (link := href(r.run, task)):
                links[(i, j)] = link
        body.append(line)
    return Table(["Task", *policies], body, ["left", *["right"] * len(policies)], links)


def metric_key(name: str, row: EvalRow, several_suites: bool) -> str:
    return f"{name}/{row.policy}/{row.suite}" if several_suites else f"{name}/{row.policy}"


def eval_metrics(rows: Sequence[EvalRow]) -> dict[str, float | int | None]:
    """Flat metrics (`success/<policy>`, ...) so `dvc exp show` gets one column each."""
    top = suite_rows(rows)
    several = len({r.suite for r in top}) > 1
    out: dict[str, float | int | None] = {}
    for r in top:
        out[metric_key("success", r, several)] = r.success_rate
        out[metric_key("ci_low", r, several)] = r.ci_low
        out[metric_key("ci_high", r, several)] = r.ci_high
        out[metric_key("n", r, several)] = r.n
        out[metric_key("steps_solved", r, several)] = r.mean_steps_solved
        out[metric_key("parse_errors", r, several)] = r.parse_error_rate
    return out
