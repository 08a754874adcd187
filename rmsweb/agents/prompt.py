"""Prompts: one builder shared by teachers, SFT samples, mining, RL and eval.

A prompt is a chat: a system message with the action syntax, then a user
message with the task, reflections (teachers only), the last k steps and the
current observation. The model answers with an optional `Thought:` line and
then `Action: ...`. SFT samples are built with the same function from stored
step rows, so what the policy is trained on is exactly what it later sees.

Truncation rule (prompts must fit `max_prompt_tokens`):
1. drop the oldest history steps, down to one;
2. then drop observation lines, keeping first the lines that mention words
   of the instruction (the likely target), then interactive elements, then
   the rest, always in page order; a marker says how many lines were cut;
3. the instruction and the action syntax are never cut.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rmsweb.env.types import HistoryItem

SYSTEM_FULL = """\
You are a web agent. Each turn you see the task and the page as lines `[id] role "name"`.
Reply with one action, optionally after a line `Thought: ...`, as `Action: <action>`.
Actions: click(id) | fill(id, "text") | select(id, "option") | press("Enter") |
scroll("down") | goto("url") | go_back() | answer("text") | stop() | click_xy(x, y)"""

SYSTEM_COMPACT = 'Web agent. Reply "Action: <action>": click(id) fill(id, "text") ' + (
    'select(id, "option") press("key") scroll("down") answer("text") stop()'
)

SYSTEM_PROMPTS = {"full": SYSTEM_FULL, "compact": SYSTEM_COMPACT, "none": ""}

INTERACTIVE_ROLES = frozenset(
    {
        "button",
        "link",
        "textbox",
        "checkbox",
        "radio",
        "combobox",
        "listbox",
        "option",
        "tab",
        "menuitem",
        "searchbox",
        "spinbutton",
        "slider",
        "treeitem",
        "switch",
    }
)
_STOPWORDS = frozenset(
    [
        "the",
        "a",
        "an",
        "and",
        "or",
        "of",
        "to",
        "in",
        "on",
        "for",
        "into",
        "from",
        "with",
        "by",
        "is",
        "are",
        "be",
        "then",
        "click",
        "select",
        "enter",
        "type",
        "press",
        "submit",
        "your",
        "you",
        "it",
        "this",
        "that",
        "field",
        "box",
        "button",
    ]
)
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]*")
_ROLE = re.compile(r"^\s*\[[^\]]+\]\s+(\w+)")

TokenCounter = Callable[[str], int]


def approx_tokens(text: str) -> int:
    """A tokenizer-free estimate (about 4 characters a token) for remote models."""
    return len(text) // 4 + 1


@dataclass(frozen=True)
class PromptConfig:
    history_steps: int = 3
    max_prompt_tokens: int = 1024
    thoughts: bool = False
    screenshot: bool = False
    system: str = "full"  # full | compact | none


def format_history(history: Sequence[HistoryItem]) -> list[str]:
    lines = []
    for item in history:
        shown = item.action_text if item.action_text is not None else "(unparseable output)"
        lines.append(f"{shown} -> error: {item.error}" if item.error else shown)
    return lines


_QUOTED = re.compile(r"[\"“']([^\"”']{1,80})[\"”']")


def target_words(instruction: str) -> set[str]:
    """Words that likely name the target: quoted ones always, others minus stopwords."""
    quoted = {w.lower() for q in _QUOTED.findall(instruction) for w in _WORD.findall(q)}
    plain = {w.lower() for w in _WORD.findall(instruction) if w.lower() not in _STOPWORDS}
    return quoted | plain


def truncate_observation(obs_text: str, instruction: str, budget: int, count: TokenCounter) -> str:
    """Keep the observation within `budget` tokens (rule 2 of the module docstring)."""
    if count(obs_text) <= budget:
        return obs_text
    lines = obs_text.splitlines()
    words = target_words(instruction)
    phrases = [q.lower() for q in _QUOTED.findall(instruction)]

    def priority(line: str) -> int:
        lowered = line.lower()
        line_words = set(_WORD.findall(lowered))
        role = _ROLE.match(line)
        exact = any(p in lowered for p in phrases)
        mentions = bool(words & line_words)
        interactive = bool(role and role.group(1) in INTERACTIVE_ROLES)
        return 4 * exact + 2 * mentions + interactive

    order = sorted(range(len(lines)), key=lambda i: (-priority(lines[i]), i))
    kept: set[int] = set()
    used = count("(... 000 lines omitted)")
    for i in order:
        cost = count(lines[i]) + 1
        if used + cost > budget:
            continue
        kept.add(i)
        used += cost
    out = [lines[i] for i in sorted(kept)]
    out.append(f"(... {len(lines) - len(kept)} lines omitted)")
    return "\n".join(out)


def user_text(
    instruction: str,
    obs_text: str,
    history_lines: Sequence[str],
    reflections: Sequence[str],
) -> str:
    parts = [f"Task: {instruction}"]
    if reflections:
        parts.append("Lessons from earlier attempts:\n" + "\n".join(f"- {r}" for r in reflections))
    if history_lines:
        parts.append("Previous actions:\n" + "\n".join(history_lines))
    parts.append("Page:\n" + obs_text)
    return "\n".join(parts)


def build_messages(
    instruction: str,
    obs_text: str,
    history: Sequence[HistoryItem],
    cfg: PromptConfig,
    count: TokenCounter = approx_tokens,
    reflections: Sequence[str] = (),
    with_image: bool = False,
) -> list[dict]:
    """Chat messages for one step; within cfg.max_prompt_tokens by the truncation rule."""
    system = SYSTEM_PROMPTS[cfg.system]
    history_lines = format_history(history[-cfg.history_steps :] if cfg.history_steps else [])
    # Fixed cost: system text, chat markup (~6 tokens a message), instruction, reflections.
    overhead = count(system) + 12 + count(user_text(instruction, "", [], reflections))
    while (
        len(history_lines) > 1
        and overhead + count("\n".join(history_lines)) + count(obs_text) > cfg.max_prompt_tokens
    ):
        history_lines = history_lines[1:]
    budget = cfg.max_prompt_tokens - overhead - count("\n".join(history_lines)) - 4
    obs = truncate_observation(obs_text, instruction, max(budget, 16), count)
    text = user_text(instruction, obs, history_lines, reflections)
    messages: list[dict] = []
    if system:
        messages.append({"role": "system", "content": system})
    if with_image:
        content: list[dict] = [{"type": "image"}, {"type": "text", "text": text}]
        messages.append({"role": "user", "content": content})
    else:
        messages.append({"role": "user", "content": text})
    return messages


def completion_text(action_text: str, thought: str | None = None) -> str:
    """The assistant turn a policy is trained to produce."""
    if thought:
        return f"Thought: {thought}\nAction: {action_text}"
    return f"Action: {action_text}"


_THOUGHT = re.compile(r"Thought:\s*(.*?)\s*(?:\n|Action:|$)", re.S)


def split_thought(output_text: str) -> str | None:
    """The `Thought:` part of a model output, if any."""
    m = _THOUGHT.search(output_text)
    return m.group(1).strip() or None if m else None
