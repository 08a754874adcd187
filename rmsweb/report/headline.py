"""The paper's headline table: rows the policies, columns the benchmarks (issue 43).

From the live section's per-run sums (`rmsweb.report.live.summarize`), the test split
only: one row per (experiment, policy[, training seed]), one column per benchmark, each
cell success with its 95% Wilson interval, and the judge's failures in a column of their
own (they are failures in Success, but of the judge, not the policy). Under it the
accuracy-cost view (tokens and dollars per task, policy and judge, beside success), and
the caveats each benchmark needs before its numbers stand beside published ones.

Where the numbers come from: an eval stage's run is `eval/<owner>/<variant>[/s<seed>]`.
With `eval.suites` the variant is `<suite name>-<policy>` (suite names hold no '-'), so
the column is the evaluation suite's name; otherwise the variant is the policy and the
column is the suite kind. A report that compares experiments (`report.compare`: 8B and
32B) gets every experiment's eval runs as inputs, so their rows join in one table.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from rmsweb.report.document import Para, Section, Table
from rmsweb.report.tables import ci, num, pct
from rmsweb.store.stats import wilson_interval

# The published task files' sizes: a column with fewer tasks is a subset of the benchmark.
FULL_SIZE = {"webvoyager": (595, 643), "online_mind2web": (300,), "webtailbench": (609,)}
TITLES = {
    "webvoyager": "WebVoyager",
    "online_mind2web": "Online-Mind2Web",
    "webtailbench": "WebTailBench",
    "task_pool": "task pool",
}
_BENCH_ORDER = ("webvoyager", "online_mind2web", "webtailbench", "task_pool")
_POLICY_ORDER = ("sft", "rl")


@dataclass(frozen=True)
class Row:
    """Where one run's numbers go: its row (experiment, policy, seed) and its column."""

    experiment: str
    policy: str
    seed: str  # "" when the run has no training seed
    benchmark: str  # the evaluation suite's name, or the suite kind


def placement(run: str, policy: str, kind: str) -> Row | None:
    """The row and column of an eval run (None: not an eval run)."""
    parts = run.split("/")
    if len(parts) < 3 or parts[0] != "eval":
        return None
    experiment, variant = parts[1], parts[2]
    seed = parts[3] if len(parts) > 3 and re.fullmatch(r"s\d+", parts[3]) else ""
    benchmark = kind
    if variant != policy and variant.endswith(f"-{policy}"):
        benchmark = variant[: -len(policy) - 1]
    return Row(experiment, policy, seed, benchmark)


