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
