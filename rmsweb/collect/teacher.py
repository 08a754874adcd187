"""Teachers for the collect stage: who acts, who judges an attempt, who reflects on it.

- `OracleLabels` records, for every state a teacher visits, the scripted
  expert's acceptable actions (offline suites can label any state).
- `MistakenExpert` is the scripted expert with a mistake model: per attempt it
  may make one task-breaking error (distractor click, wrong field, wrong option,
  premature stop) and take detours (irrelevant click, scroll, back-and-forth),
  deterministically per (task, seed, attempt). A retry repeats the previous
  plan's misconception with probability `persistence` (a teacher tends to repeat
  itself on the same state) and otherwise draws afresh, so every attempt keeps
  the base rates. Reflections that name a step ("Step 2: ...") make it avoid the
  mistake or detour it planned there.
- `oracle_judge`: success from the suite's reward; redundant steps are those
  whose action is not acceptable in the state (by the expert's labels); a
  success with redundant steps or more than reference_length * (1 + slack)
  steps is a detour.
- `rule_reflector` diffs the trajectory against the labels in plain language;
  `llm_reflector` asks the teacher model itself (openai teachers).
"""

from __future__ import annotations

import hashlib
import random
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rmsweb.agents.base import ActRequest, ActResult
from rmsweb.collect.retry import Reflection, Verdict, is_detour
from rmsweb.env.actions import (
    Action,
    click,
    fill,
    format_action,
    matches_any,
    parse_action,
    scroll,
    select,
    stop,
)
from rmsweb.env.types import Observation
from rmsweb.store.rows import EpisodeRecord

StepKey = tuple[str, int, int, int]  # task, seed, attempt, step

CLICKABLE = {"button", "link", "tab", "checkbox", "radio", "menuitem", "treeitem", "option"}
TEXT_FIELDS = {"textbox", "searchbox", "combobox"}
STATIC = {"text", "StaticText", "paragraph", "heading", "generic", "label", "listitem"}
_STEP = re.compile(r"\bStep (\d+)\b")


def _rng(*parts: object) -> random.Random:
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def describe(obs: Observation, target: str | None) -> str:
    el = obs.elements.get(target or "")
    return f'{el.role} "{el.name}"' if el else "an element"


@dataclass
class StepLabel:
    acceptable: list[Action]
    observation: Observation


@dataclass
class OracleLabels:
    """Expert labels of the states visited in the current attempts, by step key."""

    experts: Mapping[str, Any]
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

    def __init__(self, inner: Any, labels: OracleLabels) -> None:
        self.inner = inner
        self.labels = labels
        self.name = inner.name

    async def act(self, request: ActRequest) -> ActResult:
        self.labels.record(request)
        return await self.inner.act(request)

    async def close(self) -> None:
        await self.inner.close()


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


# --------------------------------------------------------------------------- judge


def redundant_steps(rec: EpisodeRecord, labels: OracleLabels) -> tuple[list[int], int | None]:
    """Steps whose action was not acceptable; and the first of them that is a mistake."""
    ep = rec.episode
    redundant = []
    for st in rec.steps:
        label = labels.get(ep.task_id, ep.seed, ep.attempt, st.step)
        if label is None:
            continue
        action = Action.from_row(st.action) if st.action else None
        ok = action is not None and matches_any(
            action, label.acceptable, elements=label.observation.elements
        )
        if not ok:
            redundant.append(st.step)
    return redundant, (redundant[0] if redundant else None)


def oracle_judge(labels: OracleLabels, detour_slack: float) -> Any:
    async def judge(rec: EpisodeRecord) -> Verdict:
        redundant, _ = redundant_steps(rec, labels)
        n = rec.episode.n_steps
        reference = n - len(redundant) if rec.episode.success else None
        detour = rec.episode.success and (bool(redundant) or is_detour(n, reference, detour_slack))
        return Verdict(rec.episode.success, detour, reference, tuple(redundant))

    return judge


async def reward_judge(rec: EpisodeRecord) -> Verdict:
    """Without an oracle: success from the suite's reward, no detour detection."""
    return Verdict(rec.episode.success)


# --------------------------------------------------------------------------- reflectors