def _natural(text: str) -> list[Any]:
    """paper-8b before paper-32b: digit runs compare as numbers."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def _rank(value: str, order: tuple[str, ...]) -> tuple[int, str]:
    return (order.index(value) if value in order else len(order), value)


@dataclass
class Placed:
    row: Row
    cell: Any  # rmsweb.report.live.LiveCell, the "*" sum of one run's test split


def place(overall: Iterable[Any]) -> list[Placed]:
    out = []
    for cell in overall:
        if cell.split != "test":
            continue  # the table is the reported number: test only (val chooses)
        row = placement(cell.run, cell.policy, cell.suite)
        if row is not None:
            out.append(Placed(row, cell))
    return out


def _label(row: Row, several_experiments: bool, several_seeds: bool) -> str:
    parts = [row.experiment] if several_experiments else []
    parts.append(row.policy + (f" ({row.seed})" if several_seeds and row.seed else ""))
    return " / ".join(parts)


def _per_task(total: float | None, n: int) -> float | None:
    return None if total is None else total / n


def _usd(x: float | None) -> str:
    return "—" if x is None else f"${x:.4f}"


def headline_section(
    rep: Any, overall: Iterable[Any], comparable_with: Callable[[str, str], str]
) -> Section | None:
    """The headline table, the accuracy-cost view and the caveats; sets rep.metrics
    under headline/<experiment>/<policy>[/<seed>]/<benchmark>/... (None: no test runs).
    `comparable_with(suite kind, "protocol / model")`: the live section's sentence."""
    placed = place(overall)
    if not placed:
        return None
    kinds: dict[str, str] = {}
    for p in placed:
        kinds.setdefault(p.row.benchmark, p.cell.suite)
    benchmarks = sorted(kinds, key=lambda b: (_rank(kinds[b], _BENCH_ORDER), b))
    rows = sorted(
        {(p.row.experiment, p.row.policy, p.row.seed) for p in placed},
        key=lambda r: (_natural(r[0]), _rank(r[1], _POLICY_ORDER), _natural(r[2])),
    )
    several_experiments = len({r[0] for r in rows}) > 1
    several_seeds = len({r[2] for r in rows}) > 1
    at = {(p.row.experiment, p.row.policy, p.row.seed, p.row.benchmark): p.cell for p in placed}

    table: list[list[str]] = []
    costs: list[list[str]] = []
    for experiment, policy, seed in rows:
        label = _label(Row(experiment, policy, seed, ""), several_experiments, several_seeds)
        line = [label]
        for b in benchmarks:
            c = at.get((experiment, policy, seed, b))
            if c is None:
                line += ["—", "—"]
                continue
            lo, hi = wilson_interval(c.successes, c.n)
            line += [f"{pct(c.success)} {ci(lo, hi)}", f"{c.judge_failures} / {c.n}"]
            key = "/".join(["headline", experiment, policy, *([seed] if seed else []), b])
            policy_usd = _per_task(c.policy_usd, c.n)
            judge_usd = c.judge_usd / c.n
            rep.metrics[f"{key}/success"] = c.success
            rep.metrics[f"{key}/ci_low"] = lo
            rep.metrics[f"{key}/ci_high"] = hi
            rep.metrics[f"{key}/n"] = c.n
            rep.metrics[f"{key}/judge_failures"] = c.judge_failures
            rep.metrics[f"{key}/usd_per_task"] = (policy_usd or 0.0) + judge_usd
            total = (policy_usd or 0.0) + judge_usd
            costs.append(
                [
                    label,
                    b,
                    str(c.n),
                    pct(c.success),
                    num((c.policy_tokens_in + c.policy_tokens_out) / c.n, 0),
                    _usd(policy_usd),
                    num((c.judge_tokens_in + c.judge_tokens_out) / c.n, 0),
                    _usd(judge_usd),
                    _usd(total if policy_usd is not None or judge_usd else None),
                    _usd(total * c.n / c.successes if c.successes else None),
                ]
            )
        table.append(line)
    headers = ["Policy"]
    for b in benchmarks:
        headers += [f"{b}: success [95% CI]", f"{b}: judge failures"]
    return Section(
        "Headline: success per benchmark",
        [
            Table(headers, table, ["left", *["right"] * (2 * len(benchmarks))]),
            Para(
                "Rows: the evaluated policies (per experiment where the report compares "
                "several, `report.compare`). Columns: the evaluation benchmarks, each whole "
                "unless its caveat says otherwise, one episode per task, judged by the "
                "benchmark's judge. Success: tasks the judge found accomplished over all "
                "tasks, with the 95% Wilson interval. Judge failures: tasks the judge gave "
                "no usable verdict for after three asks, of all tasks; they count as "
                "failures in Success (a fault of the judge, not the policy: a rerun asks "
                "again). Environment errors also count as failures (the live section)."
            ),
            Table(
                [
                    "Policy",
                    "Benchmark",
                    "Tasks",
                    "Success",
                    "Policy tokens / task",
                    "Policy $ / task",
                    "Judge tokens / task",
                    "Judge $ / task",
                    "$ / task",
                    "$ / solved task",
                ],
                costs,
                ["left", "left", *["right"] * 8],
            ),
            Para(
                "Accuracy and cost: what a task costs beside how often it is solved. Policy "
                "$: its tokens at the prices in the spec (— when unpriced, e.g. a checkpoint "
                "with no serving price); judge $: what its calls cost (answers from the judge "
                "cache cost nothing); $ / solved task: both over the solved tasks."
            ),
            *_caveats(benchmarks, kinds, placed, comparable_with),
        ],
    )


def _caveats(
    benchmarks: list[str],
    kinds: dict[str, str],
    placed: list[Placed],
    comparable_with: Callable[[str, str], str],
) -> list[Para]:
    paras = [Para("Comparability, per benchmark:")]
    for b in benchmarks:
        kind = kinds[b]
        cells = [p.cell for p in placed if p.row.benchmark == b]
        sizes = sorted({c.n for c in cells})
        judges = sorted({j for c in cells for j in c.judges.split("; ") if j})
        failures = sum(c.judge_failures for c in cells)
        env = sum(c.env_errors for c in cells)
        full = FULL_SIZE.get(kind)
        n_text = "/".join(str(n) for n in sizes)
        if full is None:
            scope = f"{n_text} tasks of a task pool: no published numbers to stand beside."
        elif max(sizes) in full and len(sizes) == 1:
            scope = f"all {n_text} tasks of its task file."
        else:
            scope = (
                f"{n_text} of the {' / '.join(map(str, full))} tasks of its task file: a "
                "subset, not comparable with full-set numbers."
            )
        comparable = "; ".join(f"{j}: {comparable_with(kind, j)}" for j in judges) or (
            "no judge calls recorded."
        )
        paras.append(
            Para(
                f"{b} ({TITLES.get(kind, kind)}): {scope} Judge: {comparable} Live sites "
                "change from month to month: a number is of its run's date. The step limit "
                "and browser are the spec's (eval.suites). "
                f"{failures} judge failure(s) and {env} environment error(s) counted as "
                "failures."
            )
        )
    return paras
