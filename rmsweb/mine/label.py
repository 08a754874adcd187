"""Online labels of the states a mining rollout visits, and the fragile probes.

A labeller answers, for the state a policy is about to act in, which actions are
acceptable there (None: it cannot tell). It must run online, while the page is live:
the oracle reads the Observation's elements (roles, values, boxes), which the stored
observation text does not keep.

- `OracleLabeller`: the suite's scripted expert labels any state (mode oracle).
- `ReferenceLabeller`: the teacher's kept trajectory for the same task and seed
  (mode reference). While the rollout has followed it, the acceptable action at step t
  is the reference's action t, retargeted to the element with the same role and name
  on the current page (ids can differ between page loads on live sites). After the
  first divergence the reference says nothing more.
- `MiningPolicy` wraps the rolled-out policy: before each step it asks the labeller,
  and, when the state is labelled and `probes` > 1, samples `probes` actions at once
  (one batch on the HF backend), executes the first and keeps all of them: the
  evidence for fragile states. `take(task, seed, attempt, n_steps)` hands the
  episode's labels over as StepLabelRows to be stored with the episode.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from rmsweb.agents.base import ActResult, Policy
from rmsweb.env.actions import Action, ParseError, format_action, matches_any, parse_action
from rmsweb.env.types import ActRequest, Element, Expert, Observation
from rmsweb.store.rows import ElementBoxRow, StepLabelRow

EpisodeKey = tuple[str, int, int]  # task, seed, attempt (the sample index when mining)


class Labeller(Protocol):
    source: str  # what the step_labels rows name as their source

    def label(self, request: ActRequest) -> list[Action] | None:
        """Acceptable actions in this state, best first; None when unknown."""
        ...

    def observe(self, request: ActRequest, action: Action | None, ok: bool) -> None:
        """What the policy did in the labelled state (`ok`: it was acceptable)."""
        ...


class OracleLabeller:
    """The scripted expert of each task labels every state (also ones it would not reach)."""

    source = "oracle"

    def __init__(self, experts: Mapping[str, Expert]) -> None:
        self.experts = experts

    def label(self, request: ActRequest) -> list[Action] | None:
        expert = self.experts[request.task_id]
        return list(
            expert.acceptable_actions(request.instruction, request.observation, request.history)
        )

    def observe(self, request: ActRequest, action: Action | None, ok: bool) -> None:
        pass


@dataclass(frozen=True)
class ReferenceStep:
    """One step of a reference trajectory: its action and the page it acted on."""

    action: Action
    obs_text: str


_LINE = re.compile(r'^\s*\[(\d+)\]\s+(\S+)(?:\s+"((?:[^"\\]|\\.)*)")?')


def describe_target(obs_text: str, target: str) -> tuple[str, str] | None:
    """(role, name) of element `target` in an observation text (`[12] button "OK"`)."""
    for line in obs_text.splitlines():
        m = _LINE.match(line)
        if m and m.group(1) == target:
            return m.group(2), m.group(3) or ""
    return None


def retarget(step: ReferenceStep, obs: Observation) -> Action:
    """The reference action aimed at the element with the same role and name on `obs`
    (the first in page order); unchanged when there is none or ids already agree."""
    a = step.action
    if a.target is None:
        return a
    described = describe_target(step.obs_text, a.target)
    here = obs.elements.get(a.target)
    if described is None or (here and (here.role, here.name) == described):
        return a
    for eid, el in obs.elements.items():
        if (el.role, el.name) == described:
            return Action(a.type, target=eid, text=a.text, x=a.x, y=a.y)
    return a


class ReferenceLabeller:
    """Divergence from the teacher's kept trajectory of the same task and seed."""

    source = "reference"

    def __init__(self, references: Mapping[tuple[str, int], Sequence[ReferenceStep]]) -> None:
        self.references = references
        self._diverged: set[EpisodeKey] = set()

    def label(self, request: ActRequest) -> list[Action] | None:
        key = (request.task_id, request.seed, request.attempt)
        if request.step == 0:
            self._diverged.discard(key)  # a new episode (or the rerun of one)
        ref = self.references.get((request.task_id, request.seed))
        if ref is None or key in self._diverged:
            return None
        if request.step >= len(ref):
            return []  # the reference was already done here: nothing to suggest
        return [retarget(ref[request.step], request.observation)]

    def observe(self, request: ActRequest, action: Action | None, ok: bool) -> None:
        if not ok:
            self._diverged.add((request.task_id, request.seed, request.attempt))


