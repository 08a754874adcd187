"""What a trajectory alone shows: the pages it saw and the steps that did nothing.

Used by the judge (a success with wasted steps took a detour) and the rule critic
(it names them). Reads only what any reflector could: each step's observation text
(`[12] button "Submit" value="x" focused` lines), its action and its error. No
oracle, no expert.

Wasted steps (`wasted_steps`), each a `Finding` with the steps and why:
- failed: the action raised an environment error ("cannot scroll down any further");
- unparseable: the output was not an action;
- back_and_forth: two actions after which the page is as before them, the first
  having changed it or the second being its inverse (a box checked then unchecked,
  scroll down then up); one finding over both steps;
- repeat: the same action twice in a row, the first having changed nothing;
- no_change: an action after which the page did not change (focus aside: clicking
  plain text only moves the focus);
- overwritten: a fill whose value a later fill of the same field replaced with a
  different one (the field's last value is what the form used).
The last step has no next page, so no_change and back_and_forth cannot be seen there.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from rmsweb.env.actions import TERMINAL_ACTIONS, Action
from rmsweb.store.rows import EpisodeRecord, StepRow

_LINE = re.compile(r"^\s*\[(\d+)\]\s+(\S+)(.*)$")
_JSON_STR = r'"(?:[^"\\]|\\.)*"'
_NAME = re.compile(rf"^\s*({_JSON_STR})")
_VALUE = re.compile(rf"\bvalue=({_JSON_STR})")
_OPTIONS = re.compile(r"\boptions=\[.*\]\s*$")


@dataclass(frozen=True)
class PageElement:
    id: str
    role: str
    name: str
    value: str
    states: tuple[str, ...]


def parse_page(obs_text: str) -> dict[str, PageElement]:
    """The elements of an observation text, by id, in page order."""
    out: dict[str, PageElement] = {}
    for line in obs_text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        el_id, role, rest = m.groups()
        name = value = ""
        if n := _NAME.match(rest):
            name = json.loads(n.group(1))
            rest = rest[n.end() :]
        if v := _VALUE.search(rest):
            value = json.loads(v.group(1))
            rest = rest[: v.start()] + rest[v.end() :]
        rest = _OPTIONS.sub("", rest)
        states = tuple(w for w in rest.split() if "=" not in w)
        out[el_id] = PageElement(el_id, role, name, value, states)
    return out


def page_state(page: dict[str, PageElement]) -> tuple:
    """What matters of a page for "did anything change": everything but the focus."""
    return tuple(
        (e.id, e.role, e.name, e.value, tuple(s for s in e.states if s != "focused"))
        for e in page.values()
    )


@dataclass(frozen=True)
class Finding:
    steps: tuple[int, ...]
    kind: str  # failed, unparseable, back_and_forth, repeat, no_change, overwritten
    detail: str = ""  # the error text, or the value that replaced an overwritten fill


def action_of(step: StepRow) -> Action | None:
    return Action.from_row(step.action) if step.action else None


def wasted_steps(rec: EpisodeRecord) -> list[Finding]:
    """Steps that did not move the task forward, from the trajectory alone (see module doc)."""
    steps = rec.steps
    actions = [action_of(s) for s in steps]
    states = [page_state(parse_page(s.obs_text)) for s in steps]
    findings: dict[int, Finding] = {}
    i = 0
    while i < len(steps):
        a, st = actions[i], steps[i]
        has_next = i + 1 < len(steps) and (a is None or a.type not in TERMINAL_ACTIONS)
        b = actions[i + 1] if i + 1 < len(steps) else None
        if a is None:
            findings[i] = Finding((i,), "unparseable", st.parse_error or "")
        elif (
            i + 2 < len(steps)
            and b is not None
            and b.type not in TERMINAL_ACTIONS
            and states[i + 2] == states[i]
            and (states[i + 1] != states[i] or _inverse(a, b))
        ):
            findings[i] = Finding((i, i + 1), "back_and_forth")
            i += 2
            continue
        elif (
            b is not None
            and _same_action(a, b)
            and states[i + 1] == states[i]
            and not (steps[i + 1].done and not steps[i + 1].env_error)
        ):
            findings[i] = Finding((i, i + 1), "repeat")
            i += 2
            continue
        elif st.env_error:
            findings[i] = Finding((i,), "failed", st.env_error)
        elif has_next and states[i + 1] == states[i]:
            findings[i] = Finding((i,), "no_change")
        i += 1
    covered = {s for f in findings.values() for s in f.steps}
    for i, replaced_by in _overwritten_fills(steps).items():
        if i not in covered:
            findings[i] = Finding((i,), "overwritten", replaced_by)
    return [findings[i] for i in sorted(findings)]


def _same_action(a: Action, b: Action) -> bool:
    return (a.type, a.target, a.text) == (b.type, b.target, b.text)


_OPPOSITE = {"up": "down", "down": "up", "left": "right", "right": "left"}


def _inverse(a: Action, b: Action) -> bool:
    """Two actions that undo each other whatever the page shows (scroll down, then up)."""
    return a.type == b.type == "scroll" and _OPPOSITE.get(a.text or "") == b.text


def _overwritten_fills(steps: list[StepRow]) -> dict[int, str]:
    """Fill steps whose value differs from the field's last filled value: step -> last value."""
    last: dict[str, str] = {}
    for st in steps:
        a = action_of(st)
        if a is not None and a.type == "fill" and not st.env_error and a.target:
            last[a.target] = a.text or ""
    out = {}
    for i, st in enumerate(steps):
        a = action_of(st)
        filled = a is not None and a.type == "fill" and not st.env_error and a.target
        if filled and (a.text or "") != last[a.target]:
            out[i] = last[a.target]
    return out


def wasted_step_ids(rec: EpisodeRecord) -> tuple[int, ...]:
    return tuple(sorted({s for f in wasted_steps(rec) for s in f.steps}))
