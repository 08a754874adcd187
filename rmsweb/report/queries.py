"""The report's aggregations, as DuckDB SQL over the run-table views (store/views.py).

Each function takes a connection with the views and returns plain dicts, one
per result row. Everything heavy (1M+ steps) happens here in SQL; Python only
shapes the few resulting rows. benchmarks/report_scale.py times `run_all`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb


def fetch(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


# The definitions follow the eval stage's (rmsweb/evaluate/metrics.py), so the report
# and `dvc metrics` agree: an episode that still ended in an environment error after
# its retries, or that a policy exception ended, counts in n as a failure (env_errors
# and policy_errors say how many there were), and parse errors are over every stored
# step. tests/report pins the agreement.
EVAL_BY_TASK = """
WITH s AS (
    SELECT run, episode_id,
           count(*) AS steps,
           count(*) FILTER (WHERE NOT parse_ok) AS parse_errors
    FROM steps WHERE {where}
    GROUP BY run, episode_id
)
SELECT e.run, e.policy, e.suite, e.split, e.task_id,
       count(*) AS n,
       count(*) FILTER (WHERE e.success) AS successes,
       count(*) FILTER (WHERE e.error IS NOT NULL) AS env_errors,
       count(*) FILTER (WHERE e.policy_error IS NOT NULL) AS policy_errors,
       coalesce(sum(e.n_steps) FILTER (WHERE e.success), 0) AS solved_steps,
       coalesce(sum(s.steps), 0) AS steps,
       coalesce(sum(s.parse_errors), 0) AS parse_errors,
       coalesce(sum(e.wall_s), 0) AS wall_s
FROM episodes e
LEFT JOIN s ON s.run = e.run AND s.episode_id = e.episode_id
WHERE {where_e}
GROUP BY ALL
ORDER BY e.run, e.policy, e.suite, e.split, e.task_id
"""


def eval_by_task(
    con: duckdb.DuckDBPyConnection, *, stage: str | None = "eval"
) -> list[dict[str, Any]]:
    """Per (run, policy, suite, split, task) of one stage's runs (None: all runs): counts and
    sums that roll up exactly."""
    if stage is None:
        where = where_e = "true"
    else:
        lit = "'" + stage.replace("'", "''") + "'"
        where, where_e = f"stage = {lit}", f"e.stage = {lit}"
    return fetch(con, EVAL_BY_TASK.format(where=where, where_e=where_e))


def collect_attempts(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Per collect run and attempt index: attempts made and successes."""
    return fetch(
        con,
        """
        SELECT run, attempt,
               count(*) AS attempts,
               count(*) FILTER (WHERE success) AS successes
        FROM episodes WHERE stage = 'collect'
        GROUP BY run, attempt ORDER BY run, attempt
        """,
    )


