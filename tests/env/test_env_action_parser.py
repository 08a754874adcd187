"""The parser tolerates the usual model noise and explains what it cannot read."""

from __future__ import annotations

import pytest

from rmsweb.env.actions import Action, ParseError, parse_action, split_thought


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("click(12)", Action("click", target="12")),
        ("  click ( 12 )  ", Action("click", target="12")),
        ("Click(12)", Action("click", target="12")),
        ("click([12])", Action("click", target="12")),
        ('click("12")', Action("click", target="12")),
        ("click(id=12)", Action("click", target="12")),
        ("Action: click(7)", Action("click", target="7")),
        ("action:click(7)", Action("click", target="7")),
        ("Thought: the OK button submits.\nAction: click(4)", Action("click", target="4")),
        ("Thought: I could click(2) but\nAction: click(4)", Action("click", target="4")),
        ("click(4) because it is the submit button", Action("click", target="4")),
        ("```\nclick(4)\n```", Action("click", target="4")),
        ("`click(4)`", Action("click", target="4")),
        ("- fill(3, 'Bob')", Action("fill", target="3", text="Bob")),
        ('fill(3,"Bob")', Action("fill", target="3", text="Bob")),
        ("fill(3, “Bob”)", Action("fill", target="3", text="Bob")),
        (r'fill(3, "say \"hi\"")', Action("fill", target="3", text='say "hi"')),
        (r"fill(3, 'it\'s')", Action("fill", target="3", text="it's")),
        ('fill(3, "it\'s")', Action("fill", target="3", text="it's")),
        (r'fill(3, "C:\path")', Action("fill", target="3", text=r"C:\path")),
        (r'fill(3, "two\nlines")', Action("fill", target="3", text="two\nlines")),
        ("fill(3, Bob)", Action("fill", target="3", text="Bob")),
        ('fill(3, text="Bob")', Action("fill", target="3", text="Bob")),
        ('select(5, "Sudan")', Action("select", target="5", text="Sudan")),
        ('press("Enter")', Action("press", text="Enter")),
        ("press(Enter)", Action("press", text="Enter")),
        ('scroll("DOWN")', Action("scroll", text="down")),
        ('goto("http://127.0.0.1:8000/a")', Action("goto", text="http://127.0.0.1:8000/a")),
        ("go_back()", Action("go_back")),
        ('answer("42")', Action("answer", text="42")),
        ("stop()", Action("stop")),
        ("STOP ( )", Action("stop")),
        ("click_xy(40, 96.5)", Action("click_xy", x=40.0, y=96.5)),
        ("click_xy(x=40, y=-3)", Action("click_xy", x=40.0, y=-3.0)),
        ('click_xy("40", "50")', Action("click_xy", x=40.0, y=50.0)),
    ],
)
def test_tolerant_parse(text: str, expected: Action) -> None:
    assert parse_action(text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "no action found"),
        ("I am not sure what to do.", "no action found"),
        ("tap(3)", "unknown action 'tap'"),
        ("clik(3)", "did you mean click"),
        ("click()", "click takes 1 argument"),
        ("click(3, 4)", "click takes 1 argument"),
        ('click("Submit")', "element id must be a number"),
        ("click(3", "missing closing parenthesis"),
        ('fill(3, "Bob', "unterminated string"),
        ("fill(3)", "fill takes 2 argument"),
        ('scroll("sideways")', "scroll direction must be one of"),
        ('press("  ")', "press needs a key"),
        ("click_xy(a, 3)", "coordinates must be numbers"),
        ("stop(now)", "stop takes 0 argument"),
    ],
)
def test_parse_errors_have_reasons(text: str, reason: str) -> None:
    result = parse_action(text)
    assert isinstance(result, ParseError)
    assert reason in result.reason


def test_split_thought() -> None:
    assert split_thought("Thought: find it\nAction: click(3)") == ("find it", " click(3)")
    assert split_thought("click(3)") == (None, "click(3)")


@pytest.mark.parametrize(
    "text",
    [
        "Action: click(1)\nAction: click(2)",
        'Thought: two steps.\nAction: click(1)\nAction: fill(2, "x")',
        "click(1)\nclick(2)",
        "click(1); click(2)",
        "click(1), click(2)",
        "click(1) and click(2)",
        'click(1) then press("Enter")',
        "click(1) && click(2)",
        "```\nclick(1)\nclick(2)\n```",
        "- click(1)\n- click(2)",
        "Action: click(1)\nLater I may need this.\nAction: stop()",
        'fill(3, "a") fill(4, "b")',
        "click(1)\n\n`go_back()`",
    ],
)
def test_more_than_one_action_is_a_parse_error(text: str) -> None:
    """Neither the first nor the last one runs: a step is one action (see parse_action)."""
    result = parse_action(text)
    assert isinstance(result, ParseError), (text, result)
    assert "more than one action" in result.reason
    assert result.reason.endswith("reply with exactly one action per step")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a call inside prose is not a second action
        ("click(4) instead of click(5)", Action("click", target="4")),
        ("Thought: click(2) or click(3)?\nAction: click(3)", Action("click", target="3")),
        ("Thought: the next action: is unclear\nAction: click(3)", Action("click", target="3")),
        ('fill(3, "click(4); click(5)")', Action("fill", target="3", text="click(4); click(5)")),
        (
            "click(4)\nThis should submit the form, unlike click(5) would.",
            Action("click", target="4"),
        ),
    ],
)
def test_a_single_action_beside_prose_that_mentions_others_parses(text: str, expected) -> None:
    assert parse_action(text) == expected
