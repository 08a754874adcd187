"""The scripted expert with a mistake model: the offline stand-in for an LLM teacher.

The suite's expert knows the acceptable actions of any state (rmsweb.env.types.Expert).
This policy acts like a fallible teacher built on it:

1. Per attempt it may plan one task-breaking error at rate `error_rate`, its kind
   drawn by the kinds' rates (`error_kinds`, each kind a small function below:
   distractor_click, wrong_field, wrong_option, premature_stop, literal_value,
   one_field_short, wrong_label), and one detour (irrelevant click, scroll, scroll
   down and back up) at rate `detour_rate`, each at a step drawn from the first
   `max_mistake_step` steps. A plan whose step never comes (the episode ended
   earlier) is no mistake; a kind that does not fit the state is none either, except
   the first four, for which a distractor click stands in. Some kinds leave a belief
   behind (literal_value: the field holds the asked value; one_field_short: the
   skipped field is filled; wrong_label: the right field got the value): the expert
   then plans from the page as the teacher believes it, so those mistakes do not heal
   themselves. UNTARGETED names the kinds no rule of the rule critic was written for.
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
4. Habits (`habits`, off unless set): wasted steps the teacher takes in the same
   states every time, as an LLM teacher does, where detours are drawn per attempt.
   A state kind is the task, the step of the task (the expert actions taken so far),
   the type of the expert's next action and its element's role; no episode seed. Each
   has at most one habit: of the kinds that fit it, one drawn by a hash of (seed, state
   kind), which fires when a second hash is below the habit rate. So the same state
   kind of a task shows the same habit in every episode, attempt and blind retry, and
   the state kinds at a lower rate are among those at a higher one. The kinds
   (HABIT_KINDS): inspect (click a field before filling or selecting it), retype (fill
   a field again with the same value), detour_open (click a plain-text element it does
   not need, a label or a heading, before a click) and scroll_first (scroll down
   before the attempt's first action). A habit yields to a planned mistake or detour
   at the same step. A followed note (3.) that calls the habit's action wrong drops it on the
   retry, whatever step the note names: dropping earlier wasted steps moves the later
   ones, and a teacher told "Step 5: scrolled down; it failed" knows the scroll when it
   comes. A note not followed leaves the habit in place.
5. No oracle labels are read: the acceptable actions come from the expert itself.

Everything is deterministic per (seed, task, task seed, attempt), so collection
reruns give the same data and `retry: none` equals plain collection. Without habits
(None or rate 0) no habit draw is made and the teacher acts exactly as before them.
"""

from __future__ import annotations

import hashlib
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

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


Replan = Callable[[Mapping[str, str]], list[Action]]


@dataclass(frozen=True)
class Mistake:
    """A wrong action, and what the teacher believes fields hold after it (element id ->
    value): a belief the teacher never checks, so the mistake does not heal itself."""

    action: Action
    believe: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Context:
    """What a mistake kind sees: the goal, the page, the expert's acceptable actions, a
    seeded draw, and the expert's plan on the page as the teacher would believe it."""

    instruction: str
    obs: Observation
    acceptable: list[Action]
    rng: random.Random
    replan: Replan | None = None

    @property
    def good(self) -> set[str | None]:
        return {a.target for a in self.acceptable}


def believe(obs: Observation, values: Mapping[str, str]) -> Observation:
    """The page with the given field values, as a teacher that believes them sees it."""
    if not values:
        return obs
    elements = {
        i: replace(el, value=values[i]) if i in values else el for i, el in obs.elements.items()
    }
    return replace(obs, elements=elements)


# ---------------------------------------------------------------- mistake kinds
# Each kind: (Context) -> Mistake | None (None: the kind does not fit this state).


def distractor_click(ctx: Context) -> Mistake | None:
    """A click on a clickable element the expert would not click."""
    els = ctx.obs.elements.items()
    candidates = [e for e, el in els if el.role in CLICKABLE and e not in ctx.good]
    return Mistake(click(ctx.rng.choice(candidates))) if candidates else None


def premature_stop(ctx: Context) -> Mistake | None:
    """Stop before the task is done."""
    return Mistake(stop())


