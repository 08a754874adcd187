"""Fuzzing the action parser: any str gives an Action or a ParseError, in bounded time.

Inputs come from three sources: arbitrary Unicode (also lone surrogates), a grammar of
near-actions (names, quotes, escapes, ids in odd digits, huge numbers, marks), and
hand-built large inputs aimed at the parser's loops. Anything that is not a str is
refused with ActionInputError. The slowest input is reported at the end of the module.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmsweb.env.actions import Action, ActionInputError, ParseError, parse_action

# Generated inputs are at most a few thousand characters; 2 s is >100x what they
# take (<= 15 ms seen under load), so only a pathological (super-linear) path crosses it.
BOUND_S = 2.0
# Big inputs (250k characters) parse in 0.01-0.4 s on a busy 2-core machine (1 MB in
# 0.05-1.5 s: linear); 5 s leaves room for load and still catches a quadratic path
# (which would take minutes at this size).
BIG_BOUND_S = 5.0

slowest: dict[str, tuple[float, str]] = {}


def timed_parse(text: str, group: str, bound: float = BOUND_S) -> Action | ParseError:
    start = time.perf_counter()
    result = parse_action(text)
    took = time.perf_counter() - start
    if took > slowest.get(group, (0.0, ""))[0]:
        slowest[group] = (took, f"{len(text):,} chars, {text[:30]!r}")
    assert took < bound, f"{took:.2f}s for {text[:80]!r}"
    assert isinstance(result, (Action, ParseError))
    return result


def report_lines(request: pytest.FixtureRequest, lines: list[str]) -> None:
    """Print past pytest's output capture, so `pytest -q` shows the figures."""
    plugins = request.config.pluginmanager
    reporter, capture = plugins.get_plugin("terminalreporter"), plugins.get_plugin("capturemanager")
    if reporter is None:
        return
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        reporter.write_line("")
        for line in lines:
            reporter.write_line(line)


@pytest.fixture(scope="module", autouse=True)
def report_slowest(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    lines = [
        f"parse_action slowest [{group}]: {took * 1000:.1f} ms ({what})"
        for group, (took, what) in sorted(slowest.items())
    ]
    report_lines(request, lines)


# Odd digits: superscripts and Arabic-Indic pass str.isdigit(), fullwidth too.
ODD_DIGITS = "0123456789²³¹١٢٣０１２⁹"
FRAGMENTS = st.sampled_from(
    [
        "click", "fill", "select", "press", "scroll", "goto", "go_back", "answer", "stop",
        "click_xy", "CLICK", "ſcroll", "clİck", "(", ")", "((", "))", ",", ", ", '"', "'",
        "“", "”", "‘", "’", "`", "```", "[", "]", "#", "=", "x=", "text=", "\\", '\\"',
        "\\u", "\\u00e9", "\\ud83d\\ude00", "\\ud800", "\\uDFFF", "\n", "\t", " ", "Action:",
        "Thought:", "action :", "e", "E", "-", "+", ".", "inf", "nan", "1e309", "9" * 5000,
        "0" * 50, "down", "Enter", "\x00", "\ud800", "\U0001f600", "é",
    ]
)  # fmt: skip
near_actions = st.lists(
    st.one_of(FRAGMENTS, st.text(alphabet=ODD_DIGITS, min_size=1, max_size=30)), max_size=40
).map("".join)
# Any code point, lone surrogates included (st.text() leaves them out by default).
any_unicode = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_unicode)
def test_any_unicode(text: str) -> None:
    timed_parse(text, "any unicode")


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(near_actions)
def test_near_actions(text: str) -> None:
    result = timed_parse(text, "near actions")
    if isinstance(result, Action):
        # Whatever parses has ASCII-digit ids and finite coordinates, and stores as UTF-8.
        if result.target is not None:
            assert result.target.isascii() and result.target.isdigit()
            assert len(result.target) <= 18
        for v in (result.x, result.y):
            assert v is None or abs(v) < float("inf")
        (result.text or "").encode("utf-8")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("click(²)", "element id must be a number"),
        ("click(١٢)", "element id must be a number"),
        ("click(" + "1" * 5000 + ")", "5000 digits"),
        ("click_xy(١, 2)", "coordinates must be numbers"),
        ('answer("a\ud800")', "not valid Unicode"),
        ('ſcroll("down")', "no action found"),
    ],
)
def test_issue_inputs_are_parse_errors(text: str, reason: str) -> None:
    result = timed_parse(text, "issue cases")
    assert isinstance(result, ParseError) and reason in result.reason


def test_escapes_join_surrogate_pairs_and_keep_lone_ones() -> None:
    assert parse_action('answer("\\ud83d\\ude00")') == Action("answer", text="\U0001f600")
    assert parse_action('answer("\\ud800x")') == Action("answer", text="\\ud800x")


def test_leading_zeros_are_dropped_without_int() -> None:
    assert parse_action("click(007)") == Action("click", target="7")
    assert parse_action("click(000)") == Action("click", target="0")


@pytest.mark.parametrize("value", [None, b"click(3)", 3, ["click(3)"], {"action": "stop()"}])
def test_non_text_is_refused_with_its_own_error(value: object) -> None:
    with pytest.raises(ActionInputError, match="expects the model's output text"):
        parse_action(value)  # type: ignore[arg-type]
    assert issubclass(ActionInputError, TypeError)


SIZE = 250_000  # characters; kept small so the default test run stays fast
BIG_INPUTS = {
    "digits": "click(" + "1" * SIZE + ")",
    "open calls": "click(" * (SIZE // 6),
    "action marks": "Action: " * (SIZE // 8),
    "backslashes": 'fill(1, "' + "\\" * SIZE,
    "brackets": "click([" * (SIZE // 7),
    "newlines": "\n" * SIZE + "click(3)",
    "one word": "a" * SIZE,
    "unknown calls": "ab(" * (SIZE // 3),
    "commas": "fill(" + "1," * (SIZE // 2),
    "keywords": "fill(" + "a=" * (SIZE // 2),
    "spaces": "click" + " " * SIZE,
    "bullets": ("`*>- " * 1000 + "\n") * (SIZE // 5001),
    "huge coordinate": "click_xy(" + "9" * SIZE + ", 1)",
    "escapes": 'answer("' + "\\ud800" * (SIZE // 6) + '")',
}


@pytest.mark.parametrize("name", sorted(BIG_INPUTS))
def test_big_inputs_take_bounded_time(name: str) -> None:
    timed_parse(BIG_INPUTS[name], "250k-char inputs", bound=BIG_BOUND_S)
