"""The report's live-benchmark section: judged accuracy per benchmark and category, what
a task costs (policy and judge tokens and dollars), and which leaderboard each number
can stand beside.

Computing is apart from rendering: `live_cells` fetches one row per (run, suite, split,
category) with SQL over the views; `summarize` rolls categories up into one line per
(run, suite, split); `live_sections` renders both and sets the metrics. Nothing here
when no input has live-suite eval episodes, so offline reports are unchanged.

Definitions:
- success is the judge's verdict stored on the episode (rmsweb.judge.live); an episode
  that ended in an environment error counts as a failure (as in the eval stage);
- a judge failure (no usable verdict after the judge client's retries: empty or
  unreadable replies, rmsweb.judge.client) also counts as a failure in Success, and is
  counted apart from a judged "failure" ("Judged failed" vs "Judge failures"): it says
  something about the judge, not the policy. "Judge retries" counts replies asked again;
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
from rmsweb.report.headline import headline_section
from rmsweb.report.queries import fetch
from rmsweb.report.tables import ci, num, pct
from rmsweb.store.stats import wilson_interval
from rmsweb.suites.factory import LIVE_SUITES

if TYPE_CHECKING:
    import duckdb

LIVE_SQL = """
WITH j AS (
    SELECT run, episode_id,
           min(protocol || ' / ' || model) AS judge,
           count(*) FILTER (WHERE inputs_hash <> '') AS calls,
           sum(tokens_in) AS tokens_in,
           sum(tokens_out) AS tokens_out,
           sum(cost_usd) AS cost_usd,
           -- the deciding row of an episode without a usable verdict: "judge_failed"
           -- (older runs stored such rows as an unparsable "failure")
           count(*) FILTER (
               WHERE verdict = 'judge_failed' OR (verdict IS NOT NULL AND NOT parse_ok)
           ) AS failed_verdicts,
           count(*) FILTER (WHERE note LIKE 'judge failure%') AS retries
    FROM judgments
    GROUP BY run, episode_id
)
SELECT e.run, e.suite, e.split, coalesce(e.category, '?') AS category,
       min(e.policy) AS policy,
       count(*) AS n,
       count(*) FILTER (WHERE e.success AND e.error IS NULL) AS successes,
       count(*) FILTER (WHERE e.error IS NOT NULL) AS env_errors,
       count(*) FILTER (
           WHERE e.error IS NULL AND NOT e.success AND coalesce(j.failed_verdicts, 0) > 0
       ) AS judge_failures,
       coalesce(sum(e.tokens_in), 0) AS policy_tokens_in,
       coalesce(sum(e.tokens_out), 0) AS policy_tokens_out,
       sum(e.cost_usd) AS policy_usd,
       coalesce(sum(j.calls), 0) AS judge_calls,
       coalesce(sum(j.tokens_in), 0) AS judge_tokens_in,
       coalesce(sum(j.tokens_out), 0) AS judge_tokens_out,
       coalesce(sum(j.cost_usd), 0) AS judge_usd,
       coalesce(sum(j.retries), 0) AS judge_retries,
       coalesce(string_agg(DISTINCT j.judge, '; ' ORDER BY j.judge), '') AS judges
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
    judge_failures: int  # no usable verdict: failures, but not judged ones
    policy_tokens_in: int
    policy_tokens_out: int
    policy_usd: float | None  # None: no episode was priced (expert, random)
    judge_calls: int
    judge_tokens_in: int
    judge_tokens_out: int
    judge_usd: float
    judge_retries: int  # replies the judge client asked again (empty or unreadable)
    judges: str  # "protocol / model" of the judge calls, "; "-separated ("" when none)
    policy: str = ""  # the evaluated policy's name (one per run)

    @property
    def label(self) -> str:
        return self.run.removeprefix("eval/")

    @property
    def success(self) -> float:
        return self.successes / self.n

    @property
    def judged_failed(self) -> int:
        """Episodes the judge found failed (not an environment error, not a judge failure)."""
        return self.n - self.successes - self.env_errors - self.judge_failures

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
            if isinstance(value, int | float) and not isinstance(value, bool):
                setattr(t, f.name, (getattr(t, f.name) or 0) + value)
        t.judges = "; ".join(sorted({*_judges(t.judges), *_judges(c.judges)}))
    return list(totals.values())


