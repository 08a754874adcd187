"""The collect stage's teacher: who acts, who judges, who reflects, and who grades.

- acts: `collect.teacher` with its mistake model (rmsweb.agents.build.teacher_policy:
  the scripted expert with mistakes, rmsweb.agents.mistaken_expert, or an LLM);
- judges: rmsweb.judge.outcome.attempt_judge, the same for every teacher on offline
  suites; its reference length is task-level: where the suite has experts, the median
  gold length over the task's `collect.reference_seeds` train seeds other than the
  judged one (task_gold_lengths), else the shortest success seen for the task. On live
  suites the benchmark's LLM judge (rmsweb.judge.live) decides;
- reflects: the rule critic (rmsweb.judge.critic) for the scripted teacher, the
  teacher model itself for an LLM; either reads only the trajectory and outcome;
- grades: where the suite has experts, a LabelingPolicy records the oracle's labels
  of every visited state, for grading after the fact (gold lengths, reflection
  grades). The labels reach neither the teacher nor the reflector.
"""

from __future__ import annotations

import asyncio
import math
import statistics
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rmsweb.agents.base import Policy
from rmsweb.judge.oracle import LabelingPolicy, OracleLabels
from rmsweb.judge.outcome import attempt_judge
from rmsweb.judge.reference import GoldFn, ReferenceLengths
from rmsweb.judge.types import JudgeFn, ReflectFn
from rmsweb.store.rows import EpisodeRecord
from rmsweb.suites.factory import LIVE_SUITES

if TYPE_CHECKING:
    from rmsweb.judge.live import LiveJudge

# Plays one episode of a policy on (task, seed) and returns it (the runner's run_episode).
PlayFn = Callable[[Policy, str, int], Awaitable[EpisodeRecord]]


@dataclass
class Teacher:
    policy: Policy
    judge: JudgeFn
    reflector: ReflectFn
    labels: OracleLabels | None  # oracle labels of visited states (suites with experts)
    reference: ReferenceLengths
    live_judge: LiveJudge | None = None  # the LLM judge behind `judge` (live suites)
    # The scripted teacher's mistake in an attempt (grading only; None: not scripted).
    mistake_of: Callable[[str, int, int], tuple[int, str] | None] | None = None

    def forget(self, task: str, seed: int) -> None:
        """A (task, seed) is finished: drop what was kept about it."""
        if self.labels is not None:
            self.labels.forget(task, seed)
        self.reference.forget(task, seed)

    async def close(self) -> None:
        try:
            await self.policy.close()
        finally:
            if self.live_judge is not None:
                await self.live_judge.close()


def task_gold_lengths(gold_policy: Policy, play: PlayFn | None, seeds: Sequence[int]) -> GoldFn:
    """A task-level reference length: the median gold length of the task over its
    reference seeds (`collect.reference_seeds` train seeds, the gold expert played once on
    each, cached), leaving out the judged seed itself: what a system with a few
    demonstrations per task could know, never the judged instance's own gold."""
    cache: dict[tuple[str, int], int | None] = {}
    locks: dict[str, asyncio.Lock] = {}

    async def gold(rec: EpisodeRecord) -> int | None:
        task = rec.episode.task_id
        if play is None or not seeds:
            return None
        async with locks.setdefault(task, asyncio.Lock()):
            for s in seeds:
                if (task, s) not in cache:
                    played = await play(gold_policy, task, s)
                    ok = played.episode.success and played.episode.n_steps > 0
                    cache[(task, s)] = played.episode.n_steps if ok else None
        lengths = [
            n for s in seeds if s != rec.episode.seed and (n := cache[(task, s)]) is not None
        ]
        return math.ceil(statistics.median(lengths)) if lengths else None

    return gold


def build_teacher(spec: Any, suite: Any, play: PlayFn | None = None) -> Teacher:
    """The collect stage's teacher, judge and reflector from the spec. `play` lets the
    judge play the gold expert for a gold length (without it: clean attempts only)."""
    from rmsweb.agents.build import expert_policy, teacher_policy

    c = spec.collect
    tasks = list(suite.task_ids("train"))
    experts = {t: suite.expert(t) for t in tasks}
    has_oracle = all(e is not None for e in experts.values())
    labels = OracleLabels(experts) if has_oracle else None
    if c.teacher.kind == "expert":
        from rmsweb.judge.critic import rule_critic

        acting = teacher_policy(spec, suite, name="teacher")
        reflector = rule_critic()
    else:
        from rmsweb.judge.reflect import llm_reflector

        acting = teacher_policy(spec, suite, name="teacher")
        reflector = llm_reflector(acting, c.teacher.model)
    policy: Policy = LabelingPolicy(acting, labels) if labels is not None else acting
    mistake_of = getattr(acting, "mistake_of", None)
    gold = None
    if labels is not None and c.reference_seeds:
        seeds = list(suite.seeds("train"))[: c.reference_seeds] if hasattr(suite, "seeds") else []
        gold = task_gold_lengths(expert_policy(suite, tasks, name="gold"), play, seeds)
    reference = ReferenceLengths(gold)
    if spec.suite.kind in LIVE_SUITES:
        from rmsweb.judge.live import build_live_judge

        live = build_live_judge(spec.suite, suite, detour_slack=c.detour_slack)
        return Teacher(policy, live.verdict, reflector, labels, reference, live, mistake_of)
    judge = attempt_judge(reference, c.detour_slack)
    return Teacher(policy, judge, reflector, labels, reference, mistake_of=mistake_of)