def wrong_field(ctx: Context) -> Mistake | None:
    """The value the expert would type, into another text field (the expert still fills
    the right one later: it heals unless the wrong field matters)."""
    fills = [a for a in ctx.acceptable if a.type == "fill"]
    els = ctx.obs.elements.items()
    others = [e for e, el in els if el.role in TEXT_FIELDS and e not in ctx.good]
    if fills and others:
        return Mistake(fill(ctx.rng.choice(others), fills[0].text or ""))
    return None


def wrong_option(ctx: Context) -> Mistake | None:
    """Another option of the select the expert would set (the expert resets it later)."""
    for a in ctx.acceptable:
        el = ctx.obs.elements.get(a.target or "")
        if a.type == "select" and el and len(el.options) > 1:
            return Mistake(
                select(a.target or "", ctx.rng.choice([o for o in el.options if o != a.text]))
            )
    return None


def _tokens(instruction: str) -> list[str]:
    """Candidate literal values of a goal: its quoted texts and its words."""
    quoted = [a or b for a, b in re.findall(r'"([^"]*)"|“([^”]*)”', instruction)]
    words = [w.strip(".,;:!?()'\"") for w in instruction.split()]
    return [t for t in (*quoted, *words) if t]


def _same_content(literal: str, asked: str) -> bool:
    """`asked` is a transformation of `literal` (case, or the same digits reordered)."""
    if literal == asked:
        return False
    if literal.casefold() == asked.casefold():
        return True
    digits = sorted(c for c in literal if c.isdigit())
    return bool(digits) and digits == sorted(c for c in asked if c.isdigit())


def literal_value(ctx: Context) -> Mistake | None:
    """Type the goal's text literally where the expert types a transformation of it
    (another case, another date format), and believe the field holds the asked value."""
    for a in ctx.acceptable:
        if a.type != "fill" or not a.text:
            continue
        for t in _tokens(ctx.instruction):
            if _same_content(t, a.text):
                return Mistake(fill(a.target or "", t), {a.target or "": a.text})
    return None


def one_field_short(ctx: Context) -> Mistake | None:
    """Skip a field the expert would fill, believing it filled: the teacher goes on
    with the rest of the form (the next field, or the submit) one field short."""
    if ctx.replan is None:
        return None
    for a in ctx.acceptable:
        if a.type != "fill" or not a.target:
            continue
        belief = {a.target: a.text or ""}
        after = [b for b in ctx.replan(belief) if b.target != a.target]
        if after:
            return Mistake(after[0], belief)
    return None


def wrong_label(ctx: Context) -> Mistake | None:
    """The expert's action on a plausible element of the same kind with another label
    (another option, another text field, another element of the same role), taken for
    the right one: the teacher believes the right field holds its value."""
    if not ctx.acceptable:
        return None
    a = ctx.acceptable[0]
    el = ctx.obs.elements.get(a.target or "")
    if el is None:
        return None
    if a.type == "select" and len(el.options) > 1:
        other = ctx.rng.choice([o for o in el.options if o != a.text])
        return Mistake(select(el.id, other), {el.id: a.text or ""})
    same = [
        e.id
        for e in ctx.obs.elements.values()
        if e.role == el.role and e.id != el.id and e.name != el.name
    ]
    if not same:
        return None
    pick = ctx.rng.choice(same)
    if a.type == "fill":
        return Mistake(fill(pick, a.text or ""), {el.id: a.text or ""})
    if a.type == "click":
        return Mistake(click(pick))
    return None


ERROR_KINDS: dict[str, Callable[[Context], Mistake | None]] = {
    "distractor_click": distractor_click,
    "wrong_field": wrong_field,
    "wrong_option": wrong_option,
    "premature_stop": premature_stop,
    "literal_value": literal_value,
    "one_field_short": one_field_short,
    "wrong_label": wrong_label,
}
# The first model's kinds: a distractor click stands in when they do not fit the state.
FALLS_BACK = frozenset({"distractor_click", "wrong_field", "wrong_option", "premature_stop"})
# The kinds no critic rule was written for (rmsweb.judge.critic): the rule critic's
# rules target a click the goal does not ask for (distractor_click), a fill into a field
# the goal labels for another value or of a value the goal does not give (wrong_field),
# a submit before the goal's values are in (one_field_short, where the goal quotes the
# values), and a final stop (premature_stop). Nothing in it reads selects or knows a
# value can be a transformation of the goal's text.
UNTARGETED = frozenset({"wrong_option", "literal_value", "wrong_label"})


