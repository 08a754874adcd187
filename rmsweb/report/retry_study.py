"""The retry study: none / blind / reflect collections side by side, each with its cost,
and the oracle's grade of the reflector next to them.

Per collect run (one arm):
- yield after attempt k: share of (task, seed) units solved at attempt k or earlier;
- kept steps / gold: the kept (shortest successful) trajectory's steps over the
  task-level reference length (the oracle's gold length where the suite has one);
- cost per unit and per kept trajectory: attempts, teacher calls (one per step plus
  one per reflection) and tokens (of steps and reflections);
- the critic's precision and recall, graded by the oracle after the fact
  (rmsweb.judge.grade has the definitions; the collect metrics compute the same).
Across runs: reflect vs blind yield per (persistence, adherence), read from each collect
run's metrics (sweep_rows), and the critic's first error per mistake kind the scripted
teacher made, the kinds no critic rule targets pooled apart (kind_rows).

`queries` is SQL over the views; `section` turns its rows into the report section.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rmsweb.report.document import Para, Section, Table
from rmsweb.report.queries import fetch
from rmsweb.report.tables import num, pct
from rmsweb.store.stats import wilson_interval

if TYPE_CHECKING:
    import duckdb

# Every query starts from `ep` (collect episodes) and `rf` (their reflections, with the
# attempt's success); with `matched`, only units (task, seed) that every collect run has,
# so arms collected on different numbers of seeds compare on the same units.
BASE = """
WITH ep AS (
    SELECT * FROM episodes WHERE stage = 'collect' {matched}
), rf AS (
    SELECT r.*, e.success FROM reflections r
    JOIN ep e ON e.run = r.run AND e.episode_id = r.episode_id
)
"""
MATCHED = """
    AND (task_id, seed) IN (
        SELECT (task_id, seed) FROM episodes WHERE stage = 'collect' AND attempt = 0
        GROUP BY task_id, seed
        HAVING count(DISTINCT run) = (
            SELECT count(DISTINCT run) FROM episodes WHERE stage = 'collect'
        )
    )
"""

ARMS = """
, ok AS (
    SELECT run, n_steps, reference_steps,
           row_number() OVER (
               PARTITION BY run, task_id, seed, policy ORDER BY n_steps, attempt
           ) AS rank
    FROM ep WHERE success
), kept AS (
    -- the kept trajectory of a unit: its shortest success (ties: the earlier attempt)
    SELECT run, count(*) AS kept,
           avg(n_steps / reference_steps) FILTER (WHERE reference_steps > 0) AS kept_over_gold
    FROM ok WHERE rank = 1 GROUP BY run
), cost AS (
    SELECT run, count(DISTINCT (task_id, seed, policy)) AS units, count(*) AS attempts,
           sum(n_steps) AS steps, sum(tokens_in + tokens_out) AS tokens
    FROM ep GROUP BY run
), refl AS (
    SELECT run, count(*) AS reflections, sum(tokens_in + tokens_out) AS tokens
    FROM rf GROUP BY run
)
SELECT cost.run, units, attempts,
       steps + coalesce(refl.reflections, 0) AS calls,
       cost.tokens + coalesce(refl.tokens, 0) AS tokens,
       coalesce(refl.reflections, 0) AS reflections,
       coalesce(kept, 0) AS kept, kept_over_gold
FROM cost LEFT JOIN kept USING (run) LEFT JOIN refl USING (run)
ORDER BY cost.run
"""

FIRST_SUCCESS = """
, u AS (
    SELECT run, min(attempt) FILTER (WHERE success) AS first_ok
    FROM ep GROUP BY run, task_id, seed, policy
)
SELECT run, first_ok, count(*) AS units FROM u GROUP BY ALL ORDER BY run, first_ok
"""

# Definitions as rmsweb.judge.grade.critic_scores (tests/report pins the agreement).
CRITIC = """
, g AS (
    SELECT run, success, named_steps AS named, oracle_bad_steps AS bad
    FROM rf WHERE oracle_bad_steps IS NOT NULL
)
SELECT run, count(*) AS graded,
       count(*) FILTER (WHERE NOT success AND len(named) > 0) AS fe_named,
       count(*) FILTER (WHERE NOT success AND len(bad) > 0) AS fe_truths,
       count(*) FILTER (
           WHERE NOT success AND len(named) > 0 AND len(bad) > 0 AND named[1] = bad[1]
       ) AS fe_hits,
       coalesce(sum(len(named)) FILTER (WHERE success), 0) AS d_named,
       coalesce(sum(len(bad)) FILTER (WHERE success), 0) AS d_truths,
       coalesce(sum(len(list_intersect(named, bad))) FILTER (WHERE success), 0) AS d_hits
