"""The collect stage's teacher: who acts (with the mistake model), who judges, who reflects.

- `MistakenExpert` is the scripted expert with a mistake model: per attempt it
  may make one task-breaking error (distractor click, wrong field, wrong option,
  premature stop) and take detours (irrelevant click, scroll, back-and-forth),
  deterministically per (task, seed, attempt). A retry repeats the previous
  plan's misconception with probability `persistence` (a teacher tends to repeat
  itself on the same state) and otherwise draws afresh, so every attempt keeps
  the base rates. Reflections that name a step ("Step 2: ...") make it avoid the
  mistake or detour it planned there.
- `build_teacher` puts together the teacher policy, its judge and its reflector
  (rmsweb.judge) from the spec: the suite's reward (with the oracle's detours where
  the suite has experts), or on live suites the benchmark's LLM judge.
"""

from __future__ import annotations

import hashlib
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rmsweb.agents.base import ActResult, Policy
from rmsweb.env.actions import Action, click, fill, format_action, scroll, select, stop
from rmsweb.env.types import ActRequest, Observation
from rmsweb.judge.oracle import LabelingPolicy, OracleLabels
from rmsweb.judge.outcome import oracle_judge, reward_judge
from rmsweb.judge.reflect import llm_reflector, rule_reflector
from rmsweb.judge.types import JudgeFn, ReflectFn
from rmsweb.suites.factory import LIVE_SUITES

if TYPE_CHECKING:
    from rmsweb.judge.live import LiveJudge

CLICKABLE = {"button", "link", "tab", "checkbox", "radio", "menuitem", "treeitem", "option"}
TEXT_FIELDS = {"textbox", "searchbox", "combobox"}
STATIC = {"text", "StaticText", "paragraph", "heading", "generic", "label", "listitem"}
_STEP = re.compile(r"\bStep (\d+)\b")


def _rng(*parts: object) -> random.Random:
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


@dataclass(frozen=True)
class MistakePlan:
    error_step: int | None
    error_kind: str | None
    detour_step: int | None
    detour_kind: str | None


class MistakenExpert:
    """The scripted expert with a deterministic mistake model (see module docstring)."""

    def __init__(
        self,
        labels: OracleLabels,
        error_rate: float,
        detour_rate: float,
        error_kinds: Sequence[str],
        detour_kinds: Sequence[str],
        persistence: float = 0.8,
        seed: int = 0,
        name: str = "expert",
        max_mistake_step: int = 3,
    ) -> None:
        self.labels = labels
        self.error_rate = error_rate
        self.detour_rate = detour_rate
        self.error_kinds = list(error_kinds)
        self.detour_kinds = list(detour_kinds)
        self.persistence = persistence
        self.seed = seed
        self.name = name
        self.max_mistake_step = max_mistake_step
        self._pending: dict[tuple[str, int, int], list[Action]] = {}  # queued detour actions

    def _draw(self, task: str, seed: int, source: int) -> MistakePlan:
        rng = _rng(self.seed, task, seed, "plan", source)
        err = rng.random() < self.error_rate
        det = rng.random() < self.detour_rate
        return MistakePlan(
            rng.randrange(self.max_mistake_step) if err else None,
            rng.choice(self.error_kinds) if err else None,
            rng.randrange(self.max_mistake_step) if det else None,
            rng.choice(self.detour_kinds) if det else None,
        )

    def plan(self, task: str, seed: int, attempt: int) -> MistakePlan:
        """Attempt k reuses attempt k-1's plan with probability `persistence`."""
        source = 0
        for k in range(1, attempt + 1):
            if _rng(self.seed, task, seed, "repeat", k).random() >= self.persistence:
                source = k
        return self._draw(task, seed, source)

    async def act(self, request: ActRequest) -> ActResult:
        t = time.perf_counter()
        acceptable = self.labels.record(request)
        key = (request.task_id, request.seed, request.attempt)
        queued = self._pending.get(key)
        if queued:
            action = queued.pop(0)
        else:
            action = self._choose(request, acceptable)
        return ActResult(text=format_action(action), latency_s=time.perf_counter() - t)

    def _choose(self, request: ActRequest, acceptable: list[Action]) -> Action:
        plan = self.plan(request.task_id, request.seed, request.attempt)
        named = {int(n) - 1 for r in request.reflections for n in _STEP.findall(r)}
        obs, step = request.observation, request.step
        rng = _rng(self.seed, request.task_id, request.seed, request.attempt, step)
        if plan.error_step == step and step not in named:
            wrong = self._error(plan.error_kind or "", obs, acceptable, rng)
            if wrong is not None:
                return wrong
        if plan.detour_step == step and step not in named:
            detour = self._detour(plan.detour_kind or "", obs, acceptable, rng)
            if detour:
                self._pending[(request.task_id, request.seed, request.attempt)] = detour[1:]
                return detour[0]
        return acceptable[0] if acceptable else stop()

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


# --------------------------------------------------------------------------- builder


@dataclass
class Teacher:
    policy: Policy
    judge: JudgeFn
    reflector: ReflectFn
    labels: OracleLabels | None  # expert labels of visited states (offline suites)
    live_judge: LiveJudge | None = None  # the LLM judge behind `judge` (live suites)

    def forget(self, task: str, seed: int) -> None:
        if self.labels is not None:
            self.labels.forget(task, seed)

    async def close(self) -> None:
        try:
            await self.policy.close()
        finally:
            if self.live_judge is not None:
                await self.live_judge.close()


def build_teacher(spec: Any, suite: Any) -> Teacher:
    """The collect stage's teacher policy, judge and reflector, from the spec."""
    from rmsweb.agents.build import prompt_config

    c = spec.collect
    tasks = list(suite.task_ids("train"))
    experts = {t: suite.expert(t) for t in tasks}
    has_oracle = all(e is not None for e in experts.values())
    labels = OracleLabels(experts) if has_oracle else None
    teacher_spec = c.teacher
    if teacher_spec.kind == "expert":
        from rmsweb.agents.build import expert_policy

        expert_policy(suite, tasks)  # raises a clear error when an expert is missing
        assert labels is not None
        policy: Policy = MistakenExpert(
            labels,
            teacher_spec.error_rate,
            teacher_spec.detour_rate,
            teacher_spec.error_kinds,
            teacher_spec.detour_kinds,
            persistence=teacher_spec.persistence,
            seed=spec.seed,
        )
        reflector = rule_reflector(labels)
    else:
        from rmsweb.agents.openai_policy import from_spec

        inner = from_spec(teacher_spec, prompt_config(spec.model), "teacher")
        policy = LabelingPolicy(inner, labels) if labels else inner
        reflector = llm_reflector(inner, teacher_spec.model)
    if spec.suite.kind in LIVE_SUITES:
        from rmsweb.judge.live import build_live_judge

        live = build_live_judge(spec.suite, suite, detour_slack=c.detour_slack)
        return Teacher(policy, live.verdict, reflector, labels, live)
    judge = oracle_judge(labels, c.detour_slack) if labels else reward_judge
    return Teacher(policy, judge, reflector, labels)