# ---------------------------------------------------------------- habits
# Each kind: the wasted step before the expert's action (retype: after it, the same
# fill again), in the states it fits. A state (a step of the task) has one habit at most.
HABIT_KINDS = ("inspect", "retype", "detour_open", "scroll_first")
SELECTS = {"combobox", "listbox"}


@dataclass(frozen=True)
class Habits:
    """Which habits the teacher has, and the share of state kinds each fires in."""

    rate: float
    kinds: tuple[str, ...] = HABIT_KINDS

    def __post_init__(self) -> None:
        unknown = sorted(set(self.kinds) - set(HABIT_KINDS))
        if unknown:
            raise ValueError(f"unknown habit kinds {unknown}; known: {list(HABIT_KINDS)}")

    @property
    def on(self) -> bool:
        return self.rate > 0 and bool(self.kinds)

    @staticmethod
    def of(spec: Any) -> Habits | None:
        """From a spec's `collect.teacher.habits` section (None: no habits)."""
        return None if spec is None else Habits(float(spec.rate), tuple(spec.kinds))


def state_kind(task: str, progress: int, action: Action, obs: Observation) -> tuple:
    """What a habit keys on: the task, the step of the task (expert actions so far), and
    the type of the expert's next action and its element's role; never the episode seed
    or what only that seed shows (names, values)."""
    el = obs.elements.get(action.target or "")
    return (task, progress, action.type, el.role if el is not None else "")


def _plain_text(obs: Observation, action: Action) -> list[str]:
    """Plain-text elements (labels, headings) the action does not target, in page order."""
    return [e for e, x in obs.elements.items() if x.role in STATIC and e != action.target]


def habit_fits(habit: str, progress: int, action: Action, obs: Observation) -> bool:
    """Does `habit` fit the state where the expert would take `action`?

    scroll_first: the attempt's first action; inspect: a fill or select of a field that
    is not focused; retype: a fill; detour_open: a click, on a page with plain text."""
    el = obs.elements.get(action.target or "")
    if habit == "scroll_first":
        return progress == 0
    if habit == "inspect":
        return (
            action.type in ("fill", "select")
            and el is not None
            and el.role in TEXT_FIELDS | SELECTS
            and "focused" not in el.states
        )
    if habit == "retype":
        return action.type == "fill"
    if habit == "detour_open":
        return action.type == "click" and bool(_plain_text(obs, action))
    return False


def habit_action(habit: str, action: Action, obs: Observation, pick: random.Random) -> Action:
    """The wasted step of a habit that fits (habit_fits) before the expert's `action`;
    retype's is the same fill, taken again after it."""
    if habit == "scroll_first":
        return scroll("down")
    if habit == "inspect":
        return click(action.target or "")
    if habit == "detour_open":
        return click(pick.choice(_plain_text(obs, action)))
    return action


