"""Verdicts from canned judge replies, well-formed and malformed, by each protocol's rule."""

from __future__ import annotations

import pytest

from rmsweb.judge import webjudge, webtailbench, webvoyager


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The page shows the recipe with 4.6 stars.\n\nVerdict: SUCCESS", True),
        ("The answer contradicts the screenshot. NOT SUCCESS", False),
        # the script's rule checks NOT SUCCESS first: mentioning both is a failure
        ("It is not a SUCCESS... final verdict: NOT SUCCESS", False),
        ("success", None),  # case matters in the authors' script
        ("I cannot tell from these screenshots.", None),
        ("", None),
    ],
)
def test_webvoyager_verdicts(text: str, expected: bool | None) -> None:
    assert webvoyager.parse_verdict(text) is expected


@pytest.mark.parametrize(
    ("text", "points", "ok"),
    [
        (
            "**Key Points**:\n\n1. Filter by highest rating\n   2. Vegetarian\n\n3. Under 1 hour",
            "\n1. Filter by highest rating\n2. Vegetarian\n3. Under 1 hour",
            True,
        ),
        ("Key Points:\n1. Open the page", "\n1. Open the page", False),
        ("1. Open the page\n2. Read it", "1. Open the page\n2. Read it", False),
    ],
)
def test_webjudge_key_points(text: str, points: str, ok: bool) -> None:
    assert webjudge.parse_key_points(text) == (points, ok)


@pytest.mark.parametrize(
    ("text", "score", "thought"),
    [
        (
            "1. **Reasoning**: The page lists the release guidelines.\nIt is the target.\n\n"
            "2. **Score**: 5",
            5,
            "The page lists the release guidelines. It is the target.",
        ),
        ("**Reasoning**: A cookie banner.\n\n**Score**: 2 (minimal)", 2, "A cookie banner."),
        ("- **Score**: 9, then 3", 3, "- **Score**: 9, then 3"),  # first digit 1-5 after "Score"
        ("The image is a login page. Relevance: high", 0, ""),  # no "Score"
        ("**Reasoning**: unclear\n**Score**: N/A", 0, ""),  # "Score" without a digit
        ("", 0, ""),
    ],
)
def test_webjudge_image_scores(text: str, score: int, thought: str) -> None:
    assert webjudge.parse_image_score(text) == (score, thought)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('Thoughts: every key point is met.\nStatus: "success"', (True, True)),
        ("Thoughts: the filter was not applied.\nStatus: failure", (False, True)),
        ("THOUGHTS: fine\nSTATUS: Success", (True, True)),
        (
            "Thoughts: the agent says success but the page shows an error.\nStatus: failure",
            (False, True),
        ),
        ("The task was completed successfully.", (False, False)),  # no "status:": failure
        ("", (False, False)),
    ],
)
def test_webjudge_final_status(text: str, expected: tuple[bool, bool]) -> None:
    assert webjudge.parse_status(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"evaluation": "YES", "reasoning": "The fare is shown."}', True),
        ('```json\n{"evaluation": "NO", "reasoning": "Wrong dates."}\n```', False),
        ('Here you go: {"evaluation":"yes","reasoning":"ok"} done', True),
        ('{"evaluation": "MAYBE", "reasoning": "?"}', None),
        ('{"evaluation": "YES", "reasoning": "unterminated', True),  # falls back to the line
        ("evaluation: NO\nreasoning: the page never loaded", False),
        ("YES", True),
        ("no.", False),
        ("I think the agent did well.", None),
        ("", None),
    ],
)
def test_webtailbench_evaluations(text: str, expected: bool | None) -> None:
    assert webtailbench.parse_evaluation(text) is expected
