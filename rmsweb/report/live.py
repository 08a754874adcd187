"""The report's live-benchmark section: judged accuracy per benchmark and category, and
what a task costs (policy and judge tokens and dollars).

Computing is apart from rendering: `live_cells` fetches one row per (run, suite, split,
category) with SQL over the views; `summarize` rolls categories up into one line per
(run, suite, split); `live_sections` renders both and sets the metrics. Nothing here
when no input has live-suite eval episodes, so offline reports are unchanged.

Definitions:
- success is the judge's verdict stored on the episode (rmsweb.judge.live); an episode
  that ended in an environment error counts as a failure (as in the eval stage), and an
  unparsable verdict is a failure too (how many: "Unparsed verdicts");
- a live task runs once (seed 0), so per episode = per task;
- policy dollars are the episodes' `cost_usd` (the policy's tokens at its spec prices);
- judge tokens count every call made for an episode; judge dollars count what was spent
  (a call answered from the cache cost nothing that time).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from rmsweb.report.document import Para, Section, Table
from rmsweb.report.queries import fetch
from rmsweb.report.tables import ci, num, pct
from rmsweb.store.stats import wilson_interval
from rmsweb.suites.factory import LIVE_SUITES

if TYPE_CHECKING:
    import duckdb

LIVE_SQL = """
WITH j AS (
    SELECT run, episode_id,
           count(*) FILTER (WHERE inputs_hash <> '') AS calls,
           sum(tokens_in) AS tokens_in,
           sum(tokens_out) AS tokens_out,
           sum(cost_usd) AS cost_usd,
           count(*) FILTER (WHERE verdict IS NOT NULL AND NOT parse_ok) AS unparsed
    FROM judgments
    GROUP BY run, episode_id
)
SELECT e.run, e.suite, e.split, coalesce(e.category, '?') AS category,
       count(*) AS n,
       count(*) FILTER (WHERE e.success AND e.error IS NULL) AS successes,
       count(*) FILTER (WHERE e.error IS NOT NULL) AS env_errors,
       coalesce(sum(e.tokens_in), 0) AS policy_tokens_in,
       coalesce(sum(e.tokens_out), 0) AS policy_tokens_out,
       sum(e.cost_usd) AS policy_usd,
       coalesce(sum(j.calls), 0) AS judge_calls,
       coalesce(sum(j.tokens_in), 0) AS judge_tokens_in,
       coalesce(sum(j.tokens_out), 0) AS judge_tokens_out,
       coalesce(sum(j.cost_usd), 0) AS judge_usd,
       coalesce(sum(j.unparsed), 0) AS judge_unparsed
