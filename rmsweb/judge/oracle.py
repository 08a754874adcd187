"""Oracle labels: which actions are acceptable in a state, by the suite's scripted expert.

Offline suites have an expert that can label any state, also one a different policy
reached. The labels grade (judges, the critic's precision, mining); they are never
shown to a policy or a reflector.

- `OracleLabels` records, for every state a teacher visits, the expert's acceptable
  actions, keyed by (task, seed, attempt, step).
- `LabelingPolicy` wraps any policy so that the states it visits get labelled.
- `bad_steps` lists the steps of an episode whose action was not acceptable (the
  first of them is the oracle's first error, the critical state of mining).
- `clean_length` reads the gold length off an attempt the oracle found no fault in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rmsweb.agents.base import ActResult, Policy
from rmsweb.env.actions import Action, matches_any
from rmsweb.env.types import ActRequest, Expert, Observation
from rmsweb.store.rows import EpisodeRecord

StepKey = tuple[str, int, int, int]  # task, seed, attempt, step


@dataclass
class StepLabel:
    acceptable: list[Action]
    observation: Observation


@dataclass
class OracleLabels:
    """Expert labels of the states visited in the current attempts, by step key."""

    experts: Mapping[str, Expert]
    labels: dict[StepKey, StepLabel] = field(default_factory=dict)

    def record(self, request: ActRequest) -> list[Action]:
        expert = self.experts[request.task_id]
        acceptable = list(
            expert.acceptable_actions(request.instruction, request.observation, request.history)
        )
        key = (request.task_id, request.seed, request.attempt, request.step)
        self.labels[key] = StepLabel(acceptable, request.observation)
        return acceptable

    def get(self, task: str, seed: int, attempt: int, step: int) -> StepLabel | None:
        return self.labels.get((task, seed, attempt, step))

    def forget(self, task: str, seed: int) -> None:
        for key in [k for k in self.labels if k[0] == task and k[1] == seed]:
            del self.labels[key]


class LabelingPolicy:
    """Wraps any teacher: records the oracle's labels of each state, then lets it act."""

    def __init__(self, inner: Policy, labels: OracleLabels) -> None:
        self.inner = inner
        self.labels = labels
        self.name = inner.name

    async def act(self, request: ActRequest) -> ActResult:
        self.labels.record(request)
        return await self.inner.act(request)

    async def close(self) -> None:
        await self.inner.close()


def bad_steps(rec: EpisodeRecord, labels: OracleLabels) -> list[int] | None:
    """Steps whose action the oracle did not accept, in order; None if a step is unlabelled."""
    ep = rec.episode
    bad = []
    for st in rec.steps:
        label = labels.get(ep.task_id, ep.seed, ep.attempt, st.step)
        if label is None:
            return None
        action = Action.from_row(st.action) if st.action else None
        ok = action is not None and matches_any(
            action, label.acceptable, elements=label.observation.elements
        )
        if not ok:
            bad.append(st.step)
    return bad


def clean_length(rec: EpisodeRecord, labels: OracleLabels) -> int | None:
    """The gold length, read off a successful attempt whose every step the oracle accepts.

    The expert's acceptable actions are those on a shortest path (env.types.Expert), so
    an attempt that took only such actions and succeeded took a shortest path. Else None
    (the gold length must then come from playing the expert).
    """
    if not rec.episode.success or not rec.steps:
        return None
    return len(rec.steps) if bad_steps(rec, labels) == [] else None
