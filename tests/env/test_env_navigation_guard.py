"""The navigation guard: one policy for every request kind; a refused or off-page
navigation is a step error the policy sees, never an environment error."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
import time
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from rmsweb.env.actions import parse_action
from rmsweb.env.guard import GuardLog, NavigationPolicy, live_policy, offline_policy
from rmsweb.env.pool import BrowserPool
from rmsweb.env.session import PageSession

PAGES = Path(__file__).parent / "pages"


# --------------------------------------------------------------------------- policy alone


def check(policy: NavigationPolicy, url: str, navigation: bool = True) -> str | None:
    return asyncio.run(policy.check(url, navigation=navigation))


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "chrome://settings",
        "data:text/html,<p>hi</p>",
        "javascript:alert(1)",
        "view-source:https://example.com/",
        "about:config",
    ],
)
def test_live_policy_refuses_browser_internal_schemes(url: str) -> None:
    reason = check(live_policy(), url)
    assert reason is not None and reason.endswith(": URL")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/",
        "http://localhost/",
        "http://app.localhost/",
        "http://printer.local/",
        "http://10.1.2.3/",
        "http://192.168.0.1/admin",
        "http://172.16.5.4/",
        "http://169.254.169.254/latest/meta-data/",  # cloud metadata (link-local)
        "http://[::1]:8080/",
        "http://[fe80::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://2130706433/",  # 127.0.0.1 as one number
        "http://0x7f.1/",
        "http://0.0.0.0/",
        "ws://127.0.0.1:9000/socket",
    ],
)
def test_live_policy_refuses_private_addresses(url: str) -> None:
    reason = check(live_policy(), url)
    assert reason is not None and "private address" in reason
    assert check(live_policy(allow_private=True), url) is None


def test_live_policy_allows_public_pages_and_named_private_origins() -> None:
    policy = live_policy(private_origins=["http://127.0.0.1:8000"])
    assert check(policy, "https://www.allrecipes.com/recipes/") is None
    assert check(policy, "http://8.8.8.8/") is None
    assert check(policy, "http://127.0.0.1:8000/search?q=x") is None
    assert check(policy, "http://127.0.0.1:8001/") == "a private address (127.0.0.1)"
    # data: and blob: subresources are fine (inline images); as navigations they are not
    assert check(policy, "data:image/png;base64,AAAA", navigation=False) is None
    assert check(policy, "about:blank") is None


def test_live_policy_resolves_names_to_catch_private_targets() -> None:
    calls: list[str] = []

    async def resolver(host: str) -> list[str]:
        calls.append(host)
        return {"rebind.example": ["127.0.0.1"], "shop.example": ["93.184.216.34"]}[host]

    policy = NavigationPolicy(resolver=resolver)
    assert (
        check(policy, "https://rebind.example/") == "rebind.example resolves to a private address"
    )
    assert check(policy, "https://shop.example/a") is None
    assert check(policy, "https://shop.example/b") is None
    assert calls == ["rebind.example", "shop.example"]  # cached per host


def test_offline_policy_allows_only_its_origins() -> None:
    policy = offline_policy(["http://127.0.0.1:8000/"])
    assert check(policy, "http://127.0.0.1:8000/miniwob/x.html") is None
    assert check(policy, "http://127.0.0.1:8000") is None
    assert check(policy, "http://127.0.0.1:80001/") == "outside the task's site"
    assert check(policy, "http://example.com/") == "outside the task's site"
    assert check(policy, "javascript:void(0)") == "a javascript: URL"


def test_pinned_log_refuses_new_documents_only() -> None:
    log = GuardLog(offline_policy(["http://127.0.0.1:8000"]))
    same = "http://127.0.0.1:8000/other.html"
    assert asyncio.run(log.decide(same, navigation=True)) is None
    log.pin()
    assert asyncio.run(log.decide(same, navigation=True)) == "it would leave the task page"
    assert asyncio.run(log.decide(same, navigation=False)) is None  # its scripts still load
    log.reset()
    assert not log.pinned and log.refusals == []


# --------------------------------------------------------------------------- in a browser


class Recorder(SimpleHTTPRequestHandler):
    """Serves tests/env/pages; records every path asked for; /slow?s=N waits N s."""

    hits: list[str]

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.hits.append(self.path)
        if self.path.startswith("/slow"):
            time.sleep(float(self.path.split("s=")[1]))
            self.path = "/nav2.html"
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # a stopped load
            super().do_GET()


class Site:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self.hits: list[str] = []
        handler = functools.partial(
            type("H", (Recorder,), {"hits": self.hits}), directory=str(PAGES)
        )
        self.httpd = ThreadingHTTPServer((host, 0), handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()
        self.origin = f"http://{host}:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def sites() -> Iterator[tuple[Site, Site, Site]]:
    """The task's site, an origin it must not reach, and an allowed cross-site origin
    ("localhost" and "127.0.0.1" are different sites to Chromium)."""
    made = [Site("127.0.0.1"), Site("127.0.0.1"), Site("localhost")]
    yield made[0], made[1], made[2]
    for s in made:
        s.close()


async def _open(pool: BrowserPool, url: str, **session_kw) -> tuple[PageSession, object]:
    async with pool.slot() as slot:
        page = await pool.page(slot)
        await page.goto(url)
        session = PageSession(page, guard=slot.guard, **session_kw)
        session.track_navigation()
        return session, slot


@pytest.mark.browser
@pytest.mark.parametrize("kind", ["offline", "live"])
def test_every_request_kind_is_guarded(sites, kind: str) -> None:
    """Frames (also cross-site ones), scripts, images, fetch, XHR, beacons, workers and
    WebSockets: none reaches the refused origin, and the page still loads."""
    site, other, framer = sites
    other.hits.clear()
    framer.hits.clear()
    policy = (
        offline_policy([site.origin, framer.origin])
        if kind == "offline"
        else live_policy(private_origins=[site.origin, framer.origin])
    )
    url = f"{site.origin}/guard.html?other={other.origin}&frame={framer.origin}"

    async def go():
        async with BrowserPool(1, policy=policy) as pool:
            session, slot = await _open(pool, url)
            await asyncio.sleep(1.0)  # let the page's requests run
            obs = await session.observe()
            return obs, list(slot.guard.refusals)

    obs, refusals = asyncio.run(go())
    assert obs.title == "Guard"
    assert other.hits == []  # nothing at all reached it
    assert any(h.startswith("/frame.html") for h in framer.hits)  # the allowed frame loaded
    refused = {r.url.rsplit("/", 1)[-1] for r in refusals}
    for name in (
        "img.png",
        "frame.html",
        "script.js",
        "fetch.json",
        "xhr.json",
        "beacon",
        "worker.json",
        "ws",
        "from-frame.json",
    ):
        assert name in refused, (name, refused)
    # subresources are not navigations: the policy is not told about them
    assert obs.last_error is None
    reason = "outside the task's site" if kind == "offline" else "a private address (127.0.0.1)"
    assert all(r.reason == reason for r in refusals)


@pytest.mark.browser
def test_refused_link_leaves_the_page_in_place_and_is_reported(sites) -> None:
    site, other, _ = sites

    async def go():
        async with BrowserPool(1, policy=live_policy(private_origins=[site.origin])) as pool:
            session, _slot = await _open(pool, f"{site.origin}/guard.html?other={other.origin}")
            obs = await session.observe()
            link = next(e.id for e in obs.elements.values() if e.name == "away")
            err = await session.execute(parse_action(f"click({link})"))
            await asyncio.sleep(0.3)  # the refusal arrives as an event
            after = await session.observe()
            goto = await session.execute(parse_action('goto("file:///etc/passwd")'))
            js = await session.execute(parse_action('goto("javascript:alert(1)")'))
            return err, after, goto, js, session.page.url

    err, after, goto, js, url = asyncio.run(go())
    assert err is None
    assert after.title == "Guard" and url.startswith(f"{site.origin}/guard.html")
    assert after.last_error == (
        f"navigation to {other.origin}/page.html was blocked (a private address (127.0.0.1))"
    )
    assert goto == "navigation to file:///etc/passwd is blocked (a file: URL)"
    assert js == "navigation to javascript:alert(1) is blocked (a javascript: URL)"


@pytest.mark.browser
def test_pinned_page_same_origin_navigation_is_a_step_error(sites) -> None:
    """A single-page task (MiniWoB) pins its page: a same-origin link, goto or reload is
    refused, the page (and its state) stays, and the policy is told why."""
    site, _, _ = sites

    async def go():
        async with BrowserPool(1, policy=offline_policy([site.origin])) as pool:
            session, _slot = await _open(pool, f"{site.origin}/guard.html?other={site.origin}")
            await session.page.evaluate("window.__state = 'alive'")
            session.pin_page()
            obs = await session.observe()
            link = next(e.id for e in obs.elements.values() if e.name == "same site")
            click = await session.execute(parse_action(f"click({link})"))
            await asyncio.sleep(0.3)
            after = await session.observe()
            goto = await session.execute(parse_action(f'goto("{site.origin}/nav2.html")'))
            back = await session.execute(parse_action("go_back()"))
            state = await session.page.evaluate("window.__state")
            return click, after, goto, back, state

    click, after, goto, back, state = asyncio.run(go())
    assert click is None and state == "alive"
    assert after.title == "Guard"
    assert after.last_error == (
        f"navigation to {site.origin}/nav2.html was blocked (it would leave the task page)"
    )
    assert (
        goto == f"navigation to {site.origin}/nav2.html is blocked (it would leave the task page)"
    )
    assert back in (
        "there is no previous page in this episode",
        "navigation back is blocked (it would leave the task page)",
    )


@pytest.mark.browser
def test_popup_link_opens_in_the_same_page(sites) -> None:
    site, _, _ = sites

    async def go():
        async with BrowserPool(1, policy=offline_policy([site.origin])) as pool:
            session, slot = await _open(pool, f"{site.origin}/guard.html?other={site.origin}")
            obs = await session.observe()
            link = next(e.id for e in obs.elements.values() if e.name == "new tab")
            err = await session.execute(parse_action(f"click({link})"))
            await session.page.wait_for_url("**/nav2.html")
            return err, await session.observe(), len(slot.context.pages)

    err, obs, pages = asyncio.run(go())
    assert err is None and obs.title == "Second page" and pages == 1


@pytest.mark.browser
def test_slow_page_is_waited_for_not_an_env_error(sites) -> None:
    """A link whose page takes longer than the action timeout: the next observation
    waits for it (no EnvError); past navigation_timeout_s loading is stopped and the
    policy is told, on the page it was on."""
    site, _, _ = sites
    page_url = f"{site.origin}/guard.html?other={site.origin}"

    async def follow(pool: BrowserPool, seconds: float, nav_timeout: float):
        session, _slot = await _open(
            pool, page_url, action_timeout_s=0.5, navigation_timeout_s=nav_timeout
        )
        await session.page.evaluate(f"document.getElementById('same').href = '/slow?s={seconds}'")
        obs = await session.observe()
        link = next(e.id for e in obs.elements.values() if e.name == "same site")
        err = await session.execute(parse_action(f"click({link})"))
        return err, await session.observe()

    async def go():
        async with BrowserPool(1, policy=offline_policy([site.origin])) as pool:
            waited = await follow(pool, 1.2, nav_timeout=10.0)
            stopped = await follow(pool, 3.0, nav_timeout=1.0)
            return waited, stopped

    (err1, obs1), (err2, obs2) = asyncio.run(go())
    assert err1 is None and obs1.title == "Second page" and obs1.last_error is None
    assert err2 is None and obs2.title == "Guard"
    assert (
        obs2.last_error == f"{site.origin}/slow?s=3.0 did not load within 1 s; loading was stopped"
    )
