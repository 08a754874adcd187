"""Reading reflections: what a teacher hears in the critic's notes and in free text."""

from __future__ import annotations

from rmsweb.agents.advice import Advice, named_steps, parse_advice
from rmsweb.env.actions import click, fill, scroll, stop
from rmsweb.env.types import Element, Observation


def page() -> Observation:
    els = {
        "1": Element("1", "textbox", "Username"),
        "2": Element("2", "button", "Cancel"),
        "3": Element("3", "button", "Submit"),
    }
    return Observation("u", "t", "", els)


def test_the_critic_grammar() -> None:
    text = (
        "The attempt failed (reward -1). "
        'Step 3: clicked [2] button "Cancel"; the goal asks for "Submit". '
        "Steps 4-5: scrolled down; then scrolled up, and the page ended as it was. "
        'Step 6: filled [1] textbox "Username" with "bob"; the goal gives "bob" for the password. '
        'Step 7: stopped before "pw" was filled.'
    )
    assert parse_advice(text) == (
        Advice((2,), "click", "2", "Cancel"),
        Advice((3, 4), "scroll", text="down"),
        Advice((5,), "fill", "1", "Username", "bob"),
        Advice((6,), "stop"),
    )
    assert named_steps(text) == [2, 3, 4, 5, 6]


def test_outcome_sentences_and_explanations_are_not_advice() -> None:
    text = (
        "The attempt succeeded in 4 steps; the shortest known success took 3. "
        "No single step stands out; follow the goal more directly."
    )
    assert parse_advice(text) == ()
    # the fix after ";" or "instead" is not read as the wrong action
    (a,) = parse_advice('Step 1: clicked [2] button "Cancel" instead of [3] button "Submit".')
    assert (a.target, a.name) == ("2", "Cancel")


def test_free_text_and_explicit_calls() -> None:
    (a,) = parse_advice("step 3 clicked Cancel instead of Submit")
    assert a == Advice((2,), "click", name="Cancel")
    (b,) = parse_advice("Step 2: did click(5); the right action was click(2).")
    assert b == Advice((1,), "click", "5")
    (c,) = parse_advice('Clicked [12] button "Cancel"; the goal asks for "Submit".')
    assert c == Advice((), "click", "12", "Cancel")  # no step: any step
    (d,) = parse_advice('Step 2 - filled "Name" into the wrong field')
    assert d.steps == (1,) and d.type == "fill"


def test_a_note_forbids_exactly_the_action_it_names() -> None:
    obs = page()
    cancel = Advice((0,), "click", "2", "Cancel")
    assert cancel.forbids(click("2"), obs)
    assert not cancel.forbids(click("3"), obs)
    assert Advice((), "click", name="Cancel").forbids(click("2"), obs)  # by its text
    assert Advice((), "click", target="2").forbids(click("2"), obs)  # by its id
    assert not Advice((), "click").forbids(click("2"), obs)  # too vague to name one
    typed = Advice((), "fill", "1", "Username", "bob")
    assert typed.forbids(fill("1", "bob"), obs) and not typed.forbids(fill("1", "ann"), obs)
    assert Advice((), "scroll", text="down").forbids(scroll("down"), obs)
    assert not Advice((), "scroll", text="down").forbids(scroll("up"), obs)
    assert Advice((), "stop").forbids(stop(), obs)
    assert cancel.applies(0) and not cancel.applies(1)
    assert Advice((), "stop").applies(7)


def test_critic_notes_read_back_as_the_action_taken() -> None:
    """What the critic writes about an action, the teacher reads back as that action."""
    from rmsweb.judge.critic import Note, describe
    from rmsweb.judge.trajectory import parse_page

    text = '[1] textbox "Username" value="x"\n[2] button "Cancel"\n[3] text "Some, words; here"'
    p, obs = parse_page(text), page()
    obs.elements["3"] = Element("3", "text", "Some, words; here")
    for action in (click("2"), fill("1", "bob"), scroll("down"), stop(), click("3")):
        note = Note((4,), describe(action, p), "the goal asks for something else").render()
        (advice,) = parse_advice(note)
        assert advice.steps == (4,) and advice.forbids(action, obs), note