def collect_first_success(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Per collect run: how many (task, seed) units first succeeded at each attempt (NULL: never)."""
    return fetch(
        con,
        """
        WITH u AS (
            SELECT run, task_id, seed, policy,
                   min(attempt) FILTER (WHERE success) AS first_ok
            FROM episodes WHERE stage = 'collect'
            GROUP BY run, task_id, seed, policy
        )
        SELECT run, first_ok, count(*) AS units
        FROM u GROUP BY run, first_ok ORDER BY run, first_ok NULLS LAST
        """,
    )


# The kept trajectory of a unit is its shortest successful attempt (ties: the earlier one).
KEPT = """
WITH ok AS (
    SELECT run, task_id, seed, policy, attempt, n_steps, reference_steps,
           row_number() OVER (
               PARTITION BY run, task_id, seed, policy ORDER BY n_steps, attempt
           ) AS rank
    FROM episodes
    WHERE stage = 'collect' AND success
)
"""


def collect_kept(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Per collect run: kept trajectories, their steps, and what collection cost."""
    return fetch(
        con,
        KEPT
        + """
        , kept AS (
            SELECT run, count(*) AS kept,
                   avg(n_steps) AS kept_steps_mean,
                   median(n_steps) AS kept_steps_median,
                   avg(attempt) AS kept_attempt_mean,
                   avg(n_steps / reference_steps)
                       FILTER (WHERE reference_steps > 0) AS kept_over_gold
            FROM ok WHERE rank = 1 GROUP BY run
        ), detours AS (
            -- successes longer than the oracle's gold length took a detour
            SELECT run, avg((n_steps > reference_steps)::DOUBLE) AS detour_fraction
            FROM ok WHERE reference_steps > 0 GROUP BY run
        ), first AS (
            SELECT run, avg(n_steps) AS attempt0_steps_mean
            FROM ok WHERE attempt = 0 GROUP BY run
        ), cost AS (
            SELECT run, count(*) AS episodes,
                   count(DISTINCT (task_id, seed, policy)) AS units,
                   sum(tokens_in) AS tokens_in, sum(tokens_out) AS tokens_out,
                   sum(wall_s) AS wall_s, sum(n_steps) AS teacher_calls
            FROM episodes WHERE stage = 'collect' GROUP BY run
        ), refl AS (
            -- a reflection is a teacher call too (the rule critic stands in for one)
            SELECT run, count(*) AS reflections,
                   sum(tokens_in) AS r_in, sum(tokens_out) AS r_out
            FROM reflections WHERE stage = 'collect' GROUP BY run
        )
        SELECT cost.run, units, episodes,
               coalesce(kept, 0) AS kept, kept_steps_mean, kept_steps_median,
               kept_attempt_mean, attempt0_steps_mean,
               tokens_in + coalesce(r_in, 0) AS tokens_in,
               tokens_out + coalesce(r_out, 0) AS tokens_out, wall_s,
               teacher_calls + coalesce(reflections, 0) AS teacher_calls,
               kept_over_gold, detour_fraction
        FROM cost
        LEFT JOIN kept USING (run)
        LEFT JOIN first USING (run)
        LEFT JOIN detours USING (run)
        LEFT JOIN refl USING (run)
        ORDER BY cost.run
        """,
    )


def collect_kept_steps(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Per collect run: histogram of the kept trajectories' step counts."""
    return fetch(
        con,
        KEPT
        + """
        SELECT run, n_steps, count(*) AS kept
        FROM ok WHERE rank = 1
        GROUP BY run, n_steps ORDER BY run, n_steps
        """,
    )


def rl_curve(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Per rl run and optimizer step: rewards, gate acceptance and losses."""
    return fetch(
        con,
        """
        SELECT run, rl_step AS step,
               count(*) AS groups,
               avg(mean) AS reward_mean,
               avg(std) AS reward_std,
               count(*) FILTER (WHERE accepted) AS accepted,
               count(*) FILTER (WHERE NOT accepted) AS rejected,
               avg(pg_loss) AS pg_loss,
               avg(anchor_loss) AS anchor_loss
        FROM rl_groups
        GROUP BY run, rl_step ORDER BY run, rl_step
        """,
    )


def rl_reasons(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Per rl run, step and gate reason: how many groups."""
    return fetch(
        con,
        """
        SELECT run, rl_step AS step, reason, count(*) AS groups
        FROM rl_groups GROUP BY ALL ORDER BY run, step, reason
        """,
    )


def steps_vs_expert(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Per eval run of a non-expert policy: steps of its solved episodes over the expert's
    steps on the same episode (suite, split, task, seed). Matched, so it is not skewed by which tasks a policy happens to solve."""
    return fetch(
        con,
        """
        WITH gold AS (
            SELECT suite, split, task_id, seed, min(n_steps) AS gold
            FROM episodes WHERE stage = 'eval' AND policy = 'expert' AND success
            GROUP BY ALL
        )
        SELECT run, count(*) AS matched, avg(n_steps / gold) AS steps_over_expert
        FROM episodes JOIN gold USING (suite, split, task_id, seed)
        WHERE stage = 'eval' AND policy <> 'expert' AND success AND gold > 0
        GROUP BY run ORDER BY run
        """,
    )


def stage_costs(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Per run: episodes, tokens (episodes, reflections and judge calls) and dollars (the
    episodes' cost at the policy's prices plus the judge's; NULL when nothing is priced)."""
    return fetch(
        con,
        """
        WITH e AS (
            SELECT run, count(*) AS episodes, sum(tokens_in) AS t_in,
                   sum(tokens_out) AS t_out, sum(cost_usd) AS usd
            FROM episodes GROUP BY run
        ), r AS (
            SELECT run, sum(tokens_in) AS t_in, sum(tokens_out) AS t_out
            FROM reflections GROUP BY run
        ), j AS (
            SELECT run, sum(tokens_in) AS t_in, sum(tokens_out) AS t_out, sum(cost_usd) AS usd
            FROM judgments GROUP BY run
        )
        SELECT e.run, e.episodes,
               e.t_in + coalesce(r.t_in, 0) + coalesce(j.t_in, 0) AS tokens_in,
               e.t_out + coalesce(r.t_out, 0) + coalesce(j.t_out, 0) AS tokens_out,
               CASE WHEN e.usd IS NULL AND j.usd IS NULL THEN NULL
                    ELSE coalesce(e.usd, 0) + coalesce(j.usd, 0) END AS cost_usd
        FROM e LEFT JOIN r USING (run) LEFT JOIN j USING (run)
        ORDER BY e.run
        """,
    )


QUERIES = {
    "eval_by_task": eval_by_task,
    "collect_attempts": collect_attempts,
    "collect_first_success": collect_first_success,
    "collect_kept": collect_kept,
    "collect_kept_steps": collect_kept_steps,
    "rl_curve": rl_curve,
    "rl_reasons": rl_reasons,
    "steps_vs_expert": steps_vs_expert,
    "stage_costs": stage_costs,
}


def run_all(con: duckdb.DuckDBPyConnection) -> dict[str, list[dict[str, Any]]]:
    """Every aggregation the report needs, by name."""
    return {name: fn(con) for name, fn in QUERIES.items()}
