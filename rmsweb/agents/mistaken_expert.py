"""The scripted expert with a mistake model: the offline stand-in for an LLM teacher.

The suite's expert knows the acceptable actions of any state (rmsweb.env.types.Expert).
This policy acts like a fallible teacher built on it:

1. Per attempt it may plan one task-breaking error (distractor click, wrong field,
   wrong option, premature stop) at rate `error_rate` and one detour (irrelevant
   click, scroll, scroll down and back up) at rate `detour_rate`, each at a step
   drawn from the first `max_mistake_step` steps. A plan whose step never comes
   (the episode ended earlier) or whose kind does not fit the state is no mistake.
2. A retry repeats the previous attempt's plan with probability `persistence`
   (a teacher tends to repeat itself on the same state) and otherwise draws a new
   one at the base rates. A repeated plan repeats the same wrong action: every
   choice is seeded by (task, seed, plan, step), not by the attempt.
3. Reflections are read for their content only (rmsweb.agents.advice): each note
   names steps (or none: any step) and an action called wrong. With probability
   `adherence`, drawn per note and attempt, the teacher avoids exactly that action
   at those steps and takes its next preference there. A note that names the
   wrong step or the wrong action does not help; one that calls the right action
   wrong makes the teacher leave the shortest path (its next preference is
   another acceptable action, else a plausible wrong click, else stop).
4. No oracle labels are read: the acceptable actions come from the expert itself.

Everything is deterministic per (seed, task, task seed, attempt), so collection
reruns give the same data and `retry: none` equals plain collection.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rmsweb.agents.advice import Advice, parse_advice
from rmsweb.agents.base import ActResult
from rmsweb.env.actions import Action, click, fill, format_action, scroll, select, stop
from rmsweb.env.types import ActRequest, Expert, Observation

CLICKABLE = {"button", "link", "tab", "checkbox", "radio", "menuitem", "treeitem", "option"}
TEXT_FIELDS = {"textbox", "searchbox", "combobox"}
STATIC = {"text", "StaticText", "paragraph", "heading", "generic", "label", "listitem"}


def _rng(*parts: object) -> random.Random:
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


@dataclass(frozen=True)
class MistakePlan:
    error_step: int | None
    error_kind: str | None
    detour_step: int | None
    detour_kind: str | None
    source: int = 0  # the attempt whose draw this plan is (a repeated plan keeps it)


class MistakenExpert:
    """The scripted expert with a deterministic mistake model (see module docstring)."""

    def __init__(
        self,
        experts: Mapping[str, Expert],
        error_rate: float,
        detour_rate: float,
        error_kinds: Sequence[str],
        detour_kinds: Sequence[str],
        persistence: float = 0.8,
        adherence: float = 0.9,
        seed: int = 0,
        name: str = "expert",
        max_mistake_step: int = 3,
    ) -> None:
        self.experts = dict(experts)
        self.error_rate = error_rate
        self.detour_rate = detour_rate
        self.error_kinds = list(error_kinds)
        self.detour_kinds = list(detour_kinds)
        self.persistence = persistence
        self.adherence = adherence
        self.seed = seed
        self.name = name
        self.max_mistake_step = max_mistake_step
        # The rest of a detour that takes several steps, per (task, seed, attempt).
        self._pending: dict[tuple[str, int, int], list[Action]] = {}

    # ------------------------------------------------------------------ the plan

    def _draw(self, task: str, seed: int, source: int) -> MistakePlan:
        rng = _rng(self.seed, task, seed, "plan", source)
        err = rng.random() < self.error_rate
        det = rng.random() < self.detour_rate
        return MistakePlan(
            rng.randrange(self.max_mistake_step) if err else None,
            rng.choice(self.error_kinds) if err else None,
            rng.randrange(self.max_mistake_step) if det else None,
            rng.choice(self.detour_kinds) if det else None,
            source,
        )

    def plan(self, task: str, seed: int, attempt: int) -> MistakePlan:
        """Attempt k reuses attempt k-1's plan with probability `persistence`."""
        source = 0
        for k in range(1, attempt + 1):
            if _rng(self.seed, task, seed, "repeat", k).random() >= self.persistence:
                source = k
        return self._draw(task, seed, source)

    # ------------------------------------------------------------------ reflections

    def heeded(self, request: ActRequest) -> list[Advice]:
        """The notes of the reflections so far that this attempt follows at this step.

        Whether a note is followed is drawn once per (attempt, reflection, note), so
        the same note is heeded or ignored consistently through the attempt.
        """
        out = []
        for r, text in enumerate(request.reflections):
            for n, advice in enumerate(parse_advice(text)):
                if not advice.applies(request.step):
                    continue
                rng = _rng(self.seed, request.task_id, request.seed, request.attempt, "heed", r, n)
                if rng.random() < self.adherence:
                    out.append(advice)
        return out

    # ------------------------------------------------------------------ acting

    async def act(self, request: ActRequest) -> ActResult:
        t = time.perf_counter()
        expert = self.experts.get(request.task_id)
        if expert is None:
            raise KeyError(f"no expert for task {request.task_id!r}")
        acceptable = list(
            expert.acceptable_actions(request.instruction, request.observation, request.history)
        )
        key = (request.task_id, request.seed, request.attempt)
        if request.step == 0:
            self._pending.pop(key, None)  # a rerun of the episode starts afresh
        avoid = self.heeded(request)
        obs = request.observation

        def allowed(a: Action) -> bool:
            return not any(advice.forbids(a, obs) for advice in avoid)

        queued = self._pending.get(key)
        if queued and allowed(queued[0]):
            action = queued.pop(0)
        else:
            self._pending.pop(key, None)
            options = self._options(request, acceptable)
            chosen = next((o for o in options if allowed(o[0])), options[0])
            action = chosen[0]
            if len(chosen) > 1:
                self._pending[key] = list(chosen[1:])
        return ActResult(text=format_action(action), latency_s=time.perf_counter() - t)

    def _options(self, request: ActRequest, acceptable: list[Action]) -> list[list[Action]]:
        """What the teacher would do at this step, best first; a detour spans several steps.

        First its planned mistake or detour for this step, then the acceptable actions
        (stop when there are none), then, reached only when reflections forbid all of
        those, a plausible wrong click and stop.
        """
        plan = self.plan(request.task_id, request.seed, request.attempt)
        obs, step = request.observation, request.step
        rng = _rng(self.seed, request.task_id, request.seed, "act", plan.source, step)
        options: list[list[Action]] = []
        if plan.error_step == step:
            wrong = self._error(plan.error_kind or "", obs, acceptable, rng)
            if wrong is not None:
                options.append([wrong])
        if plan.detour_step == step:
            detour = self._detour(plan.detour_kind or "", obs, acceptable, rng)
            if detour:
                options.append(detour)
        # The expert's own choice; with nothing to suggest it stops (as ExpertPolicy).
        options += [[a] for a in acceptable] or [[stop()]]
        # Forced alternatives, reached only when reflections forbid all of the above.
        fallback_rng = _rng(self.seed, request.task_id, request.seed, "fallback", step)
        other = self._error("distractor_click", obs, acceptable, fallback_rng)
        if other is not None:
            options.append([other])
        options.append([stop()])
        return options

    def _error(
        self, kind: str, obs: Observation, acceptable: list[Action], rng: random.Random
    ) -> Action | None:
        good = {a.target for a in acceptable}
        if kind == "premature_stop":
            return stop()
        if kind == "wrong_field":
            fills = [a for a in acceptable if a.type == "fill"]
            others = [
                e for e, el in obs.elements.items() if el.role in TEXT_FIELDS and e not in good
            ]
            if fills and others:
                return fill(rng.choice(others), fills[0].text or "")
        if kind == "wrong_option":
            for a in acceptable:
                el = obs.elements.get(a.target or "")
                if a.type == "select" and el and len(el.options) > 1:
                    return select(
                        a.target or "", rng.choice([o for o in el.options if o != a.text])
                    )
        # distractor_click, and the fallback when the planned kind does not fit the state
        candidates = [e for e, el in obs.elements.items() if el.role in CLICKABLE and e not in good]
        return click(rng.choice(candidates)) if candidates else None

    def _detour(
        self, kind: str, obs: Observation, acceptable: list[Action], rng: random.Random
    ) -> list[Action]:
        """Redundant actions; the expert resumes from whatever state they leave."""
        if not acceptable:
            return []
        if kind == "scroll":
            return [scroll("down")]
        if kind == "back_and_forth":
            return [scroll("down"), scroll("up")]
        good = {a.target for a in acceptable}
        static = [e for e, el in obs.elements.items() if el.role in STATIC and e not in good]
        if static:  # irrelevant_click: a harmless click on plain text
            return [click(rng.choice(static))]
        return [scroll("down")]

    async def close(self) -> None:
        self._pending.clear()
