"""Task-level reference lengths: how many steps a (task, seed) should take.

A success with more than reference * (1 + detour_slack) steps took a detour. The
reference never comes from the attempt being judged (then the length test could
never fire). In order:
1. a task-level gold figure, where the suite has experts (`gold`, an async function of
   the judged record: the collect stage's median gold length over the task's reference
   train seeds other than the judged one, rmsweb.collect.teacher.task_gold_lengths),
   never the judged seed's own gold (per-instance knowledge no real system has);
2. else the shortest success seen for the same task and seed in earlier attempts;
3. else the shortest success seen for the task on other seeds (seeds of a task
   usually need the same steps; where they do not, this is a rough guess).
Without any, there is no reference and only wasted steps make a detour.

With an LLM teacher (no gold) 3. depends on which units finished first, so detour
decisions there are not reproducible bit for bit across runs with several contexts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from rmsweb.store.rows import EpisodeRecord

GoldFn = Callable[[EpisodeRecord], Awaitable[int | None]]


class ReferenceLengths:
    def __init__(self, gold: GoldFn | None = None) -> None:
        self.gold = gold
        self._unit: dict[tuple[str, int], int] = {}  # shortest success per (task, seed)
        self._task: dict[str, int] = {}  # shortest success per task

    async def reference(self, rec: EpisodeRecord) -> int | None:
        """The reference length for judging `rec` (before `rec` itself is seen)."""
        ep = rec.episode
        if self.gold is not None:
            gold = await self.gold(rec)
            if gold:
                return gold
        return self._unit.get((ep.task_id, ep.seed)) or self._task.get(ep.task_id)

    def observe(self, rec: EpisodeRecord) -> None:
        """Remember a judged attempt: its length if it succeeded."""
        ep = rec.episode
        if not ep.success or ep.n_steps <= 0:
            return
        key = (ep.task_id, ep.seed)
        self._unit[key] = min(self._unit.get(key, ep.n_steps), ep.n_steps)
        self._task[ep.task_id] = min(self._task.get(ep.task_id, ep.n_steps), ep.n_steps)

    def forget(self, task: str, seed: int) -> None:
        """Drop a finished unit's own record (the task-level one stays)."""
        self._unit.pop((task, seed), None)
