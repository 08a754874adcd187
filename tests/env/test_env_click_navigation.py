"""An action that starts a navigation returns once the new document has committed.

Playwright's mouse.click returns once the input is dispatched, often before the page
has asked to navigate (measured: 63 of 100 link clicks returned before any request);
an observation taken then read the old page, and the policy acted on it a second time
(the rehearsal's oracle test failed 3 runs in 20 that way). Actions that start no new
document (a #fragment, a javascript: URL, a refused site, a 204 answer) must not wait for one.
"""

from __future__ import annotations

import asyncio

import pytest

from rmsweb.env import session as session_mod
from rmsweb.env.actions import parse_action
from rmsweb.env.guard import offline_policy
from rmsweb.env.pool import BrowserPool
from rmsweb.env.requested import starts_document
from rmsweb.env.session import PageSession

pytestmark = pytest.mark.browser
CLICKS = 25  # without the wait about 6 in 10 clicks return before the commit


def test_what_starts_a_new_document() -> None:
    here = "http://a.test/p.html?x=1"
    assert starts_document("http://a.test/q.html", here)
    assert starts_document(here, here)  # a reload
    assert starts_document("http://a.test/q.html#top", here)
    assert not starts_document(here + "#top", here)
    assert not starts_document("http://a.test/p.html?x=1#b", here + "#a")
    assert not starts_document("JavaScript:void(0)", here)


async def _session(pool: BrowserPool, slot, url: str, **kw) -> PageSession:
    page = await pool.page(slot)
    await page.goto(url)
    session = PageSession(page, guard=slot.guard, **kw)
    session.track_navigation()
    return session


def _id(obs, name: str) -> int:
    return next(e.id for e in obs.elements.values() if e.name == name)


def test_link_click_returns_on_the_new_page(site) -> None:
    async def go() -> list[tuple[int, str]]:
        seen = []
        async with (
            BrowserPool(1, policy=offline_policy([site.origin])) as pool,
            pool.slot() as slot,
        ):
            for i in range(CLICKS):
                session = await _session(pool, slot, f"{site.origin}/links.html?{i}")
                link = _id(await session.observe(), "next page")
                assert await session.execute(parse_action(f"click({link})")) is None
                seen.append((session.navigations, session.page.url))  # no await between
                assert (await session.observe()).title == "Second page"
                session.close()
        return seen

    seen = asyncio.run(go())
    assert seen == [(1, f"{site.origin}/nav2.html")] * CLICKS


def test_enter_in_a_form_returns_on_the_new_page(site) -> None:
    async def go() -> tuple[int, str]:
        async with (
            BrowserPool(1, policy=offline_policy([site.origin])) as pool,
            pool.slot() as slot,
        ):
            session = await _session(pool, slot, f"{site.origin}/links.html")
            box = next(e.id for e in (await session.observe()).elements.values()
                       if e.role == "textbox")  # fmt: skip
            await session.execute(parse_action(f'fill({box}, "x")'))
            assert await session.execute(parse_action('press("Enter")')) is None
            return session.navigations, session.page.url

    assert asyncio.run(go()) == (1, f"{site.origin}/nav2.html?q=x")


def test_clicks_that_load_no_document_do_not_wait_for_one(site, monkeypatch) -> None:
    """With the grace for a dropped navigation and the navigation timeout made endless,
    a wrong wait hangs (and wait_for fails the test)."""
    monkeypatch.setattr(session_mod, "REQUEST_GRACE_S", 1e9)

    async def go() -> list[tuple[str | None, int, str, str | None]]:
        out = []
        async with (
            BrowserPool(1, policy=offline_policy([site.origin])) as pool,
            pool.slot() as slot,
        ):
            session = await _session(
                pool, slot, f"{site.origin}/links.html", navigation_timeout_s=1e6
            )
            await session.page.route("**/nocontent.html", lambda route: route.fulfill(status=204))
            for name in ("to the top", "does nothing", "another site", "no content"):
                link = _id(await session.observe(), name)
                err = await asyncio.wait_for(session.execute(parse_action(f"click({link})")), 30)
                obs = await session.observe()
                out.append((err, session.navigations, obs.title, obs.last_error))
        return out

    top, nothing, away, empty = asyncio.run(go())
    # a #fragment is a same-document navigation: Playwright counts it, nothing loads
    assert top[:3] == (None, 1, "Links") and nothing[:3] == (None, 1, "Links")
    assert away[:3] == (None, 1, "Links")
    assert away[3] is not None and "127.0.0.2" in away[3]  # the refusal is noted
    assert empty == (None, 1, "Links", None)  # a 204 leaves the page as it was
