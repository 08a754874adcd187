"""Value types the environment hands to policies (no browser imports here)."""

from __future__ import annotations

from dataclasses import dataclass, field


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
