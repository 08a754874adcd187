"""Value types shared by the environment, policies, suites and judges (no browser imports).

The lowest layer that uses them owns them: the observation the browser produces, the
request a policy answers (`ActRequest`, with the episode's `HistoryItem`s) and the
`Expert` protocol (a scripted labeller of states). Agents, suites, judges and the
rollout all import these from here, so none of them has to import another.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from rmsweb.env.actions import Action


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