@dataclass
class _Entry:
    acceptable: list[Action]
    boxes: list[ElementBoxRow]
    samples: list[str] = field(default_factory=list)
    samples_ok: list[bool] = field(default_factory=list)


def _parsed(text: str) -> Action | None:
    a = parse_action(text)
    return None if isinstance(a, ParseError) else a


def element_boxes(
    elements: Mapping[str, Element], actions: Sequence[Action]
) -> list[ElementBoxRow]:
    """Boxes of the elements the actions name (each once), for click_xy comparisons."""
    out: dict[str, ElementBoxRow] = {}
    for a in actions:
        el = elements.get(a.target or "")
        if el is not None and el.box is not None and el.id not in out:
            b = el.box
            out[el.id] = ElementBoxRow(el.id, b.x, b.y, b.width, b.height)
    return list(out.values())


def box_elements(boxes: Sequence[ElementBoxRow]) -> dict[str, Element]:
    """Stored boxes back as the elements `compare` reads (for click_xy only)."""
    from rmsweb.env.types import Box

    return {b.id: Element(b.id, "", "", box=Box(b.x, b.y, b.width, b.height)) for b in boxes}


class MiningPolicy:
    """Wraps the rolled-out policy: labels each state, probes labelled ones `probes` times."""

    def __init__(self, inner: Policy, labeller: Labeller | None, probes: int = 0) -> None:
        self.inner = inner
        self.labeller = labeller
        self.probes = probes
        self.name = inner.name
        self.generations = 0  # policy calls, probes included
        self._entries: dict[EpisodeKey, dict[int, _Entry]] = {}

    async def act(self, request: ActRequest) -> ActResult:
        key = (request.task_id, request.seed, request.attempt)
        if request.step == 0:
            self._entries[key] = {}  # a new episode, or the rerun of one after an env error
        acceptable = self.labeller.label(request) if self.labeller else None
        if acceptable and self.probes > 1:
            # One gather: a batching backend answers all probes in one forward batch.
            results = list(
                await asyncio.gather(*(self.inner.act(request) for _ in range(self.probes)))
            )
        else:
            results = [await self.inner.act(request)]
        self.generations += len(results)
        executed = results[0]
        action = _parsed(executed.text)
        if acceptable is None:
            return executed
        elements = request.observation.elements
        ok = action is not None and matches_any(action, acceptable, elements=elements)
        entry = _Entry(acceptable, [])
        named = list(acceptable)
        if len(results) > 1:
            for r in results:
                a = _parsed(r.text)
                entry.samples.append(r.text)
                entry.samples_ok.append(
                    a is not None and matches_any(a, acceptable, elements=elements)
                )
                named += [a] if a is not None else []
        elif action is not None:
            named.append(action)
        entry.boxes = element_boxes(elements, named)
        self._entries.setdefault(key, {})[request.step] = entry
        if self.labeller is not None:
            self.labeller.observe(request, action, ok)
        return executed

    def take(
        self, task: str, seed: int, attempt: int, episode_id: str, n_steps: int
    ) -> list[StepLabelRow]:
        """The episode's labels as StepLabelRows (steps it stored only); forgets them."""
        entries = self._entries.pop((task, seed, attempt), {})
        source = self.labeller.source if self.labeller else ""
        return [
            StepLabelRow(
                episode_id,
                step,
                source,
                [format_action(a) for a in e.acceptable],
                e.boxes,
                e.samples,
                e.samples_ok,
            )
            for step, e in sorted(entries.items())
            if step < n_steps
        ]

    async def close(self) -> None:
        await self.inner.close()
