"""Selector scripts for the benchmark tasks: the raw floor's (and BrowserGym's) actions.

Each plan is what the rmsweb expert does on the same episode, written as Playwright
selector actions derived from the instruction alone (no observation). Standalone on
purpose: the BrowserGym worker imports it from a venv without rmsweb.
"""

from __future__ import annotations

import re

TASKS = ("click-button", "click-link", "enter-text", "login-user", "click-checkboxes")

Step = tuple[str, str, str]  # (kind, selector, text): kind "click" or "fill"


def _quoted(utterance: str) -> list[str]:
    return re.findall(r'"([^"]*)"', utterance)


def raw_plan(task: str, utterance: str) -> list[Step]:
    q = _quoted(utterance)
    if task == "click-button":
        return [("click", f'#area button:text-is("{q[0]}")', "")]
    if task == "click-link":
        return [("click", f'#area span.alink:text-is("{q[0]}")', "")]
    if task == "enter-text":
        return [("fill", "#tt", q[0]), ("click", "#subbtn", "")]
    if task == "login-user":
        return [("fill", "#username", q[0]), ("fill", "#password", q[1]), ("click", "#subbtn", "")]
    if task == "click-checkboxes":
        m = re.match(r"Select (.*) and click Submit\.?$", utterance.strip())
        names = [] if m is None or m.group(1) == "nothing" else m.group(1).split(", ")
        clicks = [("click", f'#boxes label:text-is("{n}") input', "") for n in names]
        return [*clicks, ("click", "#subbtn", "")]
    raise ValueError(f"no raw plan for {task}")


def as_python(step: Step) -> str:
    """The step as Python code over a sync Playwright `page` (BrowserGym's raw actions)."""
    kind, selector, text = step
    if kind == "click":
        return f"page.click({selector!r})"
    return f"page.fill({selector!r}, {text!r})"
