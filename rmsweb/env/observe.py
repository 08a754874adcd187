"""Observations: one DOM walk in the page (observe.js), rendered to a compact text here.

The text is what tiny models read in ~512-token prompts, so it has one line per element
a user could act on or read, and nothing else:

    [3] text "Enter the password and press Submit"
    [4] textbox "Password" type=password value="x1" focused
    [7] button "Submit"
    [9] combobox value="Alice" options=["Alice", "Bob"]
      [12] link "nested item"

Ids are small integers injected into the DOM (attribute ID_ATTR): they stay the same
while an element lives and are never reused within an episode.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from rmsweb.env.types import Box, Element, Observation

ID_ATTR = "data-rmsweb-id"
MAX_NAME = 100  # characters of one name or value; longer ones end in "…"
MAX_ELEMENTS = 400  # lines of one observation; a huge page is cut, with a note
MAX_DEPTH = 8
# How long an observation waits for images that are still loading. Icons without text
# (MiniWoB social-media's Like and "more") are only on the page once their image has a
# size; at 1 s, a busy machine's first fetch of them could miss it, and the page then
# showed no icons at all (the expert stopped on step 1). Only a still-loading image
# waits, so a page whose images are in costs nothing.
IMAGE_WAIT_MS = 5000
# Input types worth telling the model about (they change what `fill` accepts).
SHOWN_INPUT_TYPES = {"password", "date", "time", "number", "email", "datetime-local", "month"}


@cache
def script(name: str) -> str:
    """The source of a page-side script shipped next to this module."""
    return resources.files("rmsweb.env").joinpath(name).read_text()


@dataclass(slots=True)
class RawObservation:
    url: str
    title: str
    elements: list[Element]
    next_id: int
    truncated: bool


def parse_raw(data: dict[str, Any]) -> RawObservation:
    elements = []
    for rec in data["elements"]:
        eid, role, name, value, states, options, x, y, w, h, depth, tag = rec
        elements.append(
            Element(
                id=eid,
                role=role,
                name=name,
                value=value,
                box=Box(x, y, w, h),
                depth=min(int(depth), MAX_DEPTH),
                states=tuple(states),
                options=tuple(options),
                tag=tag,
            )
        )
    return RawObservation(
        url=data["url"],
        title=data["title"],
        elements=elements,
        next_id=int(data["next"]),
        truncated=bool(data["truncated"]),
    )


def _q(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def render_line(e: Element) -> str:
    parts = [f"{'  ' * e.depth}[{e.id}] {e.role}"]
    if e.name:
        parts.append(_q(e.name))
    input_type = e.tag.partition(":")[2]
    if input_type in SHOWN_INPUT_TYPES:
        parts.append(f"type={input_type}")
    if e.value:
        parts.append(f"value={_q(e.value)}")
    parts.extend(e.states)
    if e.options:
        parts.append("options=[" + ", ".join(_q(o) for o in e.options) + "]")
    return " ".join(parts)


def render_text(elements: list[Element], truncated: bool = False) -> str:
    lines = [render_line(e) for e in elements]
    if truncated:
        lines.append(f"(page cut after {len(elements)} elements)")
    return "\n".join(lines)


def observe_args(next_id: int, exclude: tuple[str, ...]) -> dict[str, Any]:
    return {
        "attr": ID_ATTR,
        "next": next_id,
        "exclude": list(exclude),
        "maxlen": MAX_NAME,
        "maxElements": MAX_ELEMENTS,
        "imageWaitMs": IMAGE_WAIT_MS,
    }


def build_observation(
    raw: RawObservation, screenshot_png: bytes | None, last_error: str | None
) -> Observation:
    return Observation(
        url=raw.url,
        title=raw.title,
        text=render_text(raw.elements, raw.truncated),
        elements={e.id: e for e in raw.elements},
        screenshot_png=screenshot_png,
        last_error=last_error,
    )
