"""parse(format(a)) == a for every action, and rows convert both ways."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rmsweb.env.actions import SCROLL_DIRECTIONS, Action, format_action, parse_action

ids = st.integers(min_value=0, max_value=10**6).map(str)
texts = st.text()  # any unicode: quotes, backslashes, newlines, control characters
keys = st.text(min_size=1).filter(lambda s: s.strip())
coords = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e9, max_value=1e9)

actions = st.one_of(
    st.builds(lambda t: Action("click", target=t), ids),
    st.builds(lambda t, s: Action("fill", target=t, text=s), ids, texts),
    st.builds(lambda t, s: Action("select", target=t, text=s), ids, texts),
    st.builds(lambda s: Action("press", text=s), keys),
    st.builds(lambda s: Action("scroll", text=s), st.sampled_from(SCROLL_DIRECTIONS)),
    st.builds(lambda s: Action("goto", text=s), texts),
    st.just(Action("go_back")),
    st.builds(lambda s: Action("answer", text=s), texts),
    st.just(Action("stop")),
    st.builds(lambda x, y: Action("click_xy", x=x, y=y), coords, coords),
)


@given(actions)
def test_parse_inverts_format(action: Action) -> None:
    assert parse_action(format_action(action)) == action


@given(actions)
def test_parse_inverts_format_with_thought_and_prefix(action: Action) -> None:
    text = f"Thought: the form wants it.\nAction: {format_action(action)}  # trailing note"
    assert parse_action(text) == action


# Values that hold an "Action:" mark: the call is read whole, not from inside its value.
marked = st.builds(
    lambda a, mark, b: a + mark + b,
    texts,
    st.sampled_from(["Action:", "ACTION: ", "action :", "Action: click(2)"]),
    texts,
)
marked_actions = st.one_of(
    st.builds(lambda t, s: Action("fill", target=t, text=s), ids, marked),
    st.builds(lambda s: Action("goto", text=s), marked),
    st.builds(lambda s: Action("answer", text=s), marked),
)


@given(
    marked_actions,
    st.sampled_from(["", "Action: ", "Thought: go.\nAction: ", "instead of go_back(), "]),
)
def test_action_marks_inside_a_value_are_part_of_it(action: Action, prefix: str) -> None:
    assert parse_action(prefix + format_action(action)) == action


def test_action_marks_inside_a_value_examples() -> None:
    assert parse_action('go_back() instead of goto("ACTION:")') == Action("go_back")
    assert parse_action('Action: fill(3, "Action: done")') == Action("fill", "3", "Action: done")
    # Marks outside any call still count: two "Action:" lines are two actions.
    two = parse_action('Action: fill(3, "a")\nAction: click(4)')
    assert not isinstance(two, Action)


@given(actions)
def test_row_roundtrip(action: Action) -> None:
    assert Action.from_row(action.to_row()) == action


def test_format_examples() -> None:
    assert format_action(Action("click", target="12")) == "click(12)"
    assert format_action(Action("fill", target="3", text='say "hi"')) == 'fill(3, "say \\"hi\\"")'
    assert format_action(Action("click_xy", x=40.0, y=96.5)) == "click_xy(40, 96.5)"
    assert format_action(Action("go_back")) == "go_back()"
