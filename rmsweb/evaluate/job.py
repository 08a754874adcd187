"""The eval stage's work, apart from its I/O: which tasks and seeds each split runs, and
the runner Job for one (task, seed): the episode, priced, and judged on live suites.

Offline suites split seeds (every task runs in every split); live suites split tasks
(each task is in one split and runs at its one seed, 0).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rmsweb.agents.base import Policy
from rmsweb.errors import UserError
from rmsweb.judge.live import LiveJudge
from rmsweb.rollout.runner import EpisodeRunner, Job
from rmsweb.store.rows import EpisodeRecord
from rmsweb.suites.base import Suite

CostFn = Callable[[int, int], float]  # (tokens in, tokens out) -> US dollars


def split_plan(
    suite: Suite, splits: Sequence[str], seeds_per_task: int | None = None
) -> dict[str, tuple[list[str], list[int]]]:
    """split -> (task ids, seeds) for every split to evaluate; checked before any episode
    runs, so an empty split fails the stage before it spends anything."""
    plan = {}
    for split in splits:
        tasks, seeds = suite.task_ids(split), suite.seeds(split)
        if seeds_per_task:
            seeds = seeds[:seeds_per_task]
        if not tasks or not seeds:
            raise UserError(
                f"suite {suite.name} has no {'tasks' if not tasks else 'seeds'} in the "
                f"{split} split ({len(suite.task_ids())} tasks in all). Fix: raise the "
                f"suite's {split}_fraction or limit, or drop {split} from eval.splits (or from the policy's splits)."
            )
        plan[split] = (tasks, seeds)
    return plan


def eval_job(split: str, *, judge: LiveJudge | None = None, cost_usd: CostFn | None = None) -> Job:
    """One episode (attempt 0); its policy cost at the policy's prices; the judge's verdict
    as its success (live suites), all before the runner stores it."""

    async def job(
        runner: EpisodeRunner, policy: Policy, task_id: str, seed: int
    ) -> list[EpisodeRecord]:
        record = await runner.run_episode(policy, task_id, seed, split=split)
        ep = record.episode
        if cost_usd is not None:
            ep.cost_usd = cost_usd(ep.tokens_in, ep.tokens_out)
        if judge is not None:
            await judge.judge(record)
        return [record]

    return job
