"""Semantic comparison: what the rewards and the mining stage count as the same action."""

from __future__ import annotations

from rmsweb.env.actions import Action, compare, element_at, matches_any
from rmsweb.env.types import Box, Element

ELEMENTS = {
    "1": Element(id="1", role="button", name="OK", box=Box(10, 10, 40, 20)),
    "2": Element(id="2", role="button", name="Cancel", box=Box(60, 10, 40, 20)),
    "3": Element(id="3", role="text", name="panel", box=Box(0, 0, 200, 100)),
}


def same(a: Action, b: Action, tau: float = 1.0) -> bool:
    return compare(a, b, elements=ELEMENTS, tau=tau).ok


def test_same_type_and_target() -> None:
    assert same(Action("click", target="1"), Action("click", target="1"))
    m = compare(Action("click", target="2"), Action("click", target="1"))
    assert (m.type_ok, m.target_ok, m.ok) == (True, False, False)
    m = compare(Action("fill", target="1", text="x"), Action("click", target="1"))
    assert (m.type_ok, m.ok) == (False, False)


def test_click_xy_inside_target_box() -> None:
    assert same(Action("click_xy", x=30, y=20), Action("click", target="1"))
    assert same(Action("click", target="1"), Action("click_xy", x=30, y=20))
    assert not same(Action("click_xy", x=80, y=20), Action("click", target="1"))
    # without boxes a coordinate click cannot be credited
    assert not compare(Action("click_xy", x=30, y=20), Action("click", target="1")).ok


def test_click_xy_against_click_xy() -> None:
    # same smallest element under both points
    assert same(Action("click_xy", x=12, y=12), Action("click_xy", x=48, y=28))
    assert not same(Action("click_xy", x=30, y=20), Action("click_xy", x=70, y=20))
    assert element_at(ELEMENTS, 30, 20) == "1"


def test_argument_normalization() -> None:
    fill = Action("fill", target="4", text="Bob  Smith ")
    assert same(fill, Action("fill", target="4", text="Bob Smith"))
    # typed text is case-sensitive: tasks check it exactly
    assert not same(Action("fill", target="4", text="bob"), Action("fill", target="4", text="Bob"))
    assert same(
        Action("select", target="5", text="sudan"), Action("select", target="5", text="Sudan")
    )
    assert same(Action("press", text="enter"), Action("press", text="Enter"))
    assert same(Action("answer", text="Paris."), Action("answer", text="paris"))
    assert same(Action("goto", text="http://a.test/"), Action("goto", text="http://a.test"))
    assert same(Action("stop"), Action("stop"))


def test_similarity_threshold() -> None:
    a = Action("answer", text="the eiffel tower")
    b = Action("answer", text="eiffel tower")
    assert not same(a, b)
    assert same(a, b, tau=0.8)
    assert not same(a, Action("answer", text="louvre"), tau=0.8)


def test_matches_any() -> None:
    refs = [Action("click", target="1"), Action("click", target="2")]
    assert matches_any(Action("click", target="2"), refs, elements=ELEMENTS)
    assert not matches_any(Action("click", target="3"), refs, elements=ELEMENTS)
    assert not matches_any(Action("click", target="3"), [])