def rule_reflector(labels: OracleLabels) -> Any:
    """Plain-language diff of the trajectory against the expert's labels."""

    async def reflect(rec: EpisodeRecord, verdict: Verdict, earlier: Sequence[str]) -> Reflection:
        ep = rec.episode
        notes: list[str] = []
        for st in rec.steps:
            if st.step not in verdict.redundant_steps:
                continue
            label = labels.get(ep.task_id, ep.seed, ep.attempt, st.step)
            if label is None:
                continue
            obs = label.observation
            did = (
                format_action(Action.from_row(st.action)) if st.action else "an unparseable output"
            )
            acted = describe(obs, st.action.target if st.action else None)
            if label.acceptable:
                right = label.acceptable[0]
                should = f"{format_action(right)} ({describe(obs, right.target)})"
                if st.action and st.action.type in ("stop", "answer"):
                    what = f"stopped with {did} although the task was not done"
                elif st.action and st.action.target:
                    what = f"did {did} on {acted}"
                else:
                    what = f"did {did}"
                notes.append(f"Step {st.step + 1}: {what}; the right action was {should}.")
            else:
                notes.append(f"Step {st.step + 1}: {did} was not needed.")
        if not ep.success:
            outcome = "The attempt failed"
            if ep.error:
                outcome += f" (environment error: {ep.error})"
        else:
            outcome = f"The attempt succeeded in {ep.n_steps} steps but took detours"
        text = outcome + ". " + (" ".join(notes) if notes else "Follow the task more directly.")
        return Reflection(ep.attempt, text, "rule")

    return reflect


REFLECTION_PROMPT = """\
You attempted a web task and did not solve it cleanly. Write 1-3 short sentences:
name the first wrong or unnecessary step (by its number, as "Step N") and what to do
instead. Be concrete (element ids and names).

Task: {instruction}
Steps:
{steps}
Outcome: {outcome}
Earlier lessons: {earlier}"""


def llm_reflector(client: Any, model_name: str) -> Any:
    """The teacher model reflects on its own attempt (openai teachers)."""

    async def reflect(rec: EpisodeRecord, verdict: Verdict, earlier: Sequence[str]) -> Reflection:
        ep = rec.episode
        lines = []
        for st in rec.steps:
            parsed = parse_action(st.output_text)
            shown = format_action(parsed) if isinstance(parsed, Action) else st.output_text[:80]
            err = f" -> error: {st.env_error}" if st.env_error else ""
            lines.append(f"Step {st.step + 1}: {shown}{err}")
        outcome = "success with detours" if ep.success else "failure"
        prompt = REFLECTION_PROMPT.format(
            instruction=ep.instruction,
            steps="\n".join(lines) or "(none)",
            outcome=outcome,
            earlier="; ".join(earlier) or "none",
        )
        text, usage = await client.chat([{"role": "user", "content": prompt}])
        return Reflection(
            ep.attempt,
            " ".join(text.split())[:600],
            model_name,
            int(usage.get("prompt_tokens", 0)),
            int(usage.get("completion_tokens", 0)),
        )

    return reflect


# --------------------------------------------------------------------------- builder


@dataclass
class Teacher:
    policy: Any
    judge: Any
    reflector: Any
    labels: OracleLabels | None  # expert labels of visited states (offline suites)

    def forget(self, task: str, seed: int) -> None:
        if self.labels is not None:
            self.labels.forget(task, seed)


def build_teacher(spec: Any, suite: Any) -> Teacher:
    """The collect stage's teacher policy, judge and reflector, from the spec."""
    from rmsweb.agents.build import prompt_config

    c = spec.collect
    tasks = list(suite.task_ids())
    experts = {t: suite.expert(t) for t in tasks}
    has_oracle = all(e is not None for e in experts.values())
    labels = OracleLabels(experts) if has_oracle else None
    teacher_spec = c.teacher
    if teacher_spec.kind == "expert":
        from rmsweb.agents.build import expert_policy

        expert_policy(suite, tasks)  # raises a clear error when an expert is missing
        assert labels is not None
        policy: Any = MistakenExpert(
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
    judge = oracle_judge(labels, c.detour_slack) if labels else reward_judge
    return Teacher(policy, judge, reflector, labels)
