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
run's metrics, with a paired bootstrap interval over the units both collected
(sweep_rows); the steps the retries save per run (1 − kept steps over attempt 0's, on
the units attempt 0 solved), reflect − blind paired the same way (saved_rows); and per
run the critic's first error per mistake kind the scripted teacher made, the kinds no
critic rule targets pooled apart (kind_rows): precision over the reflections where a
critic rule found an error, recall over the attempts with a bad step, the reflections
where no rule did (the critic's guess at the last step) counted apart, each with its
Wilson interval. A run's reflections are its own: the identical attempt-0 reflections
of arms that share the teacher are never pooled.

`queries` is SQL over the views; `section` turns its rows into the report section.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rmsweb.judge.critic import GUESS
from rmsweb.report.arms import BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED, _percentile
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


# Per run, first error per mistake kind the teacher made in the failed attempt
# (reflections.mistake_kind; 'none': no task-breaking mistake of the teacher's). `found`:
# a critic rule found an error (not its guess at the last step, rmsweb.judge.critic).
CRITIC_BY_KIND = """
, g AS (
    SELECT run, coalesce(mistake_kind, 'none') AS kind, named_steps AS named,
           oracle_bad_steps AS bad, len(named_steps) > 0 AND NOT contains(text, '{guess}')
           AS found
    FROM rf WHERE oracle_bad_steps IS NOT NULL AND NOT success
)
SELECT run, kind, count(*) AS graded,
       count(*) FILTER (WHERE found) AS fe_named,
       count(*) FILTER (WHERE NOT found) AS no_error_found,
       count(*) FILTER (WHERE len(bad) > 0) AS fe_truths,
       count(*) FILTER (WHERE found AND len(bad) > 0 AND named[1] = bad[1]) AS fe_hits,
       count(*) FILTER (
           WHERE NOT found AND len(named) > 0 AND len(bad) > 0 AND named[1] = bad[1]
       ) AS guess_hits
FROM g GROUP BY run, kind ORDER BY run, kind
""".replace("{guess}", GUESS.replace("'", "''"))

# Per run and unit: solved at all, attempt 0's steps when it succeeded, the kept steps.
UNITS = """
SELECT run, task_id, seed, bool_or(success) AS solved,
       min(n_steps) FILTER (WHERE success AND attempt = 0) AS first_steps,
       min(n_steps) FILTER (WHERE success) AS kept_steps
FROM ep GROUP BY run, task_id, seed, policy ORDER BY run, task_id, seed
"""


def queries(con: duckdb.DuckDBPyConnection) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for prefix, matched in (("retry", ""), ("retry_matched", MATCHED)):
        base = BASE.format(matched=matched)
        out[f"{prefix}_arms"] = fetch(con, base + ARMS)
        out[f"{prefix}_first_success"] = fetch(con, base + FIRST_SUCCESS)
        out[f"{prefix}_critic"] = fetch(con, base + CRITIC)
        out[f"{prefix}_units"] = fetch(con, base + UNITS)
    out["retry_critic_by_kind"] = fetch(con, BASE.format(matched="") + CRITIC_BY_KIND)
    return out


def _bootstrap(
    n: int, stat: Any, samples: int = BOOTSTRAP_SAMPLES
) -> tuple[float | None, float | None]:
    """95% percentile interval of `stat(indices)` over resampled indices 0..n-1."""
    if n == 0:
        return None, None
    rng = random.Random(BOOTSTRAP_SEED)
    boots = [stat(rng.choices(range(n), k=n)) for _ in range(samples)]
    return _percentile(boots, 0.025), _percentile(boots, 0.975)


def _units_of(data: Mapping[str, list[dict[str, Any]]], prefix: str) -> dict[str, dict]:
    """run -> (task, seed) -> that unit's row of UNITS."""
    out: dict[str, dict] = {}
    for u in data.get(f"{prefix}_units", []):
        out.setdefault(u["run"], {})[(u["task_id"], u["seed"])] = u
    return out


def paired_yield(a: Mapping[tuple, dict], b: Mapping[tuple, dict]) -> dict[str, Any]:
    """Yield of run a − run b on the units both collected, with a paired bootstrap."""
    shared = sorted(set(a) & set(b))
    diffs = [float(a[u]["solved"]) - float(b[u]["solved"]) for u in shared]
    low, high = _bootstrap(len(diffs), lambda ix: sum(diffs[i] for i in ix) / len(ix))
    diff = sum(diffs) / len(diffs) if diffs else None
    return {"units": len(shared), "diff": diff, "low": low, "high": high}


def _saved(pairs: Sequence[tuple[int, int]]) -> float | None:
    first = sum(p[0] for p in pairs)
    return 1 - sum(p[1] for p in pairs) / first if first else None


def steps_saved(units: Mapping[tuple, dict]) -> dict[str, Any]:
    """1 − kept steps over attempt 0's on the units attempt 0 solved (as the collect
    metrics' steps_saved), with a bootstrap interval over those units."""
    pairs = [(u["first_steps"], u["kept_steps"]) for u in units.values() if u["first_steps"]]
    low, high = _bootstrap(len(pairs), lambda ix: _saved([pairs[i] for i in ix]) or 0.0)
    first = sum(p[0] for p in pairs) / len(pairs) if pairs else None
    kept = sum(p[1] for p in pairs) / len(pairs) if pairs else None
    return {
        "units": len(pairs),
        "first_steps": first,
        "kept_steps": kept,
        "saved": _saved(pairs),
        "low": low,
        "high": high,
    }


def paired_saved(a: Mapping[tuple, dict], b: Mapping[tuple, dict]) -> dict[str, Any]:
    """Steps saved by run a − by run b on the units whose attempt 0 both solved."""
    shared = sorted(u for u in set(a) & set(b) if a[u]["first_steps"] and b[u]["first_steps"])
    pa = [(a[u]["first_steps"], a[u]["kept_steps"]) for u in shared]
    pb = [(b[u]["first_steps"], b[u]["kept_steps"]) for u in shared]

    def diff(ix: Sequence[int]) -> float:
        return (_saved([pa[i] for i in ix]) or 0.0) - (_saved([pb[i] for i in ix]) or 0.0)

    low, high = _bootstrap(len(shared), diff)
    return {
        "units": len(shared),
        "diff": diff(range(len(shared))) if shared else None,
        "low": low,
        "high": high,
    }


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


COUNTS = ("graded", "fe_named", "no_error_found", "fe_truths", "fe_hits", "guess_hits")


def kind_rows(data: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per run and mistake kind: first-error precision and recall on failed attempts, each
    with its Wilson interval, whether a critic rule targets the kind, and per run the
    pooled rows of the targeted and the untargeted kinds. Runs are never pooled."""
    from rmsweb.agents.mistaken_expert import UNTARGETED

    order = {"targeted": 0, "untargeted": 1, "none": 2}
    by_run: dict[str, list[dict[str, Any]]] = {}
    for r in data.get("retry_critic_by_kind", []):
        kind = r["kind"]
        group = "none" if kind == "none" else "untargeted" if kind in UNTARGETED else "targeted"
        by_run.setdefault(r["run"], []).append({**r, "group": group})
    out = []
    for run in sorted(by_run):
        rows = sorted(by_run[run], key=lambda r: (order[r["group"]], r["kind"]))
        for group in ("targeted", "untargeted"):
            members = [r for r in rows if r["group"] == group]
            if members:
                pool = {k: sum(r[k] for r in members) for k in COUNTS}
                rows.append({"run": run, "kind": f"all {group}", "group": group, **pool})
        out += rows
    for r in out:
        r["precision"] = _ratio(r["fe_hits"], r["fe_named"])
        r["recall"] = _ratio(r["fe_hits"], r["fe_truths"])
        r["precision_ci"] = wilson_interval(r["fe_hits"], r["fe_named"])
        r["recall_ci"] = wilson_interval(r["fe_hits"], r["fe_truths"])
    return out


def never_made(rows: list[dict[str, Any]]) -> list[str]:
    """Mistake kinds of the scripted teacher that no run's failed attempt shows (no row)."""
    from rmsweb.agents.mistaken_expert import ERROR_KINDS

    return sorted(set(ERROR_KINDS) - {r["kind"] for r in rows})


def _with_ci(value: float | None, ci: tuple[float, float], den: int) -> str:
    if value is None or not den:
        return "-"
    return f"{pct(value)} [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def kinds_table(rows: list[dict[str, Any]]) -> Table:
    head = ["Run", "Mistake kind", "A critic rule targets it", "Failed attempts graded"]
    head += ["Error found (named)", "No error found", "Guessed right", "With a bad step"]
    head += ["First error P [95% CI]", "R [95% CI]"]
    body = [
        [
            r["run"].removeprefix("collect/"),
            r["kind"],
            {"targeted": "yes", "untargeted": "no", "none": "-"}[r["group"]],
            str(r["graded"]),
            str(r["fe_named"]),
            str(r["no_error_found"]),
            str(r["guess_hits"]),
            str(r["fe_truths"]),
            _with_ci(r["precision"], r["precision_ci"], r["fe_named"]),
            _with_ci(r["recall"], r["recall_ci"], r["fe_truths"]),
        ]
        for r in rows
    ]
    return Table(head, body, ["left", "left", "left", *["right"] * 7])


def _setting(settings: Mapping[str, Mapping[str, Any]], run: str) -> tuple:
    """(retry mode, persistence, adherence, habit rate) of a collect run (its metrics); a
    run from before habits has none (rate 0)."""
    m = settings.get(run, {})
    rate = m.get("teacher_habit_rate", 0.0 if m else None)
    return m.get("retry"), m.get("teacher_persistence"), m.get("teacher_adherence"), rate


def _blind_arms(
    arms: list[dict[str, Any]], settings: Mapping[str, Mapping[str, Any]]
) -> dict[tuple, dict[str, Any]]:
    """(persistence, habit rate) -> the blind arm with the most units there (ties: the
    first run). Blind reads no reflection: adherence does not matter to it."""
    blind: dict[tuple, dict[str, Any]] = {}
    for a in arms:
        mode, p, _, rate = _setting(settings, a["run"])
        key = (p, rate)
        if (
            mode == "blind"
            and p is not None
            and (key not in blind or a["units"] > blind[key]["units"])
        ):
            blind[key] = a
    return blind


def sweep_rows(
    arms: list[dict[str, Any]],
    settings: Mapping[str, Mapping[str, Any]],
    units: Mapping[str, Mapping[tuple, dict]] | None = None,
) -> list[dict[str, Any]]:
    """Reflect vs blind at each (persistence, adherence, habit rate): each reflect arm
    beside the blind arm of the same persistence and habit rate, and with `units` (run ->
    unit -> row of UNITS) the paired difference of their yields on the units both
    collected, with a bootstrap interval over those units."""
    blind = _blind_arms(arms, settings)
    units = units or {}
    out = []
    for a in arms:
        mode, p, adh, rate = _setting(settings, a["run"])
        if mode != "reflect" or p is None:
            continue
        b = blind.get((p, rate))
        ry = a["yields"][-1] if a["yields"] else None
        by = (b["yields"][-1] if b["yields"] else None) if b else None
        paired = {"units": 0, "diff": None, "low": None, "high": None}
        if b is not None and a["run"] in units and b["run"] in units:
            paired = paired_yield(units[a["run"]], units[b["run"]])
        out.append(
            {
                "persistence": p,
                "adherence": adh,
                "habit_rate": rate,
                "reflect": a["run"],
                "blind": b["run"] if b else None,
                "units": a["units"],
                "reflect_yield": ry,
                "blind_yield": by,
                "gain": ry - by if ry is not None and by is not None else None,
                "paired_units": paired["units"],
                "gain_low": paired["low"],
                "gain_high": paired["high"],
            }
        )
    out.sort(key=lambda r: (r["habit_rate"] or 0.0, r["persistence"], r["adherence"] or 0.0))
    return out


def saved_rows(
    arms: list[dict[str, Any]],
    settings: Mapping[str, Mapping[str, Any]],
    units: Mapping[str, Mapping[tuple, dict]],
) -> list[dict[str, Any]]:
    """Per run: the steps its retries saved (steps_saved) and, for a reflect run, reflect −
    blind against the blind run of the same persistence and habit rate (paired_saved)."""
    blind = _blind_arms(arms, settings)
    out = []
    for a in arms:
        run = a["run"]
        if run not in units:
            continue
        mode, p, adh, rate = _setting(settings, run)
        b = blind.get((p, rate)) if mode == "reflect" else None
        vs = paired_saved(units[run], units[b["run"]]) if b and b["run"] in units else None
        out.append(
            {
                "run": run,
                "retry": mode,
                "habit_rate": rate,
                "adherence": adh,
                "persistence": p,
                **{f"saved_{k}": v for k, v in steps_saved(units[run]).items()},
                "blind": b["run"] if b else None,
                "vs_blind": vs["diff"] if vs else None,
                "vs_blind_low": vs["low"] if vs else None,
                "vs_blind_high": vs["high"] if vs else None,
                "vs_blind_units": vs["units"] if vs else 0,
            }
        )
    key = {"none": 0, "blind": 1, "reflect": 2}
    out.sort(
        key=lambda r: (r["habit_rate"] or 0.0, key.get(r["retry"] or "", 3), -(r["adherence"] or 0))
    )
    return out


def _points(x: float | None, low: float | None, high: float | None) -> str:
    if x is None:
        return "-"
    if low is None or high is None:
        return f"{100 * x:+.1f}"
    return f"{100 * x:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]"


def saved_table(rows: list[dict[str, Any]]) -> Table:
    head = ["Run", "Retry", "Habit rate", "Adherence", "Persistence", "Units (attempt 0 solved)"]
    head += ["Steps, attempt 0", "Steps, kept", "Steps saved % [95% CI]", "Blind run"]
    head += ["Reflect − blind (points) [95% CI]"]
    body = [
        [
            r["run"].removeprefix("collect/"),
            r["retry"] or "-",
            num(r["habit_rate"], 2),
            num(r["adherence"], 2),
            num(r["persistence"], 2),
            str(r["saved_units"]),
            num(r["saved_first_steps"], 2),
            num(r["saved_kept_steps"], 2),
            _points(r["saved_saved"], r["saved_low"], r["saved_high"]),
            (r["blind"] or "-").removeprefix("collect/"),
            _points(r["vs_blind"], r["vs_blind_low"], r["vs_blind_high"]),
        ]
        for r in rows
    ]
    return Table(head, body, ["left", "left", *["right"] * 7, "left", "right"])


def sweep_table(rows: list[dict[str, Any]]) -> Table:
    head = ["Habit rate", "Persistence", "Adherence", "Reflect run", "Blind run", "Units"]
    head += ["Reflect yield", "Blind yield", "Reflect − blind (points)", "Paired 95% CI"]
    body = [
        [
            num(r["habit_rate"], 2),
            num(r["persistence"], 2),
            num(r["adherence"], 2),
            r["reflect"],
            r["blind"] or "-",
            str(r["units"]),
            pct(r["reflect_yield"]),
            pct(r["blind_yield"]),
            num(100 * r["gain"], 1) if r["gain"] is not None else "-",
            "-"
            if r["gain_low"] is None
            else f"[{100 * r['gain_low']:+.1f}, {100 * r['gain_high']:+.1f}]",
        ]
        for r in rows
    ]
    return Table(head, body, ["right", "right", "right", "left", "left", *["right"] * 5])


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
    prefix = "retry_matched" if matched else "retry"
    units = _units_of(data, prefix)
    sweep = sweep_rows(matched or arms, settings or {}, units)
    if sweep:
        sec.blocks.append(sweep_table(sweep))
        sec.blocks.append(
            Para(
                "Reflect vs blind by the teacher's persistence (the chance a retry replays "
                "the previous attempt's plan, its mistakes included), adherence (the "
                "chance it follows a reflection's note) and habit rate: each reflect arm "
                "beside the blind arm of the same persistence and habit rate, the last "
                "yield on the units every run collected; the paired 95% CI is a bootstrap "
                "over the units both arms collected, of the difference of their outcomes. "
                "Blind retries only win on a redrawn plan, so at persistence 1 "
                "blind gains nothing over one attempt and reflect gains only through notes "
                "the teacher follows; at persistence 0 every retry is a fresh draw for both."
            )
        )
        for r in sweep:
            key = f"retry_sweep/p{r['persistence']:g}_a{(r['adherence'] or 0):g}"
            if r["habit_rate"]:
                key += f"_h{r['habit_rate']:g}"
            metrics[f"{key}/reflect_yield"] = r["reflect_yield"]
            metrics[f"{key}/blind_yield"] = r["blind_yield"]
            metrics[f"{key}/gain"] = r["gain"]
            metrics[f"{key}/gain_ci_low"] = r["gain_low"]
            metrics[f"{key}/gain_ci_high"] = r["gain_high"]
    saved = saved_rows(matched or arms, settings or {}, units)
    if any(r["saved_units"] for r in saved):
        sec.blocks.append(saved_table(saved))
        sec.blocks.append(
            Para(
                "Steps saved: on the units (task, seed) whose attempt 0 succeeded, 1 − the "
                "kept trajectories' steps over attempt 0's (attempt 0 is what plain "
                "collection keeps, the same attempt in every retry mode), with a bootstrap "
                "interval over those units; reflect − blind: the difference on the units "
                "both arms' attempt 0 solved, paired. The scripted teacher's habits "
                "(collect.teacher.habits) are wasted steps it takes in the same states every "
                "time; a blind retry repeats them and only a followed reflection drops them. "
                "The size of these savings is the simulator's: it follows from the habit "
                "rate, detour rate and adherence the spec sets, not from a measured LLM "
                "teacher; at habit rate 0 or adherence 0 reflect saves what blind saves."
            )
        )
        for r in saved:
            key = f"retry_saved/{r['run'].removeprefix('collect/')}"
            metrics[f"{key}/steps_saved"] = r["saved_saved"]
            metrics[f"{key}/ci_low"] = r["saved_low"]
            metrics[f"{key}/ci_high"] = r["saved_high"]
            metrics[f"{key}/units"] = r["saved_units"]
            if r["blind"]:
                metrics[f"{key}/minus_blind"] = r["vs_blind"]
                metrics[f"{key}/minus_blind_ci_low"] = r["vs_blind_low"]
                metrics[f"{key}/minus_blind_ci_high"] = r["vs_blind_high"]
    kinds = kind_rows(data)
    if kinds:
        sec.blocks.append(kinds_table(kinds))
        missing = never_made(kinds)
        sec.blocks.append(
            Para(
                "The critic's first error per run and mistake kind, over the failed "
                "attempts of that run (runs that share the teacher reflect on the same "
                "attempt 0: each run's reflections count in its own rows only): the kind of "
                "task-breaking mistake the scripted teacher made in the attempt (none: it "
                "made none, the failure came from a detour or a followed note). Error "
                "found: a critic rule named a step as the error; no error found: none did, "
                "and the critic named the last step as a guess (guessed right: that step "
                "was the oracle's first bad step). P: the step a rule found is the "
                "oracle's first bad step, of the reflections where a rule found one; R: "
                "of the attempts with a bad step (guesses never count as found). 95% "
                "Wilson intervals. Kinds no critic rule was written for "
                "(rmsweb.agents.mistaken_expert.UNTARGETED) are pooled apart from the "
                "kinds it targets; nothing is tuned to raise either."
                + (
                    f" Kinds the teacher never made in these runs (no rows): {', '.join(missing)}."
                    if missing
                    else ""
                )
            )
        )
        for r in kinds:
            run = r["run"].removeprefix("collect/")
            key = f"critic_kind/{run}/{r['kind'].replace(' ', '_')}"
            metrics[f"{key}/first_error_precision"] = r["precision"]
            metrics[f"{key}/first_error_recall"] = r["recall"]
            metrics[f"{key}/no_error_found"] = r["no_error_found"]
            metrics[f"{key}/graded"] = r["graded"]
    return sec