FROM episodes e
LEFT JOIN j ON j.run = e.run AND j.episode_id = e.episode_id
WHERE e.stage = 'eval' AND e.suite IN ({suites})
GROUP BY ALL
ORDER BY e.run, e.suite, e.split, category
"""


@dataclass
class LiveCell:
    """Sums over the episodes of one (run, suite, split, category); category "*": all."""

    run: str
    suite: str
    split: str
    category: str
    n: int
    successes: int
    env_errors: int
    policy_tokens_in: int
    policy_tokens_out: int
    policy_usd: float | None  # None: no episode was priced (expert, random)
    judge_calls: int
    judge_tokens_in: int
    judge_tokens_out: int
    judge_usd: float
    judge_unparsed: int

    @property
    def label(self) -> str:
        return self.run.removeprefix("eval/")

    @property
    def success(self) -> float:
        return self.successes / self.n

    def per_task(self, total: float | None) -> float | None:
        return None if total is None else total / self.n


def live_cells(con: duckdb.DuckDBPyConnection) -> list[LiveCell]:
    suites = ", ".join(f"'{s}'" for s in LIVE_SUITES)
    names = {f.name for f in fields(LiveCell)}
    return [
        LiveCell(**{k: v for k, v in row.items() if k in names})
        for row in fetch(con, LIVE_SQL.format(suites=suites))
    ]


def summarize(cells: Iterable[LiveCell]) -> list[LiveCell]:
    """One "*" cell per (run, suite, split): the sums over its categories."""
    totals: dict[tuple[str, str, str], LiveCell] = {}
    for c in cells:
        key = (c.run, c.suite, c.split)
        t = totals.get(key)
        if t is None:
            totals[key] = LiveCell(**{**vars(c), "category": "*"})
            continue
        for f in fields(LiveCell):
            value = getattr(c, f.name)
            if isinstance(value, int | float) and f.name != "category":
                setattr(t, f.name, (getattr(t, f.name) or 0) + value)
    return list(totals.values())


def _cost(x: float | None) -> str:
    return "—" if x is None else f"${x:.4f}"


def live_sections(rep: Any, cells: list[LiveCell]) -> list[Section]:
    """The "Live benchmarks" section (none without live eval episodes); sets rep.metrics."""
    if not cells:
        return []
    overall = summarize(cells)
    lines = []
    for t in overall:
        lo, hi = wilson_interval(t.successes, t.n)
        lines.append(
            [
                t.label,
                t.suite,
                t.split,
                str(t.n),
                pct(t.success),
                ci(lo, hi),
                str(t.env_errors),
                str(t.judge_unparsed),
                num(t.per_task(t.policy_tokens_in + t.policy_tokens_out), 0),
                _cost(t.per_task(t.policy_usd)),
                num(t.per_task(t.judge_calls), 1),
                num(t.per_task(t.judge_tokens_in + t.judge_tokens_out), 0),
                _cost(t.per_task(t.judge_usd)),
            ]
        )
        key = f"live/{t.label}/{t.suite}/{t.split}"
        rep.metrics[f"{key}/success"] = t.success
        rep.metrics[f"{key}/n"] = t.n
        rep.metrics[f"{key}/policy_usd_per_task"] = t.per_task(t.policy_usd)
        rep.metrics[f"{key}/judge_usd_per_task"] = t.per_task(t.judge_usd)
        rep.metrics[f"{key}/judge_tokens_per_task"] = t.per_task(
            t.judge_tokens_in + t.judge_tokens_out
        )
    by_category = []
    for c in cells:
        lo, hi = wilson_interval(c.successes, c.n)
        by_category.append(
            [c.label, c.suite, c.split, c.category, str(c.n), pct(c.success), ci(lo, hi)]
        )
        rep.metrics[f"live/{c.label}/{c.suite}/{c.split}/category/{c.category}"] = c.success
    sec = Section(
        "Live benchmarks: judged accuracy and cost",
        [
            Table(
                [
                    "Run",
                    "Suite",
                    "Split",
                    "Tasks",
                    "Success",
                    "95% CI",
                    "Env errors",
                    "Unparsed verdicts",
                    "Policy tokens / task",
                    "Policy $ / task",
                    "Judge calls / task",
                    "Judge tokens / task",
                    "Judge $ / task",
                ],
                lines,
                ["left", "left", "left", *["right"] * 10],
            ),
            Para(
                "Success: the share of tasks the benchmark's LLM judge found accomplished "
                "(one episode per task); environment errors and unparsable verdicts count "
                "as failures. 95% CI: Wilson. Policy $: tokens at the policy's prices in "
                "the spec (— when unpriced). Judge tokens count every call made for a "
                "task; judge $ what was spent (answers from the judge cache cost nothing)."
            ),
            Table(
                ["Run", "Suite", "Split", "Category", "Tasks", "Success", "95% CI"],
                by_category,
                ["left", "left", "left", "left", "right", "right", "right"],
            ),
            Para(
                "Category: WebVoyager's site, Online-Mind2Web's level (easy <= 5 reference "
                "steps, medium 6-10, hard >= 11), WebTailBench's segment."
            ),
        ],
    )
    return [sec]