@dataclass
class HabitState:
    """An attempt's progress through its task, for the habits' state kinds."""

    progress: int = 0  # expert actions taken so far: the step of the task
    decided: int = -1  # the last progress whose habit was decided (taken or not)
    retype: Action | None = None  # the fill to take again at the next step
    steps: list[tuple[int, str]] = field(default_factory=list)  # (step, habit) taken


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
        error_kinds: Sequence[str] | Mapping[str, float],
        detour_kinds: Sequence[str],
        persistence: float = 0.8,
        adherence: float = 0.9,
        seed: int = 0,
        name: str = "expert",
        max_mistake_step: int = 3,
        habits: Habits | None = None,
    ) -> None:
        self.experts = dict(experts)
        self.error_rate = error_rate
        self.detour_rate = detour_rate
        # Each kind's rate: its share of error_rate (a list: equal shares).
        weights = (
            error_kinds if isinstance(error_kinds, Mapping) else dict.fromkeys(error_kinds, 1.0)
        )
        unknown = sorted(set(weights) - set(ERROR_KINDS))
        if unknown:
            raise ValueError(f"unknown mistake kinds {unknown}; known: {sorted(ERROR_KINDS)}")
        self.error_kinds = [k for k, w in weights.items() if w > 0]
        self.error_weights = [float(weights[k]) for k in self.error_kinds]
        self.detour_kinds = list(detour_kinds)
        self.persistence = persistence
        self.adherence = adherence
        self.seed = seed
        self.name = name
        self.max_mistake_step = max_mistake_step
        # The rest of a detour that takes several steps, per (task, seed, attempt).
        self._pending: dict[tuple[str, int, int], list[Action]] = {}
        # What the teacher believes fields hold after a mistake it does not notice (a
        # literal value it takes for the asked one, a field it thinks it filled), per
        # (task, seed, attempt): its expert then plans from that belief, not the page.
        self._beliefs: dict[tuple[str, int, int], dict[str, str]] = {}
        # The task-breaking mistake each attempt made: (step, kind).
        self.injected: dict[tuple[str, int, int], tuple[int, str]] = {}
        self.habits = habits
        # Each attempt's progress through its task, and the habit steps it took.
        self._habit_state: dict[tuple[str, int, int], HabitState] = {}

    # ------------------------------------------------------------------ the plan

    def _draw(self, task: str, seed: int, source: int) -> MistakePlan:
        rng = _rng(self.seed, task, seed, "plan", source)
        err = rng.random() < self.error_rate and bool(self.error_kinds)
        det = rng.random() < self.detour_rate
        return MistakePlan(
            rng.randrange(self.max_mistake_step) if err else None,
            self._kind(rng) if err else None,
            rng.randrange(self.max_mistake_step) if det else None,
            rng.choice(self.detour_kinds) if det else None,
            source,
        )

    def _kind(self, rng: random.Random) -> str:
        if len(set(self.error_weights)) == 1:  # equal shares: the first model's draw
            return rng.choice(self.error_kinds)
        return rng.choices(self.error_kinds, weights=self.error_weights)[0]

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
        return [a for a in self._followed(request) if a.applies(request.step)]

    def _followed(self, request: ActRequest) -> list[Advice]:
        """Every note of the reflections so far that this attempt follows, at any step."""
        out = []
        for r, text in enumerate(request.reflections):
            for n, advice in enumerate(parse_advice(text)):
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
        key = (request.task_id, request.seed, request.attempt)
        if request.step == 0:
            # A rerun of the episode starts afresh.
            self._pending.pop(key, None)
            self._beliefs.pop(key, None)
            self.injected.pop(key, None)
            self._habit_state.pop(key, None)
        beliefs = self._beliefs.setdefault(key, {})
        obs = request.observation

        def replan(believed: Mapping[str, str]) -> list[Action]:
            """The expert's acceptable actions on the page as the teacher believes it is."""
            seen = believe(obs, {**beliefs, **believed})
            return list(expert.acceptable_actions(request.instruction, seen, request.history))

        acceptable = replan({})
        avoid = self.heeded(request)

        def allowed(a: Action) -> bool:
            return not any(advice.forbids(a, obs) for advice in avoid)

        queued = self._pending.get(key)
        own = False  # the expert's own action, which a habit may precede or repeat
        if queued and allowed(queued[0]):
            action = queued.pop(0)
        else:
            self._pending.pop(key, None)
            options, error = self._options(request, acceptable, replan)
            chosen = next((o for o in options if allowed(o[0])), options[0])
            action = chosen[0]
            own = len(chosen) == 1 and action in acceptable
            if len(chosen) > 1:
                self._pending[key] = list(chosen[1:])
            if error is not None and chosen is error[0]:
                mistake, kind = error[1], error[2]
                beliefs.update(mistake.believe)
                self.injected[key] = (request.step, kind)
        if self.habits is not None and self.habits.on:
            action = self._habit(request, key, action, own)
        return ActResult(text=format_action(action), latency_s=time.perf_counter() - t)

    def _habit(
        self, request: ActRequest, key: tuple[str, int, int], action: Action, own: bool
    ) -> Action:
        """The habit step the teacher takes instead of `action`, or `action` itself.

        `own`: `action` is the expert's (no planned mistake or detour at this step); only
        then does a habit fire. A state (a step of the task) has at most one habit: of
        the kinds that fit it, the one its state kind draws, taken when the kind's draw
        is below the rate. Counts the expert's actions taken (the step of the task)."""
        assert self.habits is not None
        hs = self._habit_state.setdefault(key, HabitState())
        retype, hs.retype = hs.retype, None
        if not own:
            return action
        obs = request.observation

        def dropped(wasted: Action) -> bool:
            # A followed note calling this action wrong, at whatever step it names.
            return any(a.forbids(wasted, obs) for a in self._followed(request))

        if retype is not None and not dropped(retype):
            hs.steps.append((request.step, "retype"))
            return retype
        progress = hs.progress
        if hs.decided < progress:
            hs.decided = progress
            habit = self._habit_of(state_kind(request.task_id, progress, action, obs), action, obs)
            if habit == "retype":
                hs.retype = action
            elif habit is not None:
                kind = state_kind(request.task_id, progress, action, obs)
                wasted = habit_action(habit, action, obs, _rng(self.seed, "habit-pick", *kind))
                if not dropped(wasted):
                    hs.steps.append((request.step, habit))
                    return wasted
        hs.progress += 1
        return action

    def _habit_of(self, kind: tuple, action: Action, obs: Observation) -> str | None:
        """The habit of this state kind, or None: the same answer in every episode."""
        assert self.habits is not None
        fitting = [h for h in self.habits.kinds if habit_fits(h, kind[1], action, obs)]
        if not fitting:
            return None
        habit = _rng(self.seed, "habit-kind", *kind).choice(sorted(fitting))
        return habit if _rng(self.seed, "habit", habit, *kind).random() < self.habits.rate else None

    def habit_steps(self, task: str, seed: int, attempt: int) -> list[tuple[int, str]]:
        """The habit steps an attempt took: (step, habit). For measurement, never shown to
        the reflector."""
        hs = self._habit_state.get((task, seed, attempt))
        return list(hs.steps) if hs is not None else []

    def mistake_of(self, task: str, seed: int, attempt: int) -> tuple[int, str] | None:
        """The task-breaking mistake this attempt made: (step, kind), or None. For grading
        after the fact (the critic's precision per kind); never shown to the reflector."""
        return self.injected.get((task, seed, attempt))

    def _options(
        self, request: ActRequest, acceptable: list[Action], replan: Replan
    ) -> tuple[list[list[Action]], tuple[list[Action], Mistake, str] | None]:
        """What the teacher would do at this step, best first; a detour spans several steps.

        First its planned mistake or detour for this step, then the acceptable actions
        (stop when there are none), then, reached only when reflections forbid all of
        those, a plausible wrong click and stop. Also returns the planned mistake's
        option (the list in `options`), its Mistake and kind, when there is one.
        """
        plan = self.plan(request.task_id, request.seed, request.attempt)
        obs, step = request.observation, request.step
        rng = _rng(self.seed, request.task_id, request.seed, "act", plan.source, step)
        options: list[list[Action]] = []
        error = None
        if plan.error_step == step:
            ctx = Context(request.instruction, obs, acceptable, rng, replan)
            made = self._error(plan.error_kind or "", ctx)
            if made is not None:
                wrong, kind = made
                options.append([wrong.action])
                error = (options[-1], wrong, kind)
        if plan.detour_step == step:
            detour = self._detour(plan.detour_kind or "", obs, acceptable, rng)
            if detour:
                options.append(detour)
        # The expert's own choice; with nothing to suggest it stops (as ExpertPolicy).
        options += [[a] for a in acceptable] or [[stop()]]
        # Forced alternatives, reached only when reflections forbid all of the above.
        fallback_rng = _rng(self.seed, request.task_id, request.seed, "fallback", step)
        other = distractor_click(Context(request.instruction, obs, acceptable, fallback_rng))
        if other is not None:
            options.append([other.action])
        options.append([stop()])
        return options, error

    def _error(self, kind: str, ctx: Context) -> tuple[Mistake, str] | None:
        """The planned mistake of this kind, and the kind actually made."""
        fn = ERROR_KINDS.get(kind)
        made = fn(ctx) if fn is not None else None
        if made is None and kind in FALLS_BACK:
            # The kinds of the first mistake model fall back to a distractor click when
            # they do not fit the state; the later ones are then no mistake.
            made, kind = distractor_click(ctx), "distractor_click"
        return (made, kind) if made is not None else None

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
        self._beliefs.clear()
        self._habit_state.clear()
