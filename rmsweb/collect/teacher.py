"""The collect stage's teacher: who acts, who judges, who reflects, and who grades.

- acts: `collect.teacher` with its mistake model (rmsweb.agents.build.teacher_policy:
  the scripted expert with mistakes, rmsweb.agents.mistaken_expert, or an LLM);
- judges: rmsweb.judge.outcome.attempt_judge, the same for every teacher on offline
  suites; its reference length is the oracle's gold length where the suite has
  experts. On live suites the benchmark's LLM judge (rmsweb.judge.live) decides;
- reflects: the rule critic (rmsweb.judge.critic) for the scripted teacher, the
  teacher model itself for an LLM; either reads only the trajectory and outcome;
- grades: where the suite has experts, a LabelingPolicy records the oracle's labels
  of every visited state, for grading after the fact (gold lengths, reflection
  grades). The labels reach neither the teacher nor the reflector.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rmsweb.agents.base import Policy
from rmsweb.judge.oracle import LabelingPolicy, OracleLabels, clean_length
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


def gold_lengths(labels: OracleLabels, gold_policy: Policy, play: PlayFn | None) -> GoldFn:
    """The oracle's gold length of a record's (task, seed): read off the record when the
    oracle accepts its every step, else by playing the gold expert once (cached)."""
    cache: dict[tuple[str, int], int | None] = {}

    async def gold(rec: EpisodeRecord) -> int | None:
        key = (rec.episode.task_id, rec.episode.seed)
        if key in cache:
            return cache[key]
        length = clean_length(rec, labels)
        if length is None and play is not None:
            played = await play(gold_policy, *key)
            length = played.episode.n_steps if played.episode.success else None
        if length is not None:
            cache[key] = length
        return length

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
    if labels is not None:
        gold = gold_lengths(labels, expert_policy(suite, tasks, name="gold"), play)
    reference = ReferenceLengths(gold)
    if spec.suite.kind in LIVE_SUITES:
        from rmsweb.judge.live import build_live_judge

        live = build_live_judge(spec.suite, suite, detour_slack=c.detour_slack)
        return Teacher(policy, live.verdict, reflector, labels, reference, live, mistake_of)
    judge = attempt_judge(reference, c.detour_slack)
    return Teacher(policy, judge, reflector, labels, reference, mistake_of=mistake_of)
