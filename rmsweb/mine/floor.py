"""The per-task floor of mined failure states: which tasks get another round of seeds.

Mining rolls the SFT policy out on the suite's mine seeds in rounds. The first round
plays `seeds_per_task` seeds of every task; then a task whose rollouts fail at least
`min_rate` of the time but which has fewer than `floor` distinct failure states
(critical or fragile) gets the next `seeds_per_task` seeds, until it reaches the floor
or `cap` seeds. So a task the policy fails 10-20% of the time still brings a few dozen
states to RL, while a task it always solves costs one round only.

Pure: stored records in, the tasks of the next round out. A rerun after a kill
recomputes the same rounds from what is stored: the tally of a round counts only the
seeds of the rounds before it (`played`), so episodes that a killed run had already
stored for a later round cannot change which tasks that round takes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from rmsweb.mine.critical import critical_state, fragile_states
from rmsweb.mine.states import finding_row
from rmsweb.store.rows import EpisodeRecord


@dataclass(frozen=True)
class TaskTally:
    episodes: int  # rollouts without an environment error
    failed: int  # of them, not successful
    failure_states: int  # distinct critical + fragile state ids

    @property
    def failure_rate(self) -> float:
        return self.failed / self.episodes if self.episodes else 0.0


def tally(
    records: Iterable[EpisodeRecord], played: Mapping[str, Collection[int]] | None = None
) -> dict[str, TaskTally]:
    """Per task: rollouts, failed rollouts and distinct failure states.

    With `played` (task -> seeds of the finished rounds), a record of any other
    (task, seed) is left out (module doc)."""
    episodes: dict[str, int] = defaultdict(int)
    failed: dict[str, int] = defaultdict(int)
    states: dict[str, set[str]] = defaultdict(set)
    for rec in records:
        ep = rec.episode
        if ep.error or (played is not None and ep.seed not in played.get(ep.task_id, ())):
            continue
        episodes[ep.task_id] += 1
        failed[ep.task_id] += not ep.success
        found = [f for f in [critical_state(rec)] if f is not None] + fragile_states(rec)
        states[ep.task_id] |= {finding_row(f, {}).state_id for f in found}
    return {t: TaskTally(episodes[t], failed[t], len(states[t])) for t in sorted(episodes)}


def next_round(
    tallies: Mapping[str, TaskTally],
    seeds_done: Mapping[str, int],
    *,
    floor: int,
    min_rate: float,
    cap: int,
) -> list[str]:
    """Tasks below the floor that fail often enough and have seeds left (module doc)."""
    out = []
    for task, done in sorted(seeds_done.items()):
        t = tallies.get(task, TaskTally(0, 0, 0))
        if done < cap and t.failure_states < floor and t.episodes and t.failure_rate >= min_rate:
            out.append(task)
    return out