def _judges(text: str) -> list[str]:
    return [j for j in text.split("; ") if j]


# Which published numbers a live result can stand beside: the benchmark's own judge
# protocol, and the judge model the leaderboard used.
OM2W_JUDGE = "o4-mini"  # Online-Mind2Web's leaderboard judge (WebJudge backbone)


def comparable_with(suite: str, judge: str) -> str:
    """What a (suite, "protocol / model") result is comparable with, in a sentence."""
    protocol, _, model = judge.partition(" / ")
    own = {
        "webvoyager": "webvoyager",
        "online_mind2web": "webjudge",
        "webtailbench": "webtailbench",
    }
    if suite not in own:
        return f"no leaderboard: a {suite} is no published benchmark."
    if own.get(suite) != protocol:
        return f"no leaderboard: {protocol} is not {suite}'s own judge protocol."
    if suite == "webvoyager":
        return (
            f"WebVoyager results judged by its auto-evaluation (last 15 screenshots) with "
            f"{model} as the judge (He et al. used GPT-4V; microsoft/fara's webeval gpt-4o); "
            "not with results judged by another model or by humans."
        )
    if suite == "online_mind2web":
        bare = model.rsplit("/", 1)[-1].lower()
        if bare == OM2W_JUDGE or bare.startswith(OM2W_JUDGE + "-"):
            return (
                "the Online-Mind2Web leaderboard (osunlp/Online_Mind2Web_Leaderboard): "
                "WebJudge with o4-mini, as its authors recommend."
            )
        return (
            f"only results judged by WebJudge with {model}; the Online-Mind2Web "
            "leaderboard judges with o4-mini."
        )
    return (
        "stagehand's WebTailBench evals (its YES/NO screenshot evaluator, before its rubric "
        "verifier); NOT Microsoft's WebTailBench numbers (Fara-7B report), whose rubric "
        "verifier is unpublished."
    )


def _cost(x: float | None) -> str:
    return "—" if x is None else f"${x:.4f}"


def live_sections(rep: Any, cells: list[LiveCell]) -> list[Section]:
    """The "Live benchmarks" section (none without live eval episodes); sets rep.metrics."""
    if not cells:
        return []
    overall = summarize(cells)
    headline = headline_section(rep, overall, comparable_with)
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
                str(t.judged_failed),
                str(t.judge_failures),
                str(t.env_errors),
                str(t.judge_retries),
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
        rep.metrics[f"{key}/judged_failed"] = t.judged_failed
        rep.metrics[f"{key}/judge_failures"] = t.judge_failures
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
    comparable = sorted({(t.label, t.suite, judge) for t in overall for judge in _judges(t.judges)})
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
                    "Judged failed",
                    "Judge failures",
                    "Env errors",
                    "Judge retries",
                    "Policy tokens / task",
                    "Policy $ / task",
                    "Judge calls / task",
                    "Judge tokens / task",
                    "Judge $ / task",
                ],
                lines,
                ["left", "left", "left", *["right"] * 12],
            ),
            Para(
                "Success: the share of tasks the benchmark's LLM judge found accomplished "
                "(one episode per task); every other task is a failure, for one of three "
                "reasons: the judge found it failed (Judged failed), the judge gave no usable "
                "verdict after three asks (Judge failures: empty or unreadable replies, e.g. a "
                "reasoning model out of tokens; a fault of the judge, not the policy), or the "
                "browser failed (Env errors). Judge retries: replies asked again. 95% CI: "
                "Wilson. Policy $: tokens at the policy's prices in the spec (— when "
                "unpriced). Judge tokens count every call made for a task; judge $ what was "
                "spent (answers from the judge cache cost nothing)."
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
            Table(
                ["Run", "Suite", "Judge (protocol / model)", "Comparable with"],
                [
                    [run, suite, judge, comparable_with(suite, judge)]
                    for run, suite, judge in comparable
                ],
                ["left", "left", "left", "left"],
            ),
            Para(
                "Comparable with: the published numbers a result can stand beside. A live "
                "result depends on the judge as much as on the policy: the benchmark's own "
                "protocol (prompts, screenshots shown, verdict parsing; rmsweb.judge) and the "
                "judge model the leaderboard used must both match."
            ),
        ],
    )
    return [*([headline] if headline is not None else []), sec]
