"""The mine stage's rollouts: `samples` episodes of the policy per (task, seed), labelled.

The unit of work is one (task, seed), as in eval and collect, run by the same
EpisodeRunner: its samples run concurrently (more requests for a batching policy to
coalesce across browser contexts) as episodes with `attempt` = sample index.

Each finished episode carries its step labels (EpisodeRecord.labels), so labels and
episode are stored in one shard: after a kill -9 both exist or neither.

Resume: the runner writes a unit's records whole (sink.write_unit: all or none) and
skips a unit whose attempt-0 episode is stored. The job still returns attempt 0 last
and reruns only the samples the sink lacks, so a sink without write_unit (or a unit
stored by an older writer) is completed, never duplicated.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from rmsweb.agents.base import Policy
from rmsweb.errors import UserError
from rmsweb.mine.label import MiningPolicy
from rmsweb.rollout.runner import EpisodeRunner, Job
from rmsweb.store.rows import EpisodeRecord, EpisodeSink, StepLabelRow, episode_key
from rmsweb.suites.base import Suite

# Labels a finished episode after the fact (mode judge); returns its step labels.
EpisodeLabeller = Callable[[EpisodeRecord], Awaitable[list[StepLabelRow]]]


def mine_job(
    sink: EpisodeSink,
    policy: MiningPolicy,
    samples: int,
    *,
    split: str = "train",
    after: EpisodeLabeller | None = None,
) -> Job:
    """A runner Job: `samples` labelled episodes of `policy` for one (task, seed)."""

    async def job(
        runner: EpisodeRunner, _policy: Policy, task_id: str, seed: int
    ) -> list[EpisodeRecord]:
        done = sink.completed_keys()
        todo = [i for i in range(samples) if episode_key(task_id, seed, policy.name, i) not in done]

        async def one(i: int) -> EpisodeRecord:
            rec = await runner.run_episode(policy, task_id, seed, split=split, attempt=i)
            ep = rec.episode
            rec.labels = policy.take(task_id, seed, i, ep.episode_id, len(rec.steps))
            if after is not None and not ep.success and not ep.error:
                rec.labels = await after(rec)
            return rec

        records = await asyncio.gather(*(one(i) for i in todo))
        # Attempt 0 is the unit's resume key: write it after the others (module doc).
        return sorted(records, key=lambda r: r.episode.attempt == 0)

    return job


async def run_rollouts(
    runner: EpisodeRunner,
    policy: MiningPolicy,
    tasks: list[str],
    seeds: list[int],
    sink: EpisodeSink,
    samples: int,
    *,
    after: EpisodeLabeller | None = None,
    description: str = "mine",
    shard: tuple[int, int] = (0, 1),
    split: str = "train",
) -> tuple[int, float]:
    """Roll out every (task, seed) not yet stored (of this node's `shard`: index, count);
    (episodes run now, their wall seconds)."""
    job = mine_job(sink, policy, samples, split=split, after=after)
    stats = await runner.run(
        policy, tasks, seeds, sink, split=split, job=job, description=description, shard=shard
    )
    return stats.episodes, stats.wall_s


def mine_split(suite: Suite) -> str:
    """The split mining plays: MiniWoB's own mine seed range, so the rollouts are not the
    train seeds SFT has memorised; live suites (which split tasks, not seeds) mine their
    train tasks."""
    try:
        suite.seeds("mine")
    except UserError:
        return "train"
    return "mine"