FROM g GROUP BY run ORDER BY run
"""


# First error per mistake kind the teacher made in the failed attempt (reflections.
# mistake_kind; 'none': no task-breaking mistake of the teacher's), over every run.
CRITIC_BY_KIND = """
, g AS (
    SELECT coalesce(mistake_kind, 'none') AS kind, named_steps AS named,
           oracle_bad_steps AS bad
    FROM rf WHERE oracle_bad_steps IS NOT NULL AND NOT success
)
SELECT kind, count(*) AS graded,
       count(*) FILTER (WHERE len(named) > 0) AS fe_named,
       count(*) FILTER (WHERE len(bad) > 0) AS fe_truths,
       count(*) FILTER (
           WHERE len(named) > 0 AND len(bad) > 0 AND named[1] = bad[1]
       ) AS fe_hits
FROM g GROUP BY kind ORDER BY kind
"""


def queries(con: duckdb.DuckDBPyConnection) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for prefix, matched in (("retry", ""), ("retry_matched", MATCHED)):
        base = BASE.format(matched=matched)
        out[f"{prefix}_arms"] = fetch(con, base + ARMS)
        out[f"{prefix}_first_success"] = fetch(con, base + FIRST_SUCCESS)
        out[f"{prefix}_critic"] = fetch(con, base + CRITIC)
    out["retry_critic_by_kind"] = fetch(con, BASE.format(matched="") + CRITIC_BY_KIND)
    return out


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def arm_rows(data: dict[str, list[dict[str, Any]]], prefix: str = "retry") -> list[dict]:
    """One dict per collect run: yields by attempt, kept/gold, costs, critic scores."""
    critic = {c["run"]: c for c in data[f"{prefix}_critic"]}
    out = []
    for arm in data[f"{prefix}_arms"]:
        run, units = arm["run"], arm["units"]
        firsts = [f for f in data[f"{prefix}_first_success"] if f["run"] == run]
        last = max((f["first_ok"] for f in firsts if f["first_ok"] is not None), default=0)
        yields = [
            sum(f["units"] for f in firsts if f["first_ok"] is not None and f["first_ok"] <= k)
            / units
            for k in range(last + 1)
        ]
        c = critic.get(run, {})
        out.append(
            {
                "run": run,
                "units": units,
                "yields": yields,
                "kept": arm["kept"],
                "kept_over_gold": arm["kept_over_gold"],
                "attempts_per_unit": _ratio(arm["attempts"], units),
                "calls_per_unit": _ratio(arm["calls"], units),
                "tokens_per_unit": _ratio(arm["tokens"], units),
                "reflections_per_unit": _ratio(arm["reflections"], units),
                "calls_per_kept": _ratio(arm["calls"], arm["kept"]),
                "critic_graded": c.get("graded", 0),
                "first_error_precision": _ratio(c.get("fe_hits", 0), c.get("fe_named", 0)),
                "first_error_recall": _ratio(c.get("fe_hits", 0), c.get("fe_truths", 0)),
                "detour_precision": _ratio(c.get("d_hits", 0), c.get("d_named", 0)),
                "detour_recall": _ratio(c.get("d_hits", 0), c.get("d_truths", 0)),
            }
        )
    return out


METRICS = (
    "kept_over_gold",
    "attempts_per_unit",
    "calls_per_unit",
    "tokens_per_unit",
    "calls_per_kept",
    "first_error_precision",
    "first_error_recall",
    "detour_precision",
    "detour_recall",
)


def arms_table(arms: list[dict[str, Any]]) -> Table:
    depth = max(len(a["yields"]) for a in arms)
    head = ["Run", "Units", *[f"Yield ≤{k}" for k in range(depth)], "Kept steps / gold"]
    head += ["Attempts / unit", "Calls / unit", "Tokens / unit", "Calls / kept"]
    head += ["Critic: first error P", "R", "Critic: detour steps P", "R"]
    rows = []
    for a in arms:
        ys = a["yields"] + [a["yields"][-1] if a["yields"] else 0.0] * (depth - len(a["yields"]))
        # The last yield with its 95% Wilson interval over units.
        low, high = wilson_interval(round(ys[-1] * a["units"]), a["units"])
        last = f"{pct(ys[-1])} [{100 * low:.1f}, {100 * high:.1f}]"
        rows.append(
            [
                a["run"],
                str(a["units"]),
                *[pct(y) for y in ys[:-1]],
                last,
                num(a["kept_over_gold"], 3),
                num(a["attempts_per_unit"], 3),
                num(a["calls_per_unit"], 2),
                num(a["tokens_per_unit"], 0),
                num(a["calls_per_kept"], 2),
                *[pct(a[k]) for k in METRICS[-4:]],
            ]
        )
    return Table(head, rows, ["left", *["right"] * (len(head) - 1)])


def _record(metrics: dict[str, Any], arms: list[dict[str, Any]], tag: str = "") -> None:
    for a in arms:
        key = f"retry{tag}/{a['run'].removeprefix('collect/')}"
        for k, y in enumerate(a["yields"]):
            metrics[f"{key}/yield_{k}"] = y
        for name in METRICS:
            metrics[f"{key}/{name}"] = a[name]


def kind_rows(data: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per mistake kind: first-error P/R on failed attempts, whether a critic rule targets
    it, and the pooled rows of the targeted and the untargeted kinds."""
    from rmsweb.agents.mistaken_expert import UNTARGETED

    rows = data.get("retry_critic_by_kind", [])
    pools: dict[str, dict[str, int]] = {}
    out = []
    for r in rows:
        kind = r["kind"]
        group = "none" if kind == "none" else "untargeted" if kind in UNTARGETED else "targeted"
        out.append({**r, "group": group})
        if group != "none":
            pool = pools.setdefault(
                group, dict.fromkeys(("graded", "fe_named", "fe_truths", "fe_hits"), 0)
            )
            for k in pool:
                pool[k] += r[k]
    order = {"targeted": 0, "untargeted": 1, "none": 2}
    out.sort(key=lambda r: (order[r["group"]], r["kind"]))
    for group in ("targeted", "untargeted"):
        if group in pools:
            out.append({"kind": f"all {group}", "group": group, **pools[group]})
    for r in out:
        r["precision"] = _ratio(r["fe_hits"], r["fe_named"])
        r["recall"] = _ratio(r["fe_hits"], r["fe_truths"])
    return out


