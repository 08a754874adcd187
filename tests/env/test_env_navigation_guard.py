"""The navigation guard: one policy for every request kind; a refused or off-page
navigation is a step error the policy sees, never an environment error."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import html
import json
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from rmsweb.env import guard
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


async def public_resolver(host: str) -> list[str]:
    """Every name is a public address (the test machine has no DNS)."""
    return ["93.184.216.34"]


def test_live_policy_allows_public_pages_and_named_private_origins() -> None:
    policy = live_policy(private_origins=["http://127.0.0.1:8000"])
    policy.resolver = public_resolver
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


@pytest.mark.parametrize(
    "url",
    [
        # Chromium answers these names itself with loopback (net::IsLocalHostname):
        # whatever DNS says, they are this machine
        "http://app.localhost./",
        "http://APP.LocalHost/",
        "http://localhost./",
        "http://LOCALHOST:8000/",
        "http://a.b.localhost.:9/x",
        "http://localhost6/",
        "http://loc%61lhost/",  # Chromium percent-decodes hosts
        "http://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54/",  # full-width
        "http://app\u3002localhost/",  # an ideographic full stop is a dot
        "http://127.0.0.1./",
        "http://127.0.0.%31/",
        "http://0177.0.0.1/",
        "http://0/",
        "http://[::]/",
        "http://169.254.169.254./latest/meta-data/",
        # WHATWG reads "\\" as "/": the host is 127.0.0.1 (urlsplit alone says example.com)
        "http://127.0.0.1\\@example.com/",
        " http://localhost/",
        "http://local\thost/",  # tabs and newlines are dropped
    ],
)
def test_live_policy_refuses_every_spelling_chromium_reads_as_this_machine(url: str) -> None:
    """Refused by the static check, also when DNS says the name is public."""
    policy = live_policy()
    policy.resolver = public_resolver
    assert policy.check_static(url) is not None, url
    reason = check(policy, url)
    assert reason is not None and "private address" in reason, (url, reason)


def test_live_policy_fails_closed_on_names_it_cannot_resolve(monkeypatch) -> None:
    """No answer, an error or a timeout: refused (the browser may resolve what DNS does
    not), and asked again only after FAILURE_TTL_S."""
    calls: list[str] = []

    async def resolver(host: str) -> list[str]:
        calls.append(host)
        if host == "slow.example":
            await asyncio.sleep(10)
        if host == "empty.example":
            return []
        if host == "long.example":
            raise UnicodeError("label too long")
        raise OSError("Name or service not known")

    policy = NavigationPolicy(resolver=resolver, resolve_timeout_s=0.05)
    for host in ("nowhere.invalid", "slow.example", "empty.example", "long.example"):
        assert check(policy, f"https://{host}/") == (
            f"{host} cannot be resolved (refused: the guard cannot tell where it leads)"
        )
    calls.clear()
    assert check(policy, "https://nowhere.invalid/b") is not None
    assert calls == []  # the failure is remembered for a while
    now = guard.time.monotonic()
    monkeypatch.setattr(guard.time, "monotonic", lambda: now + guard.FAILURE_TTL_S + 1)
    assert check(policy, "https://nowhere.invalid/c") is not None
    assert calls == ["nowhere.invalid"]  # and then asked again


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


# Pages that send the browser on to ?to=URL, each in its own way (see do_GET).
REDIRECT_PAGES = {
    "meta": '<title>Meta</title><meta http-equiv="refresh" content="0; url={to}">',
    "js": "<title>JS</title><script>location.href = {to_js};</script>",
    "fetch": (
        "<title>Fetch</title><script>fetch('/redirect?to=' + encodeURIComponent({to_js}))"
        ".then(() => document.title = 'fetched', () => document.title = 'fetch failed');"
        "</script>"
    ),
    # a fetch every millisecond, so some are always waiting on the guard when the page closes
    "storm": (
        "<title>Storm</title><script>setInterval(() => fetch({to_js}).catch(() => {{}}), 1);"
        "</script>"
    ),
}


class Recorder(SimpleHTTPRequestHandler):
    """Serves tests/env/pages; records every path asked for; /slow?s=N waits N s;
    /redirect?to=URL answers 302; /meta, /js and /fetch?to=URL are pages that go there
    by meta refresh, by script, and by a fetch that the server redirects."""

    hits: list[str]

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.hits.append(self.path)
        route, _, query = self.path.partition("?")
        to = urllib.parse.parse_qs(query).get("to", [""])[0]
        if route == "/redirect":
            self.send_response(302)
            self.send_header("Location", to)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if route.lstrip("/") in REDIRECT_PAGES:
            body = REDIRECT_PAGES[route.lstrip("/")].format(
                to=html.escape(to), to_js=json.dumps(to)
            )
            data = f"<!doctype html><html><head>{body}</head><body>x</body></html>".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
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


async def until(cond, what: str, timeout_s: float = 20.0, every_s: float = 0.05) -> None:
    """Poll `cond()` until true; fail after `timeout_s` (a deadline, not a fixed sleep:
    a loaded 2-core machine can be slow, a fast one does not wait)."""
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:g} s: {what}")
        await asyncio.sleep(every_s)


async def _open(pool: BrowserPool, url: str, **session_kw) -> tuple[PageSession, object]:
    async with pool.slot() as slot:
        page = await pool.page(slot)
        await page.goto(url)
        session = PageSession(page, guard=slot.guard, **session_kw)
        session.track_navigation()
        return session, slot


# The last path part of each request guard.html (and its frame) makes to ?other=.
REQUEST_KINDS = (
    "img.png",
    "frame.html",
    "script.js",
    "fetch.json",
    "xhr.json",
    "beacon",
    "worker.json",
    "ws",
    "from-frame.json",
)


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

            def all_refused() -> bool:
                return set(REQUEST_KINDS) <= {r.url.rsplit("/", 1)[-1] for r in slot.guard.refusals}

            with contextlib.suppress(AssertionError):  # the asserts below say which is missing
                await until(all_refused, "every request kind is refused")
            obs = await session.observe()
            return obs, list(slot.guard.refusals)

    obs, refusals = asyncio.run(go())
    assert obs.title == "Guard"
    assert other.hits == []  # nothing at all reached it
    assert any(h.startswith("/frame.html") for h in framer.hits)  # the allowed frame loaded
    refused = {r.url.rsplit("/", 1)[-1] for r in refusals}
    for name in REQUEST_KINDS:
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
            session, slot = await _open(pool, f"{site.origin}/guard.html?other={other.origin}")
            obs = await session.observe()
            link = next(e.id for e in obs.elements.values() if e.name == "away")
            err = await session.execute(parse_action(f"click({link})"))
            await until(
                lambda: any(r.navigation for r in slot.guard.refusals),
                "the refusal arrives (an event)",
            )
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
            session, slot = await _open(pool, f"{site.origin}/guard.html?other={site.origin}")
            await session.page.evaluate("window.__state = 'alive'")
            session.pin_page()
            obs = await session.observe()
            link = next(e.id for e in obs.elements.values() if e.name == "same site")
            click = await session.execute(parse_action(f"click({link})"))
            await until(
                lambda: any(r.navigation for r in slot.guard.refusals), "the pin refuses it"
            )
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
            # ratios, not margins: the waited page takes 2.4 x the action timeout and 1/25
            # of the navigation timeout; the stopped one 30 x its navigation timeout
            waited = await follow(pool, 1.2, nav_timeout=30.0)
            stopped = await follow(pool, 30.0, nav_timeout=1.0)
            return waited, stopped

    (err1, obs1), (err2, obs2) = asyncio.run(go())
    assert err1 is None and obs1.title == "Second page" and obs1.last_error is None
    assert err2 is None and obs2.title == "Guard"
    assert (
        obs2.last_error == f"{site.origin}/slow?s=30.0 did not load within 1 s; loading was stopped"
    )


# Names Chromium resolves itself to this machine (net::IsLocalHostname), without DNS.
LOCAL_NAMES = ("app.localhost", "app.localhost.", "APP.LocalHost", "localhost.", "a.b.localhost")


@pytest.mark.browser
def test_names_chromium_reads_as_this_machine_are_refused_in_the_browser(sites) -> None:
    """Each name loads this machine's site in Chromium when private addresses are
    allowed (so the name does reach it), and is refused under the live policy: by a
    link (the request as Chromium sends it) and by goto (the text the model wrote)."""
    site, _, _ = sites
    port = site.origin.rsplit(":", 1)[1]
    start = f"{site.origin}/guard.html?other={site.origin}"

    async def follow(session: PageSession, url: str):
        await session.page.goto(start)
        await session.page.evaluate("u => document.getElementById('same').href = u", url)
        obs = await session.observe()
        link = next(e.id for e in obs.elements.values() if e.name == "same site")
        return await session.execute(parse_action(f"click({link})"))

    async def go(policy: NavigationPolicy):
        out = []
        async with BrowserPool(1, policy=policy) as pool:
            session, slot = await _open(pool, start)
            for i, name in enumerate(LOCAL_NAMES):
                url = f"http://{name}:{port}/nav2.html?name={i}"
                err = await follow(session, url)
                if policy.allow_private:
                    await session.page.wait_for_url("**/nav2.html?name=*")
                else:
                    n = len(out)
                    await until(
                        lambda n=n: len([r for r in slot.guard.refusals if r.navigation]) > n,
                        f"the guard refuses {url}",
                    )
                obs = await session.observe()
                goto = await session.execute(parse_action(f'goto("{url}")'))
                out.append((name, err, obs.title, obs.last_error, goto))
        return out

    site.hits.clear()
    allowed = asyncio.run(go(live_policy(allow_private=True)))
    for name, err, title, _last, _goto in allowed:
        assert err is None and title == "Second page", name  # Chromium reaches the site
    assert sum(h.startswith("/nav2.html?name=") for h in site.hits) >= len(LOCAL_NAMES)

    site.hits.clear()
    refused = asyncio.run(go(live_policy(private_origins=[site.origin])))
    assert not any(h.startswith("/nav2.html") for h in site.hits)  # nothing reached it
    for name, err, title, last_error, goto in refused:
        assert err is None and title == "Guard", name
        assert last_error is not None and "was blocked (a private address" in last_error, name
        assert goto is not None and "is blocked (a private address" in goto, (name, goto)


@pytest.mark.browser
def test_unresolvable_names_are_refused_in_the_browser(sites) -> None:
    """A name no resolver answers (this machine has no DNS) is refused, not tried."""
    site, _, _ = sites

    async def go():
        async with BrowserPool(1, policy=live_policy(private_origins=[site.origin])) as pool:
            session, slot = await _open(pool, f"{site.origin}/guard.html?other={site.origin}")
            url = "http://nowhere.invalid/page.html"
            await session.page.evaluate("u => document.getElementById('same').href = u", url)
            obs = await session.observe()
            link = next(e.id for e in obs.elements.values() if e.name == "same site")
            err = await session.execute(parse_action(f"click({link})"))
            await until(lambda: slot.guard.refusals, "the guard refuses the link")
            return err, await session.observe()

    err, obs = asyncio.run(go())
    assert err is None and obs.title == "Guard"
    assert obs.last_error == (
        "navigation to http://nowhere.invalid/page.html was blocked (nowhere.invalid cannot "
        "be resolved (refused: the guard cannot tell where it leads))"
    )


METADATA = "http://169.254.169.254/latest/meta-data/"


@pytest.mark.browser
@pytest.mark.parametrize("kind", ["offline", "live"])
def test_requests_waiting_on_the_guard_when_the_page_closes_stay_refused(sites, kind) -> None:
    """Closing a context detaches the guard's CDP session, and Chromium lets the requests
    paused on it go on. A page that fires a forbidden fetch every millisecond always has
    some paused when it closes: none may reach the other site."""
    site, other, _ = sites
    policy = (
        offline_policy([site.origin])
        if kind == "offline"
        else live_policy(private_origins=[site.origin])
    )
    secret = urllib.parse.quote(f"{other.origin}/secret.json", safe="")

    async def go() -> int:
        async with BrowserPool(1, policy=policy) as pool:
            _, slot = await _open(pool, f"{site.origin}/storm?to={secret}")
            guard = slot.guard
            await until(lambda: len(guard.refusals) >= 20, "the guard refuses the storm")
        return len(guard.refusals)

    other.hits.clear()
    refused = [asyncio.run(go()) for _ in range(5)]
    assert min(refused) >= 20
    assert other.hits == []  # not one fetch got through while the page closed


@pytest.mark.browser
@pytest.mark.parametrize("kind", ["offline", "live"])
def test_allowed_pages_that_redirect_to_private_addresses_are_refused(sites, kind) -> None:
    """The usual way around a guard: an allowed page that sends the browser on, by an
    HTTP 302, a meta refresh, a script, or a fetch the server redirects, to the cloud
    metadata address or to another site on this machine. Every hop is checked."""
    site, other, _ = sites
    policy = (
        offline_policy([site.origin])
        if kind == "offline"
        else live_policy(private_origins=[site.origin])
    )
    secret = f"{other.origin}/secret.json"
    cases = [(way, to) for way in ("redirect", "meta", "js", "fetch") for to in (METADATA, secret)]

    async def go():
        seen = []
        async with BrowserPool(1, policy=policy) as pool:
            session, slot = await _open(pool, f"{site.origin}/nav2.html")
            for way, to in cases:
                url = f"{site.origin}/{way}?to={urllib.parse.quote(to, safe='')}"
                before = sum(r.url == to for r in slot.guard.refusals)
                with contextlib.suppress(Exception):  # a refused 302 fails the goto itself
                    await session.page.goto(url, wait_until="commit")
                await until(  # this way's own refusal, not an earlier way's of the same URL
                    lambda to=to, before=before: (
                        sum(r.url == to for r in slot.guard.refusals) > before
                    ),
                    f"the guard refuses {way} -> {to}",
                )
                seen.append((way, to, session.page.url))
        return seen, list(slot.guard.refusals)

    other.hits.clear()
    seen, refusals = asyncio.run(go())
    assert other.hits == [], (seen, refusals, site.hits)  # no hop reached the other site
    for _way, to, url in seen:
        assert not url.startswith(to)  # the page never showed the target
    reasons = {r.url: r.reason for r in refusals}
    if kind == "offline":
        assert reasons[METADATA] == reasons[secret] == "outside the task's site"
    else:
        assert reasons[METADATA] == "a private address (169.254.169.254)"
        assert reasons[secret] == "a private address (127.0.0.1)"
    # the allowed first hop of each case did load
    for way in ("redirect", "meta", "js", "fetch"):
        assert any(h.startswith(f"/{way}?") for h in site.hits), way
