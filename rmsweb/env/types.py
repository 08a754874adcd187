"""Value types shared by the environment, policies, suites and judges (no browser imports).

The lowest layer that uses them owns them: the observation the browser produces, the
request a policy answers (`ActRequest`, with the episode's `HistoryItem`s), an `Action`
with its canonical text (`format_action`; the parser and comparison are in actions.py,
which re-exports these) and the `Expert` protocol (a scripted labeller of states).
Agents, suites, judges and the rollout all import these from here, so none of them has
to import another; this module imports nothing of rmsweb (actions.py imports it, not
the other way round).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

# --------------------------------------------------------------------------- actions

ActionType = Literal[
    "click", "fill", "select", "press", "scroll", "goto", "go_back", "answer", "stop", "click_xy"
]


@dataclass(slots=True)
class ActionRow:
    """An action as the steps table stores it (a struct column): type plus its arguments."""

    type: str  # click, fill, select, press, scroll, goto, go_back, answer, stop, click_xy
    target: str | None = None  # element id as text (ids are strings in the observation)
    text: str | None = None  # fill/select/press/scroll/goto/answer argument
    x: float | None = None  # click_xy
    y: float | None = None


@dataclass(frozen=True, slots=True)
class Action:
    """One action. Which fields are set depends on `type` (see actions.SIGNATURES)."""

    type: ActionType
    target: str | None = None  # element id (digits), for click/fill/select
    text: str | None = None  # the string argument of fill/select/press/scroll/goto/answer
    x: float | None = None  # click_xy
    y: float | None = None

    def to_row(self) -> ActionRow:
        return ActionRow(type=self.type, target=self.target, text=self.text, x=self.x, y=self.y)

    @staticmethod
    def from_row(row: ActionRow) -> Action:
        return Action(type=row.type, target=row.target, text=row.text, x=row.x, y=row.y)  # type: ignore[arg-type]

    def __str__(self) -> str:
        return format_action(self)


# --------------------------------------------------------------------------- format


def _quote(s: str) -> str:
    # JSON string escaping: the parser reads these escapes back exactly.
    return json.dumps(s, ensure_ascii=False)


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else repr(float(v))


def format_action(a: Action) -> str:
    """The canonical text of an action, e.g. `fill(3, "Bob")`."""
    if a.type in ("click",):
        return f"click({a.target})"
    if a.type in ("fill", "select"):
        return f"{a.type}({a.target}, {_quote(a.text or '')})"
    if a.type in ("press", "scroll", "goto", "answer"):
        return f"{a.type}({_quote(a.text or '')})"
    if a.type in ("go_back", "stop"):
        return f"{a.type}()"
    if a.type == "click_xy":
        return f"click_xy({_num(a.x or 0.0)}, {_num(a.y or 0.0)})"
    raise ValueError(f"unknown action type {a.type!r}")


# --------------------------------------------------------------------------- page


@dataclass(frozen=True, slots=True)
class Box:
    x: float
    y: float
    width: float
    height: float

    def contains(self, px: float, py: float) -> bool:
        return self.x <= px <= self.x + self.width and self.y <= py <= self.y + self.height


@dataclass(frozen=True, slots=True)
class Element:
    """One element of the accessibility text, addressed by its injected id."""

    id: str
    role: str
    name: str
    value: str | None = None
    box: Box | None = None
    depth: int = 0
    states: tuple[str, ...] = ()  # checked, selected, focused, disabled, expanded ...
    options: tuple[str, ...] = ()  # <select> options
    tag: str = ""


@dataclass(slots=True)
class Observation:
    """What a policy sees at one step."""

    url: str
    title: str
    text: str  # compact accessibility text: `[12] button "Submit"` lines, nested by indent
    elements: dict[str, Element] = field(default_factory=dict)
    screenshot_png: bytes | None = None
    last_error: str | None = None  # error of the previous action, if any


@dataclass(slots=True)
class HistoryItem:
    """One earlier step of the episode as the prompt shows it."""

    output_text: str
    action_text: str | None  # formatted action, None if the output did not parse
    error: str | None  # env error of executing it


@dataclass(slots=True)
class ActRequest:
    """What a policy is asked at one step."""

    task_id: str
    instruction: str
    observation: Observation
    history: list[HistoryItem] = field(default_factory=list)
    reflections: list[str] = field(default_factory=list)  # teachers only (recipe part R)
    seed: int = 0  # episode seed: lets stochastic policies be reproducible
    step: int = 0
    attempt: int = 0


class Expert(Protocol):
    """A scripted solution that sees only what a policy sees.

    `acceptable_actions` labels any state (also ones a different policy reached) with
    the actions that keep the task solvable on the shortest path, best first; an empty
    list means the expert has nothing to suggest (e.g. the task is already over).
    """

    def acceptable_actions(
        self, instruction: str, observation: Observation, history: Sequence[HistoryItem]
    ) -> list[Action]: ...