def kinds_table(rows: list[dict[str, Any]]) -> Table:
    head = ["Mistake kind", "A critic rule targets it", "Failed attempts graded"]
    head += ["First error P", "R"]
    body = [
        [
            r["kind"],
            {"targeted": "yes", "untargeted": "no", "none": "-"}[r["group"]],
            str(r["graded"]),
            pct(r["precision"]),
            pct(r["recall"]),
        ]
        for r in rows
    ]
    return Table(head, body, ["left", "left", "right", "right", "right"])


def sweep_rows(
    arms: list[dict[str, Any]], settings: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Reflect vs blind at each (persistence, adherence): each reflect arm beside the blind
    arm of the same persistence (blind reads no reflection: adherence does not matter)."""

    def setting(run: str) -> tuple[str | None, float | None, float | None]:
        m = settings.get(run, {})
        return m.get("retry"), m.get("teacher_persistence"), m.get("teacher_adherence")

    blind: dict[float, dict[str, Any]] = {}
    for a in arms:
        mode, p, _ = setting(a["run"])
        # the blind arm with the most units at a persistence (ties: the first run)
        if mode == "blind" and p is not None and (p not in blind or a["units"] > blind[p]["units"]):
            blind[p] = a
    out = []
    for a in arms:
        mode, p, adh = setting(a["run"])
        if mode != "reflect" or p is None:
            continue
        b = blind.get(p)
        ry = a["yields"][-1] if a["yields"] else None
        by = (b["yields"][-1] if b["yields"] else None) if b else None
        out.append(
            {
                "persistence": p,
                "adherence": adh,
                "reflect": a["run"],
                "blind": b["run"] if b else None,
                "units": a["units"],
                "reflect_yield": ry,
                "blind_yield": by,
                "gain": ry - by if ry is not None and by is not None else None,
            }
        )
    out.sort(key=lambda r: (r["persistence"], r["adherence"] or 0.0))
    return out


def sweep_table(rows: list[dict[str, Any]]) -> Table:
    head = ["Persistence", "Adherence", "Reflect run", "Blind run", "Units"]
    head += ["Reflect yield", "Blind yield", "Reflect − blind (points)"]
    body = [
        [
            num(r["persistence"], 2),
            num(r["adherence"], 2),
            r["reflect"],
            r["blind"] or "-",
            str(r["units"]),
            pct(r["reflect_yield"]),
            pct(r["blind_yield"]),
            num(100 * r["gain"], 1) if r["gain"] is not None else "-",
        ]
        for r in rows
    ]
    return Table(head, body, ["right", "right", "left", "left", *["right"] * 4])


def section(
    metrics: dict[str, Any],
    data: dict[str, list[dict[str, Any]]],
    settings: Mapping[str, Mapping[str, Any]] | None = None,
) -> Section:
    """The "Retry study" section; adds its numbers to `metrics` (retry/<run>/<name>, and
    retry_matched/<run>/<name> when the runs collected different units; retry_sweep/...
    and critic_kind/<kind>/...). `settings`: each collect run's metrics (its retry mode,
    teacher_persistence and teacher_adherence), for the sweep table."""
    sec = Section("Retry study: none / blind / reflect, with costs and the critic's grade")
    arms = arm_rows(data)
    if not arms:
        sec.blocks.append(Para("No collect runs among this report's inputs.", note=True))
        return sec
    sec.blocks.append(arms_table(arms))
    _record(metrics, arms)
    sec.blocks.append(
        Para(
            "Yield ≤k: share of (task, seed) units solved at attempt k or earlier (a run "
            "with fewer attempts keeps its last yield; the last with its 95% Wilson interval "
            "over units). Blind and reflect share the cap on "
            "attempts (1 + max_retries); none makes one attempt; the cap is not the cost, so "
            "each arm's cost is shown: attempts, teacher calls (one per step plus one per "
            "reflection) and tokens, per unit and per kept trajectory. Kept steps / gold: "
            "the kept trajectory's steps over the task-level reference length. Critic: the "
            "oracle grades each reflection after the fact (it never writes one). First "
            "error, on failed attempts: is the first step a reflection names the first step "
            "whose action the oracle rejects (P: of reflections naming a step; R: of attempts "
            "with such a step). Detour steps, on detoured successes: named steps the oracle "
            "rejects (P) and rejected steps named (R). Arms that differ only in the "
            "teacher's adherence (its chance of following a note) show how the gain of "
            "reflect over blind depends on it; at adherence 0 reflect is blind."
        )
    )
    matched = arm_rows(data, "retry_matched")
    if matched and {a["units"] for a in matched} != {a["units"] for a in arms}:
        sec.blocks.append(arms_table(matched))
        sec.blocks.append(
            Para(
                f"The same, on the {matched[0]['units']} units (task, seed) that every run "
                "collected: arms collected on fewer seeds compare on the same units here."
            )
        )
        _record(metrics, matched, "_matched")
    sweep = sweep_rows(matched or arms, settings or {})
    if sweep:
        sec.blocks.append(sweep_table(sweep))
        sec.blocks.append(
            Para(
                "Reflect vs blind by the teacher's persistence (the chance a retry replays "
                "the previous attempt's plan, its mistakes included) and adherence (the "
                "chance it follows a reflection's note): each reflect arm beside the blind "
                "arm of the same persistence, the last yield on the units every run "
                "collected. Blind retries only win on a redrawn plan, so at persistence 1 "
                "blind gains nothing over one attempt and reflect gains only through notes "
                "the teacher follows; at persistence 0 every retry is a fresh draw for both."
            )
        )
        for r in sweep:
            key = f"retry_sweep/p{r['persistence']:g}_a{(r['adherence'] or 0):g}"
            metrics[f"{key}/reflect_yield"] = r["reflect_yield"]
            metrics[f"{key}/blind_yield"] = r["blind_yield"]
            metrics[f"{key}/gain"] = r["gain"]
    kinds = kind_rows(data)
    if kinds:
        sec.blocks.append(kinds_table(kinds))
        sec.blocks.append(
            Para(
                "The critic's first error per mistake kind, over the failed attempts of "
                "every run above: the kind of task-breaking mistake the scripted teacher "
                "made in the attempt (none: it made none, the failure came from a detour or "
                "a followed note). P: the first step a reflection names is the oracle's first "
                "bad step, of reflections naming one; R: of attempts with a bad step. Kinds no "
                "critic rule was written for (rmsweb.agents.mistaken_expert.UNTARGETED) are "
                "pooled apart from the kinds it targets; nothing is tuned to raise either."
            )
        )
        for r in kinds:
            key = f"critic_kind/{r['kind'].replace(' ', '_')}"
            metrics[f"{key}/first_error_precision"] = r["precision"]
            metrics[f"{key}/first_error_recall"] = r["recall"]
    return sec
