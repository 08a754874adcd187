"""The observation of a small local page, exactly, and the step errors of actions on it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from rmsweb.env.actions import parse_action
from rmsweb.env.pool import BrowserPool
from rmsweb.env.server import StaticServer
from rmsweb.env.session import PageSession

pytestmark = pytest.mark.browser

EXPECTED = """\
[1] heading "Sign up"
[2] text "Please fill every field, then read the terms."
  [3] link "terms"
[4] textbox "Name" value="Ada"
[5] textbox "Password" type=password
[6] checkbox "Subscribe" checked
[7] radio "Red"
[8] combobox value="Green" options=["Red", "Green"]
[9] textbox "Notes"
[10] button "Send" disabled
[11] button "Go"
[12] text "Fruit"
  [13] text "Apple"
  [14] link "Pear"
[15] img "trash"
[16] dialog "Notice"
  [17] text "Saved."
  [18] button "Close"
[19] text "one"
[20] text "two"
[21] text "three"
[22] text "four"
[23] text "five"
[24] button "Under\""""


@pytest.fixture(scope="module")
def pool(loop: asyncio.AbstractEventLoop, site: StaticServer) -> Iterator[BrowserPool]:
    p = loop.run_until_complete(BrowserPool(1, allowed_origins=[site.origin]).start())
    yield p
    loop.run_until_complete(p.close())


def fresh_session(
    loop: asyncio.AbstractEventLoop, pool: BrowserPool, site: StaticServer
) -> PageSession:
    async def go() -> PageSession:
        async with pool.slot() as slot:
            page = await pool.page(slot)
            await page.goto(site.url("form.html"))
            s = PageSession(page, allowed_origins=[site.origin], blocked=slot.blocked)
            s.track_navigation()
            return s

    return loop.run_until_complete(go())


def test_snapshot_text(loop, pool, site) -> None:
    s = fresh_session(loop, pool, site)
    obs = loop.run_until_complete(s.observe())
    assert obs.text == EXPECTED
    assert obs.title == "Snapshot form"
    assert obs.url == site.url("form.html")
    assert obs.last_error is None
    assert obs.screenshot_png is None
    go = obs.elements["11"]
    assert (go.role, go.name, go.tag) == ("button", "Go", "button")
    assert go.box is not None and go.box.width > 0 and go.box.height > 0


def test_ids_are_stable_and_never_reused(loop, pool, site) -> None:
    s = fresh_session(loop, pool, site)

    async def go():
        first = await s.observe()
        await s.page.evaluate(
            "() => { const b = document.createElement('button'); b.textContent = 'New';"
            " document.querySelector('h1').after(b);"
            " document.querySelector('#name').remove(); }"
        )
        return first, await s.observe()

    first, second = loop.run_until_complete(go())
    assert first.elements["4"].name == "Name"
    assert second.elements["1"].name == "Sign up"  # same element, same id
    assert "4" not in second.elements  # removed: its id is not handed out again
    assert second.elements["25"].name == "New"  # new elements get fresh ids
    assert second.text.splitlines()[1] == '[25] button "New"'


def test_actions_and_step_errors(loop, pool, site) -> None:
    s = fresh_session(loop, pool, site)

    async def step(text: str) -> str | None:
        action = parse_action(text)
        assert not isinstance(action, type(None))
        return await s.execute(action)  # type: ignore[arg-type]

    async def go():
        await s.observe()
        results = {
            "click": await step("click(11)"),
            "fill": await step('fill(5, "s3cret")'),
            "select": await step('select(8, "red")'),
            "check": await step("click(6)"),
            "press": await step('press("Tab")'),
            "missing": await step("click(999)"),
            "disabled": await step("click(10)"),
            "covered": await step("click(24)"),
            "fill_button": await step('fill(11, "x")'),
            "select_bad": await step('select(8, "Blue")'),
            "bad_key": await step('press("NoSuchKey")'),
            "blocked": await step('goto("http://example.com/")'),
            "no_back": await step("go_back()"),
            "outside": await step("click_xy(5000, 5)"),
            "scroll": await step('scroll("down")'),
        }
        obs = await s.observe(last_error=results["missing"])
        return results, obs

    results, obs = loop.run_until_complete(go())
    for ok in ("click", "fill", "select", "check", "press", "scroll"):
        assert results[ok] is None, (ok, results[ok])
    assert results["missing"] == "no element with id 999 on the page"
    assert results["disabled"] == "element 10 is disabled"
    assert results["covered"] == "element 24 is covered by <div>"
    assert results["fill_button"] == "element 11 is not a text field"
    assert "no option" in results["select_bad"] and '"Green"' in results["select_bad"]
    assert results["bad_key"] and "NoSuchKey" in results["bad_key"]
    assert (
        results["blocked"]
        == "navigation to http://example.com/ is blocked (outside the task's site)"
    )
    assert results["no_back"] == "there is no previous page in this episode"
    assert results["outside"] == "point (5000, 5) is outside the 1024x768 viewport"
    # the page took the actions, and the error is shown to the policy
    assert obs.last_error == "no element with id 999 on the page"
    assert '[5] textbox "Password" type=password value="s3cret"' in obs.text
    assert '[8] combobox value="Red"' in obs.text
    assert '[6] checkbox "Subscribe"\n' in obs.text  # unchecked now
    focused = [e.id for e in obs.elements.values() if "focused" in e.states]
    assert focused == ["7"]  # Tab moved focus from the checkbox to the radio
    assert loop.run_until_complete(s.page.text_content("#out")) == "clicked 1"


def test_link_out_of_the_site_is_blocked(loop, pool, site) -> None:
    s = fresh_session(loop, pool, site)

    async def go():
        await s.observe()
        await s.page.evaluate("() => { document.querySelector('a').href = 'http://example.com/'; }")
        err = await s.execute(parse_action("click(3)"))  # type: ignore[arg-type]
        # the refusal arrives as an event: poll for it, with a deadline (no fixed sleep)
        deadline = time.monotonic() + 20.0
        while not any(r.navigation for r in s.guard.refusals):  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the guard did not refuse the link in 20 s"
            await asyncio.sleep(0.05)
        return err, await s.observe()

    err, obs = loop.run_until_complete(go())
    assert err is None
    assert (
        obs.last_error == "navigation to http://example.com/ was blocked (outside the task's site)"
    )


def test_screenshot_and_marks(loop, pool, site) -> None:
    s = fresh_session(loop, pool, site)
    plain = loop.run_until_complete(s.observe(screenshot=True))
    marked = loop.run_until_complete(s.observe(screenshot=True, marks=True))
    for obs in (plain, marked):
        assert obs.screenshot_png is not None and obs.screenshot_png.startswith(b"\x89PNG")
    assert plain.screenshot_png != marked.screenshot_png  # the overlay is drawn
    again = loop.run_until_complete(s.observe(screenshot=True))
    assert again.screenshot_png == plain.screenshot_png  # and removed afterwards
    assert again.text == plain.text
