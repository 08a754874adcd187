"""IPv6 literals that embed an IPv4 address are judged by the address they embed.

`[::127.0.0.1]` (IPv4-compatible) and `[64:ff9b::7f00:1]` (NAT64) passed the live guard
as public IPv6 addresses; so did 6to4 and the translated form. Each form below is
refused by the static check, by the resolver's answer (a DNS64 network answers names
with NAT64 addresses), and in Chromium: by a link (the request as Chromium sends it,
canonicalised) and by goto (the text the model wrote). Nothing here connects anywhere
but 127.0.0.1: the browser test first asserts the static refusals, and only loads
pages on the local site.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from rmsweb.env.actions import parse_action
from rmsweb.env.guard import NavigationPolicy, live_policy
from rmsweb.env.pool import BrowserPool
from rmsweb.env.session import PageSession

PAGES = Path(__file__).parent / "pages"

# (form, host as written): each embeds a private IPv4 address
EMBEDDING_PRIVATE = [
    ("compatible", "[::127.0.0.1]"),
    ("compatible, hex", "[::7f00:1]"),
    ("mapped", "[::ffff:127.0.0.1]"),
    ("mapped, long and upper case", "[0:0:0:0:0:FFFF:7F00:0001]"),
    ("translated (SIIT)", "[::ffff:0:127.0.0.1]"),
    ("NAT64", "[64:ff9b::127.0.0.1]"),
    ("NAT64, hex", "[64:ff9b::7f00:1]"),
    ("NAT64 to the metadata address", "[64:ff9b::a9fe:a9fe]"),
    ("NAT64 to a private network", "[64:ff9b::10.0.0.1]"),
    ("NAT64 local-use prefix", "[64:ff9b:1::7f00:1]"),
    ("6to4", "[2002:7f00:1::]"),
    ("6to4 of 192.168.0.1", "[2002:c0a8:1::1]"),
    ("Teredo, client 127.0.0.1", "[2001:0:4136:e378:8000:63bf:80ff:fffe]"),
    ("Teredo, server 10.0.0.1", "[2001:0:a00:1::f7f7:f7f7]"),
]
# the same forms around public IPv4 addresses stay public
EMBEDDING_PUBLIC = ["[::ffff:8.8.8.8]", "[64:ff9b::8.8.8.8]", "[2002:808:808::1]", "[::1.1.1.1]"]


def check(policy: NavigationPolicy, url: str) -> str | None:
    return asyncio.run(policy.check(url, navigation=True))


@pytest.mark.parametrize(("form", "host"), EMBEDDING_PRIVATE, ids=[f for f, _ in EMBEDDING_PRIVATE])
def test_ipv6_that_embeds_a_private_ipv4_is_private(form: str, host: str) -> None:
    url = f"http://{host}:8000/page"
    reason = live_policy().check_static(url)
    assert reason is not None and reason.startswith("a private address ("), (form, reason)
    assert check(live_policy(), url) == reason
    assert check(live_policy(allow_private=True), url) is None


@pytest.mark.parametrize("host", EMBEDDING_PUBLIC)
def test_ipv6_that_embeds_a_public_ipv4_is_public(host: str) -> None:
    assert live_policy().check_static(f"https://{host}/") is None
    assert check(live_policy(), f"https://{host}/") is None


def test_a_name_that_resolves_to_an_embedding_address_is_refused() -> None:
    """DNS64 answers every IPv4-only name with a NAT64 address."""

    async def dns64(host: str) -> list[str]:
        return {"rebind.example": ["64:ff9b::7f00:1"], "shop.example": ["64:ff9b::5db8:d822"]}[host]

    policy = NavigationPolicy(resolver=dns64)
    assert check(policy, "https://rebind.example/") == (
        "rebind.example resolves to a private address"
    )
    assert check(policy, "https://shop.example/") is None


# --------------------------------------------------------------------------- in a browser


@pytest.fixture(scope="module")
def site() -> Iterator[tuple[str, list[str]]]:
    """A local site on 127.0.0.1 that records the paths asked for."""
    hits: list[str] = []

    class Handler(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            hits.append(self.path)
            super().do_GET()

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=PAGES))
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", hits
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.browser
def test_each_embedding_form_is_refused_in_chromium(site) -> None:
    origin, hits = site
    port = origin.rsplit(":", 1)[1]
    urls = [
        f"http://{host}:{port}/nav2.html?form={i}" for i, (_, host) in enumerate(EMBEDDING_PRIVATE)
    ]
    policy = live_policy(private_origins=[origin])
    # first without a browser: a form the guard let through would make Chromium connect
    for url in urls:
        assert policy.check_static(url) is not None, url
    start = f"{origin}/guard.html?other={origin}"

    async def go():
        out = []
        async with BrowserPool(1, policy=policy) as pool, pool.slot() as slot:
            page = await pool.page(slot)
            session = PageSession(page, guard=slot.guard)
            session.track_navigation()
            for url in urls:
                await page.goto(start)
                await page.evaluate("u => document.getElementById('same').href = u", url)
                obs = await session.observe()
                link = next(e.id for e in obs.elements.values() if e.name == "same site")
                n = len([r for r in slot.guard.refusals if r.navigation])
                err = await session.execute(parse_action(f"click({link})"))
                deadline = asyncio.get_running_loop().time() + 20
                while len([r for r in slot.guard.refusals if r.navigation]) == n:
                    assert asyncio.get_running_loop().time() < deadline, f"no refusal of {url}"
                    await asyncio.sleep(0.05)
                refusal = [r for r in slot.guard.refusals if r.navigation][-1]
                after = await session.observe()
                goto = await session.execute(parse_action(f'goto("{url}")'))
                out.append((url, err, refusal, after, goto))
        return out

    hits.clear()
    results = asyncio.run(go())
    assert not any(h.startswith("/nav2.html") for h in hits)  # nothing reached the site
    for url, err, refusal, after, goto in results:
        assert err is None and after.title == "Guard", url
        # Chromium sends the canonical spelling ([::7f00:1] for [::127.0.0.1]): refused too
        assert refusal.reason.startswith("a private address ("), (url, refusal)
        assert after.last_error is not None and "was blocked (a private address" in after.last_error
        assert goto is not None and "is blocked (a private address" in goto, (url, goto)
