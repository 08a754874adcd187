"""Failure modes (DESIGN.md §1 M): which kind of mistake an unacceptable action is.

Written rules, checked in this order; the first that holds names the mode:

1. parse_error       the output did not parse into an action.
2. navigation_error  the action navigates (goto, go_back) where no acceptable action
                     does, or executing it tried to leave the task's site (the env
                     reported a blocked navigation).
3. premature_answer  the action ends the episode (answer, stop) where no acceptable
                     action does: the task was not done.
4. missed_answer     an acceptable action ends the episode (the task is ready to be
                     answered) and the action does not.
5. loop              the action repeats one the episode already executed.
6. wrong_argument    some acceptable action has the same type and target: only the
                     argument (typed text, option, key, answer) differs.
7. wrong_element     some acceptable action has the same type: the target differs.
8. wrong_type        otherwise (e.g. a click where text had to be typed).

Ordering rationale: the episode-level kinds (ending too early or too late, leaving
the site, repeating oneself) say more about what to train than the component that
differs, so they win; among components, the closest match names the mistake (a fill
with the right field and the wrong text is a wrong argument, not a wrong element).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rmsweb.env.actions import TERMINAL_ACTIONS, Action, compare, format_action
from rmsweb.env.types import Element, HistoryItem

FAILURE_MODES: tuple[str, ...] = (
    "wrong_element",
    "wrong_type",
    "wrong_argument",
    "premature_answer",
    "missed_answer",
    "loop",
    "parse_error",
    "navigation_error",
)
NAVIGATION_ACTIONS = ("goto", "go_back")


def _blocked_navigation(env_error: str | None) -> bool:
    # rmsweb.env.session reports "navigation to <url> is blocked / was blocked".
    text = (env_error or "").lower()
    return "navigation to" in text and "blocked" in text


def failure_mode(
    action: Action | None,
    acceptable: Sequence[Action],
    history: Sequence[HistoryItem],
    *,
    env_error: str | None = None,
    elements: Mapping[str, Element] | None = None,
) -> str:
    """The failure mode of `action` in a state whose acceptable actions are `acceptable`
    (the action is assumed not acceptable; `history`: the earlier steps of the episode)."""
    if action is None:
        return "parse_error"
    types = {a.type for a in acceptable}
    if (action.type in NAVIGATION_ACTIONS and action.type not in types) or _blocked_navigation(
        env_error
    ):
        return "navigation_error"
    terminal_ok = bool(types & set(TERMINAL_ACTIONS))
    if action.type in TERMINAL_ACTIONS and not terminal_ok:
        return "premature_answer"
    if terminal_ok and action.type not in TERMINAL_ACTIONS:
        return "missed_answer"
    text = format_action(action)
    if any(h.action_text == text for h in history):
        return "loop"
    matches = [compare(action, a, elements=elements) for a in acceptable]
    if any(m.type_ok and m.target_ok for m in matches):
        return "wrong_argument"
    if any(m.type_ok for m in matches):
        return "wrong_element"
    return "wrong_type"
