"""Eval metrics from episode and step rows (pure): success with a Wilson 95% CI,
mean steps on solved episodes, parse-error rate, env and policy errors, per task and
overall."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from rmsweb.store.rows import EpisodeRecord, EvalRow
from rmsweb.store.stats import wilson_interval


def eval_rows(
    records: Iterable[EpisodeRecord],
    run: str,
    policy: str,
    suite: str,
    split: str,
    wall_s: float,
) -> list[EvalRow]:
    """One row per task plus the overall row (task_id "*").

    Episodes that ended in an environment error after all retries count as
    failures: excluding them would flatter a policy that crashes pages. So do
    episodes a policy exception ended (policy_errors says how many). The
    overall success rate is the mean over tasks (each task weighs the same),
    and its interval is the Wilson interval of the pooled counts.
    """
    by_task: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        by_task[r.episode.task_id].append(r)
    rows: list[EvalRow] = []
    pooled_s = pooled_n = 0
    all_steps = all_bad = 0
    solved_steps: list[int] = []
    task_rates = []
    for task in sorted(by_task):
        recs = by_task[task]
        n = len(recs)
        wins = [r for r in recs if r.episode.success]
        steps = sum(len(r.steps) for r in recs)
        bad = sum(1 for r in recs for s in r.steps if not s.parse_ok)
        lo, hi = wilson_interval(len(wins), n)
        solved = [r.episode.n_steps for r in wins]
        rows.append(
            EvalRow(
                run=run,
                policy=policy,
                suite=suite,
                split=split,
                n=n,
                success_rate=len(wins) / n,
                ci_low=lo,
                ci_high=hi,
                mean_steps_solved=sum(solved) / len(solved) if solved else None,
                parse_error_rate=bad / steps if steps else 0.0,
                wall_s=0.0,
                task_id=task,
                env_errors=sum(1 for r in recs if r.episode.error),
                policy_errors=sum(1 for r in recs if r.episode.policy_error),
            )
        )
        task_rates.append(len(wins) / n)
        pooled_s += len(wins)
        pooled_n += n
        all_steps += steps
        all_bad += bad
        solved_steps += solved
    lo, hi = wilson_interval(pooled_s, pooled_n)
    rows.append(
        EvalRow(
            run=run,
            policy=policy,
            suite=suite,
            split=split,
            n=pooled_n,
            success_rate=sum(task_rates) / len(task_rates) if task_rates else 0.0,
            ci_low=lo,
            ci_high=hi,
            mean_steps_solved=sum(solved_steps) / len(solved_steps) if solved_steps else None,
            parse_error_rate=all_bad / all_steps if all_steps else 0.0,
            wall_s=wall_s,
            task_id="*",
            env_errors=sum(1 for rs in by_task.values() for r in rs if r.episode.error),
            policy_errors=sum(1 for rs in by_task.values() for r in rs if r.episode.policy_error),
        )
    )
    return rows


def category_rates(records: Iterable[EpisodeRecord]) -> dict[str, float]:
    """Success rate per task category (live suites: site, level or segment); episodes
    with an environment error count as failures, as everywhere in eval."""
    by: dict[str, list[bool]] = defaultdict(list)
    for r in records:
        by[r.episode.category or "?"].append(r.episode.success and r.episode.error is None)
    return {c: round(sum(v) / len(v), 4) for c, v in sorted(by.items())}
