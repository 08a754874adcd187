"""The collect stage's unit of work: the retry loop for one (task, seed) on the runner.

After the loop (never during it) the oracle grades each reflection against its labels
of the attempt reflected on (rmsweb.judge.grade); the grade is stored beside the
reflection, and the labels are then forgotten.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rmsweb.agents.base import Policy
from rmsweb.collect.retry import RetryLoop, RetryOutcome
from rmsweb.judge.grade import grade
from rmsweb.judge.oracle import OracleLabels
from rmsweb.judge.types import JudgeFn, ReflectFn
from rmsweb.rollout.runner import EpisodeRunner, Job
from rmsweb.store.rows import EpisodeRecord, ReflectionRow

# (task, seed, attempt) -> the teacher's task-breaking mistake (step, kind), or None.
MistakeFn = Callable[[str, int, int], "tuple[int, str] | None"]


def collect_job(
    loop: RetryLoop,
    judge: JudgeFn,
    reflector: ReflectFn,
    split: str = "train",
    forget: Callable[[str, int], None] | None = None,
    labels: OracleLabels | None = None,
    mistake_of: MistakeFn | None = None,
) -> Job:
    """A runner Job: the retry loop for one (task, seed); returns every attempt's record.

    `mistake_of(task, seed, attempt)`: the scripted teacher's mistake in an attempt
    (step, kind), stored beside each reflection for the critic's scores per kind."""

    async def job(
        runner: EpisodeRunner, policy: Policy, task_id: str, seed: int
    ) -> list[EpisodeRecord]:
        async def attempt(k: int, reflections: Sequence[str]) -> EpisodeRecord:
            return await runner.run_episode(
                policy, task_id, seed, split=split, attempt=k, reflections=reflections
            )

        outcome: RetryOutcome = await loop.run(attempt, judge, reflector)
        for rec, verdict in zip(outcome.attempts, outcome.verdicts, strict=True):
            rec.episode.reference_steps = verdict.reference_length
        # A reflection is stored with the attempt it reflects on, graded by the oracle.
        for r in outcome.reflections:
            rec = outcome.attempts[r.attempt]
            g = grade(r.text, rec, labels)
            made = mistake_of(task_id, seed, r.attempt) if mistake_of is not None else None
            rec.reflections.append(
                ReflectionRow(
                    rec.episode.episode_id,
                    r.attempt,
                    r.text,
                    r.source,
                    r.tokens_in,
                    r.tokens_out,
                    named_steps=g.named,
                    oracle_bad_steps=g.bad,
                    mistake_kind=made[1] if made else None,
                    mistake_step=made[0] if made else None,
                )
            )
        if forget is not None:
            forget(task_id, seed)  # the oracle's labels of these states are no longer needed
        return outcome.attempts

    return job
