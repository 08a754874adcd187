"""Helpers the MiniWoB experts share: reading instructions, finding elements, history.

Experts read only the policy's inputs: the instruction, the Observation (elements in
document order) and the history (their own or another policy's earlier actions).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from rmsweb.env.actions import Action, ParseError, parse_action
from rmsweb.env.types import Element, HistoryItem, Observation

Solver = Callable[[str, Observation, Sequence[HistoryItem]], list[Action]]
TEXT_FIELDS = ("textbox", "searchbox")


@dataclass(frozen=True)
class ScriptedExpert:
    """An Expert backed by a function of (instruction, observation, history)."""

    task_id: str
    solve: Solver

    def acceptable_actions(
        self, instruction: str, observation: Observation, history: Sequence[HistoryItem]
    ) -> list[Action]:
        return self.solve(instruction, observation, history)


def quoted(instruction: str) -> list[str]:
    """The "double-quoted" parts of an instruction, in order."""
    return re.findall(r'"([^"]*)"', instruction)


def elements(obs: Observation) -> list[Element]:
    """Elements in document order (the order of the observation's lines)."""
    return list(obs.elements.values())


def find(
    obs: Observation,
    role: str | Iterable[str] | None = None,
    name: str | None = None,
    *,
    fold: bool = False,
) -> list[Element]:
    """Elements with the given role(s) and exact name (case-insensitive with fold)."""
    roles = {role} if isinstance(role, str) else set(role) if role is not None else None
    out = []
    for e in obs.elements.values():
        if roles is not None and e.role not in roles:
            continue
        if name is not None and not _same(e.name, name, fold):
            continue
        out.append(e)
    return out


def _same(a: str, b: str, fold: bool) -> bool:
    return a.casefold() == b.casefold() if fold else a == b


def enabled(els: Iterable[Element]) -> list[Element]:
    return [e for e in els if "disabled" not in e.states]


def text_fields(obs: Observation) -> list[Element]:
    return [e for e in elements(obs) if e.role in TEXT_FIELDS]


def value(e: Element) -> str:
    return e.value or ""


def clicked_ids(history: Sequence[HistoryItem]) -> list[str]:
    """Ids of the elements the episode clicked without an error, in order."""
    out = []
    for h in history:
        if h.action_text is None or h.error:
            continue
        a = parse_action(h.action_text)
        if not isinstance(a, ParseError) and a.type == "click" and a.target:
            out.append(a.target)
    return out


def after(obs: Observation, anchor: Element) -> list[Element]:
    """The elements that follow `anchor` in document order."""
    els = elements(obs)
    return els[els.index(anchor) + 1 :]
