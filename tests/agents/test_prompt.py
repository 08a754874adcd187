"""Prompt building and the truncation rule."""

from __future__ import annotations

from rmsweb.agents.prompt import (
    PromptConfig,
    approx_tokens,
    build_messages,
    completion_text,
    split_thought,
    truncate_observation,
)
from rmsweb.env.types import HistoryItem


def words(text: str) -> int:
    """A deterministic token counter for tests: one token per whitespace-separated word."""
    return len(text.split())


def page(n: int, target: int) -> str:
    lines = []
    for i in range(n):
        label = "Submit" if i == target else f"filler{i} lorem ipsum dolor"
        role = "button" if i % 3 == 0 or i == target else "text"
        lines.append(f'[{i}] {role} "{label}"')
    return "\n".join(lines)


def test_short_observation_is_untouched() -> None:
    obs = page(5, 2)
    assert truncate_observation(obs, 'Click "Submit"', 1000, words) == obs


def test_truncation_keeps_the_target_line_and_page_order() -> None:
    obs = page(200, 150)
    out = truncate_observation(obs, 'Click on the "Submit" button.', 60, words)
    assert words(out) <= 60
    assert '[150] button "Submit"' in out
    kept_ids = [int(line[1 : line.index("]")]) for line in out.splitlines() if line.startswith("[")]
    assert kept_ids == sorted(kept_ids)  # page order is preserved
    assert out.splitlines()[-1].startswith("(... ") and "lines omitted)" in out


def test_truncation_prefers_interactive_lines_after_the_target() -> None:
    obs = page(60, 59)
    out = truncate_observation(obs, 'Press "Submit"', 40, words)
    kept = [ln for ln in out.splitlines() if ln.startswith("[")]
    assert sum(" button " in ln for ln in kept) > sum(" text " in ln for ln in kept)


def test_messages_fit_the_budget_and_drop_old_history_first() -> None:
    cfg = PromptConfig(history_steps=5, max_prompt_tokens=120, system="compact")
    history = [HistoryItem(f"Action: click({i})", f"click({i})", None) for i in range(5)]
    history[-1] = HistoryItem("Action: click(9)", "click(9)", "no element with id 9")
    msgs = build_messages('Click "Submit"', page(100, 70), history, cfg, words)
    user = msgs[-1]["content"]
    total = words(msgs[0]["content"]) + words(user)
    assert total <= 120
    assert "click(9) -> error: no element with id 9" in user  # newest step survives
    assert '[70] button "Submit"' in user
    assert "Task: Click" in user


def test_reflections_only_when_given_and_image_part() -> None:
    cfg = PromptConfig(system="none")
    plain = build_messages("Do it", '[1] button "Go"', [], cfg, approx_tokens)
    assert len(plain) == 1 and "Lessons" not in plain[0]["content"]
    taught = build_messages(
        "Do it", '[1] button "Go"', [], cfg, approx_tokens, reflections=["click Go first"]
    )
    assert "- click Go first" in taught[0]["content"]
    vl = build_messages("Do it", '[1] button "Go"', [], cfg, approx_tokens, with_image=True)
    assert vl[0]["content"][0] == {"type": "image"}


def test_completion_and_thought_round_trip() -> None:
    text = completion_text('fill(3, "a b")', thought="the name field is 3")
    assert text == 'Thought: the name field is 3\nAction: fill(3, "a b")'
    assert split_thought(text) == "the name field is 3"
    assert split_thought("Action: stop()") is None
