"""What a live-benchmark judge sees of one episode: the task, the final answer, the
actions taken, the agent's thoughts and the screenshots: one per step and the page
after the last action.

Built from rmsweb's stored episodes (`from_record`) or read from another agent's run
in the Online-Mind2Web layout (om2w_layout.py). The action history excludes the final
`answer(...)`/`stop()`: it is the agent's claim, not an action in the page (the
Online-Mind2Web authors drop it for the same reason), and the answer has its own field.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from rmsweb.env.actions import TERMINAL_ACTIONS, ActionRow, split_thought
from rmsweb.store.rows import EpisodeRecord


@dataclass(frozen=True)
class JudgeInput:
    """One trajectory to judge."""

    episode_id: str
    task_id: str
    task: str  # the goal as the agent was given it
    answer: str | None  # the final answer (None: the agent never answered)
    actions: list[str] = field(default_factory=list)  # readable, in order, final answer left out
    thoughts: list[str] = field(default_factory=list)  # one per action ("" when none)
    # PNGs in order: one per step (the page it acted on), then the page after the last
    # action when no step shows it (N+1 for N actions, as Online-Mind2Web's layout has)
    screenshots: list[bytes] = field(default_factory=list)
    date: dt.date | None = None  # when the agent ran ("today" for date-aware prompts)


def from_record(record: EpisodeRecord, pngs: Mapping[str, bytes] | None = None) -> JudgeInput:
    """The judge's view of a stored episode. `pngs` maps sha256 -> PNG for screenshots
    not carried by the record itself (the screenshots table of the run)."""
    shots = {s.sha256: s.png for s in record.screenshots}
    if pngs:
        shots = {**pngs, **shots}
    ep = record.episode
    actions, thoughts, screenshots = [], [], []
    for step in sorted(record.steps, key=lambda s: s.step):
        if step.screenshot is not None:
            if step.screenshot not in shots:
                raise KeyError(f"{ep.episode_id} step {step.step}: screenshot not found")
            screenshots.append(shots[step.screenshot])
        if step.action is None or step.action.type in TERMINAL_ACTIONS:
            continue  # nothing happened in the page (unparsable output, or the answer)
        thought, _ = split_thought(step.output_text)
        actions.append(describe_action(step.action, step.obs_text))
        thoughts.append(thought or "")
    if ep.final_screenshot is not None:  # the page after the last action (runner.py)
        if ep.final_screenshot not in shots:
            raise KeyError(f"{ep.episode_id}: final screenshot not found")
        screenshots.append(shots[ep.final_screenshot])
    started = dt.datetime.fromtimestamp(ep.started_at).date() if ep.started_at else None
    return JudgeInput(
        episode_id=ep.episode_id,
        task_id=ep.task_id,
        task=ep.instruction,
        answer=ep.answer,
        actions=actions,
        thoughts=thoughts,
        screenshots=screenshots,
        date=started,
    )


def describe_action(action: ActionRow, obs_text: str = "") -> str:
    """An action the way Online-Mind2Web histories read ("<element> -> CLICK"), with the
    element's line from the observation the policy acted on."""
    el = _element_line(obs_text, action.target) if action.target else ""
    kind = action.type
    if kind == "click":
        return f"{el} -> CLICK"
    if kind == "fill":
        return f"{el} -> TYPE: {action.text or ''}"
    if kind == "select":
        return f"{el} -> SELECT: {action.text or ''}"
    if kind == "click_xy":
        return f"({action.x:g}, {action.y:g}) -> CLICK"
    if kind == "press":
        return f"-> PRESS: {action.text or ''}"
    if kind == "scroll":
        return f"-> SCROLL: {action.text or 'down'}"
    if kind == "goto":
        return f"-> GOTO: {action.text or ''}"
    if kind == "go_back":
        return "-> GO BACK"
    return f"-> {kind.upper()}"


def _element_line(obs_text: str, target: str) -> str:
    """`[12] button "Submit"` for id 12, or `[12]` when the observation lacks it."""
    m = re.search(rf"^\s*(\[{re.escape(target)}\][^\n]*)$", obs_text, re.M)
    return m.group(1).strip() if m else f"[{target}]"
