"""Hedged outputs: two or more actions offered as alternatives or as a sequence are a
parse error, never the first one; prose that names a rejected action keeps its meaning.

Under the +-1 reward of Salvage-DS, `click(1) or click(2)` scoring as click(1) would pay
a policy for listing a right and a wrong action. The hand-picked cases are the hedges
seen in model outputs and their kin; the generated ones join two random actions with a
random connector (any case, any spacing) or a rejection phrase.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmsweb.env.actions import SCROLL_DIRECTIONS, Action, ParseError, format_action, parse_action

MORE_THAN_ONE = "more than one action"

# What may stand between two offered actions: an alternative or a next step.
CONNECTORS = [
    " or ", " | ", "/", " else ", "||", " OR ", " or else ", " or maybe ", " or perhaps ",
    ", or ", " (or ", " otherwise ", ", otherwise, ", "; alternatively, ", " alternatively ",
    " either ", " -> ", " => ", " → ", " >> ", " + ", " & ", " && ", " and ", " and then ",
    ", then ", " then ", ". Then ", " followed by ", ", next ", "; after that, ", " after that ",
    " before ", "; if that fails, ", " if that doesn't work ", " if it does not work, ",
    ". If nothing happens, ", ", failing that, ", " vs ", " vs. ", " versus ", " and/or ",
    ", you could also try ", ", or you might want to ", " or try ", ", as a fallback, ",
    " / maybe ", "; ", ", ", " ", "\n", "\n- ", "\n2. ", " 2) ", " — or ", " ~ ",
    " or, if that fails, ", " oder ", " ou ", " 或 ", "，或者",
]  # fmt: skip

# What turns the action after it down (the text before it may hold any prose).
REJECTIONS = [
    " instead of ", " rather than ", ", not ", " (not ", " but not ", ", never ",
    " -- do not use ", " (don't ", "; I won't ", ", unlike ", " in place of ", " better than ",
    " without ", ", avoid ", " (avoiding ",
]  # fmt: skip


@pytest.mark.parametrize(
    "text",
    [
        # the four
        "Action: click(1) or click(2)",
        "click(1) | click(2)",
        "click(1)/click(2)",
        "click(1) else click(2)",
        # and their kin
        "Action: click(1) || click(2)",
        "click(1) OR click(2)",
        "Either click(1) or click(2).",
        "click(1) (or click(2))",
        "click(1) or maybe click(2)",
        'fill(3, "a") otherwise fill(4, "b")',
        "click(1); alternatively, click(2)",
        "click(1) -> click(2)",
        "click(1) → click(2)",
        'click(1) followed by press("Enter")',
        "click(1) because it is the submit button; if that doesn't work, click(2)",
        "click(1) since it submits, or you might want to click(2)",
        "1. click(1) 2. click(2)",
        "click(1) vs. click(2)",
        "click(1) and/or click(2)",
        "click(4) instead of click(5). Then click(6)",
        "Action: instead of click(1), click(2) or click(3)",
        "click(1) 或 click(2)",
        "`click(1)` / `click(2)`",
        '"click(1)" or "click(2)"',
    ],
)
def test_hedges_are_parse_errors(text: str) -> None:
    result = parse_action(text)
    assert isinstance(result, ParseError), (text, result)
    assert MORE_THAN_ONE in result.reason


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("click(3) instead of click(5)", "click(3)"),
        ("click(3) rather than click(5)", "click(3)"),
        ("click(3), not click(5)", "click(3)"),
        ("click(3) (don't click(5): it cancels)", "click(3)"),
        ("click(3) instead of click(5) or click(6)", "click(3)"),  # both turned down
        ("click(3) because click(5) is disabled", "click(3)"),  # prose mentions it
        ("click(3)\nThis submits the form, unlike click(5) would.", "click(3)"),
        ("click(3) better than click(5)", "click(3)"),
        # a rejected action written first: the one offered after it is the action
        ("Action: instead of click(5), click(3)", "click(3)"),
        ("Action: rather than click(5), I will click(3)", "click(3)"),
        (
            'Thought: click(2) or click(3)?\nAction: fill(3, "x or click(4)")',
            'fill(3, "x or click(4)")',
        ),
    ],
)
def test_prose_that_names_a_rejected_action_keeps_its_meaning(text: str, expected: str) -> None:
    assert parse_action(text) == parse_action(expected), text


def test_an_output_that_only_rejects_is_read_as_the_action_it_names() -> None:
    """Nothing offered: the call it names is what the text is about (reflections are
    read this way: "Do not do click(2) again." is about click(2))."""
    assert parse_action("Do not do click(2) again.") == Action("click", target="2")
    assert parse_action("Action: don't click(1)") == Action("click", target="1")


# --------------------------------------------------------------------------- generated

ids = st.integers(min_value=0, max_value=999).map(str)
texts = st.text(max_size=40)  # any Unicode (quotes, backslashes, newlines: escaped)
actions = st.one_of(
    st.builds(lambda t: Action("click", target=t), ids),
    st.builds(lambda t, s: Action("fill", target=t, text=s), ids, texts),
    st.builds(lambda t, s: Action("select", target=t, text=s), ids, texts),
    st.builds(lambda s: Action("press", text=s), st.sampled_from(["Enter", "Tab", "a"])),
    st.builds(lambda s: Action("scroll", text=s), st.sampled_from(SCROLL_DIRECTIONS)),
    st.builds(lambda s: Action("goto", text=s), texts),
    st.just(Action("go_back")),
    st.builds(lambda s: Action("answer", text=s), texts),
    st.just(Action("stop")),
    st.builds(
        lambda x, y: Action("click_xy", x=x, y=y),
        st.integers(-5, 2000).map(float),
        st.integers(-5, 2000).map(float),
    ),
)
prefixes = st.sampled_from(["", "Action: ", "Thought: pick one.\nAction: ", "```\n", "- "])


def _spell(phrase: str, case: int, pad: str) -> str:
    phrase = {0: phrase, 1: phrase.upper(), 2: phrase.title()}[case]
    return phrase.replace(" ", pad) if phrase.strip() else phrase


@settings(max_examples=500, deadline=None)
@given(
    prefixes,
    st.lists(actions, min_size=2, max_size=4),
    st.lists(st.sampled_from(CONNECTORS), min_size=3, max_size=3),
    st.integers(0, 2),
    st.sampled_from([" ", "  ", "\t"]),
)
def test_generated_hedges_are_parse_errors(prefix, offered, joins, case, pad) -> None:
    text = prefix + format_action(offered[0])
    for join, action in zip(joins, offered[1:], strict=False):
        text += _spell(join, case, pad) + format_action(action)
    result = parse_action(text)
    assert isinstance(result, ParseError), (text, result)
    assert MORE_THAN_ONE in result.reason, (text, result)


@settings(max_examples=500, deadline=None)
@given(
    prefixes,
    actions,
    actions,
    st.sampled_from(REJECTIONS),
    st.sampled_from(["", " because the form needs it", " (the submit button)"]),
    st.integers(0, 2),
)
def test_generated_rejections_keep_the_offered_action(
    prefix, offered, rejected, rejection, prose, case
) -> None:
    text = prefix + format_action(offered) + prose + _spell(rejection, case, " ")
    text += format_action(rejected)
    assert parse_action(text) == offered, text
    # the same, rejected one first ("Action: instead of B, A")
    first = _spell(rejection.strip(" ,;(-").strip(), case, " ")
    if first in ("never", "NEVER", "Never") or "won't" in first.lower():
        return  # "never B, A" reads as two statements; nothing to assert
    text = prefix + f"{first} {format_action(rejected)}, {format_action(offered)}"
    assert parse_action(text) == offered, text


N = 40_000
BIG_INPUTS = {
    "connectors": "click(1) " + "or maybe " * N + "x click(2)",
    "rejections": "click(1)" + " instead of click(2)" * N,
    "clauses": "click(1) because " + "a, " * N + "click(2)",
    "listed": "Action: instead of click(1)" + " or click(2)" * N,
    "open args": "click(1) instead of " + 'fill(2, "' * N,
    "parens": "click(1) instead of click(" + "(" * N,
    "long clause": "click(1) " + "a" * (6 * N) + " or click(2)",
    "marks in an open value": 'Action: fill(1, "' + "Action: " * N,
    "marks in closed values": 'fill(1, "Action: ") ' * N,
}


@pytest.mark.parametrize("name", sorted(BIG_INPUTS))
def test_big_hedged_inputs_take_bounded_time(name: str) -> None:
    """The hedge reading is linear too: 200-400k characters in well under 5 s."""
    start = time.perf_counter()
    result = parse_action(BIG_INPUTS[name])
    assert time.perf_counter() - start < 5.0
    assert isinstance(result, (Action, ParseError))
