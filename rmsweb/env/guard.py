"""The navigation guard: which URLs an episode's page may load, for every request kind.

One policy object answers "may this URL load?" for two kinds of suites:

1. Offline suites (`allowed_origins` set): only those origins, nothing else.
2. Live suites (`allowed_origins` None): the open web under a safety policy. Navigations
   to file:, chrome:, data:, javascript: (and other browser-internal schemes) are refused,
   and so is any request to a private, loopback, link-local or otherwise non-public
   address, unless the suite allows private addresses (`allow_private`), or names the
   private origins it may reach (`private_origins`: a local site standing in for a live
   one, and nothing else on this machine). Host names are resolved (cached) so that a public
   name pointing at 127.0.0.1 is refused too. The live check fails closed: a name that
   cannot be resolved (or not in time) is refused, because Chromium resolves some names
   itself without asking DNS (`localhost`, `*.localhost`, with or without a trailing
   dot, in any case: this machine), so "the browser will fail too" does not hold. Hosts
   are compared as Chromium canonicalises them (percent-decoded, NFKC-folded, lower case,
   trailing dots dropped, backslashes read as slashes, numeric IPv4 forms), so a spelling
   the browser reads as this machine is refused by the static check already; an IPv6
   literal that embeds an IPv4 address (mapped, compatible, NAT64, 6to4, Teredo) is
   judged by the address it embeds. The browser
   resolves names itself later, so a DNS-rebinding site could still slip through: this
   guard keeps honest agents on public pages, it is not a sandbox.

`install_guard` applies the policy to a browser context:
- every HTTP(S) request of the page (documents, frames, scripts, images, fetch/XHR,
  beacons, dedicated workers) through CDP request interception (`Fetch`). Chromium is
  launched with site isolation trials off (launch.py) so cross-site iframes stay in the
  page's process and their requests pass here too;
- WebSockets through Playwright's WebSocket routing (CDP `Fetch` never sees them);
- pop-ups: an init script makes `window.open` and `target=_blank` links open in the
  same page, so no second page loads anything unguarded (the pool still closes any
  page that appears).

A refused document load is failed with `Aborted`, which Chromium treats like a
cancelled navigation: the page stays where it was (no error page replaces it), and
the refusal is logged so the next observation can tell the policy. That makes a
blocked navigation a step error, never a lost task page. Closing a context detaches the
guard's CDP session, and Chromium then lets the requests still paused on it go on, so the
pool calls `GuardLog.shut` first: everything is refused from then on, the pages are
unloaded (their scripts stop; what they left paused is cancelled) and the answers in
flight are waited for. `GuardLog.pin()` (used by
single-page suites such as MiniWoB) additionally refuses any new main-frame document
once the task page is loaded, so leaving or reloading the task page is a step error too.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import re
import socket
import time
import unicodedata
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit

log = logging.getLogger(__name__)

# Schemes a page may never be navigated to. data: and blob: subresources (inline
# images, fonts) are not network requests and never reach the guard.
BLOCKED_SCHEMES = frozenset(
    {
        "file",
        "chrome",
        "chrome-extension",
        "chrome-untrusted",
        "devtools",
        "view-source",
        "filesystem",
        "data",
        "javascript",
        "ftp",
    }
)
WEB_SCHEMES = frozenset({"http", "https", "ws", "wss"})
# Names that mean "this machine or its network" whatever DNS says (compared after
# canonical_host: lower case, no trailing dot). Chromium answers "localhost" and
# "*.localhost" itself with loopback (net::IsLocalHostname); older builds also
# "localhost6" and "localhost.localdomain".
PRIVATE_NAMES = frozenset(
    {"localhost", "localhost6", "localhost.localdomain", "localhost6.localdomain6", "local"}
)
PRIVATE_SUFFIXES = (".localhost", ".local", ".internal", ".home.arpa", ".localdomain")
# How long an unresolvable name stays refused without asking again (a transient DNS
# failure must not refuse a site for the whole run; a failing name must not cost a
# resolver timeout per request of its page).
FAILURE_TTL_S = 30.0

OUTSIDE_SITE = "outside the task's site"
LEAVES_TASK_PAGE = "it would leave the task page"
CLOSING = "the page is closing"
FETCH_ALL = {"patterns": [{"urlPattern": "*", "requestStage": "Request"}]}  # every request
DRAIN_TIMEOUT_S = 2.0  # how long closing waits for the guard's decisions in flight

# Make every pop-up a same-page navigation (runs in every frame before page scripts).
SAME_PAGE_JS = """(() => {
  const open = (url) => { if (url) window.location.assign(url); return null; };
  try { Object.defineProperty(window, 'open', {value: open, configurable: true}); } catch (e) {}
  const retarget = (ev) => {
    const el = ev.target && ev.target.closest && ev.target.closest('a[target], form[target]');
    if (el) el.setAttribute('target', '_self');
  };
  document.addEventListener('click', retarget, true);
  document.addEventListener('submit', retarget, true);
})();"""


@dataclass(frozen=True, slots=True)
class Refusal:
    """One request the guard refused."""

    url: str
    reason: str
    navigation: bool  # a main-frame document load (the policy is told about these)


@dataclass
class NavigationPolicy:
    """May `url` load? Offline: only `allowed_origins`. Live: the safety policy.

    `resolver` maps a host name to its addresses (default: the system resolver); tests
    replace it. Answers per host are cached for the policy's lifetime; a name that
    cannot be resolved is refused, and asked again after FAILURE_TTL_S.
    """

    allowed_origins: tuple[str, ...] | None = None
    allow_private: bool = False
    private_origins: tuple[str, ...] = ()
    resolve_timeout_s: float = 2.0
    resolver: Callable[[str], Awaitable[list[str]]] | None = None
    # host -> True/False (resolves to a private address or not), or the time it failed
    _private_hosts: dict[str, bool | float] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.allowed_origins is not None:
            self.allowed_origins = tuple(o.rstrip("/") for o in self.allowed_origins)
        self.private_origins = tuple(o.rstrip("/") for o in self.private_origins)

    @property
    def live(self) -> bool:
        return self.allowed_origins is None

    async def check(self, url: str, *, navigation: bool = True) -> str | None:
        """None when `url` may load; else why not (shown to the policy)."""
        reason = self.check_static(url, navigation=navigation)
        if reason is not None or not self.live or self.allow_private:
            return reason
        if _in_origins(url, self.private_origins):
            return None
        host = canonical_host(_split(url))
        if _literal_ip(host) is not None:
            return None  # a public address literal (the static check refused the others)
        verdict = await self._resolves_private(host)
        if verdict is None:
            return f"{host} cannot be resolved (refused: the guard cannot tell where it leads)"
        if verdict:
            return f"{host} resolves to a private address"
        return None

    def check_static(self, url: str, *, navigation: bool = True) -> str | None:
        """The checks that need no DNS (schemes, origins, literal addresses, local names)."""
        try:
            parts = _split(url)
        except ValueError:
            return "a URL the guard cannot read"
        scheme = parts.scheme.lower()
        if scheme == "about":
            return None if url in ("about:blank", "about:srcdoc") else f"a {scheme}: URL"
        if scheme in ("data", "blob") and not navigation:
            return None
        if scheme in BLOCKED_SCHEMES or scheme not in WEB_SCHEMES:
            return f"a {scheme or 'relative'}: URL"
        if self.allowed_origins is not None:
            return None if _in_origins(url, self.allowed_origins) else OUTSIDE_SITE
        host = canonical_host(parts)
        if not host:
            return "a URL without a host"
        if (
            not self.allow_private
            and _private_host(host)
            and not _in_origins(url, self.private_origins)
        ):
            return f"a private address ({host})"
        return None

    async def _resolves_private(self, host: str) -> bool | None:
        """Whether `host` resolves to a private address; None when it cannot be resolved."""
        known = self._private_hosts.get(host)
        if isinstance(known, bool):
            return known
        if known is not None and time.monotonic() - known < FAILURE_TTL_S:
            return None
        try:
            addresses = await asyncio.wait_for(
                (self.resolver or _system_resolve)(host), self.resolve_timeout_s
            )
        except Exception:  # OSError, a timeout, UnicodeError for an over-long label, ...
            addresses = []
        if not addresses:  # fail closed: Chromium may resolve what DNS does not
            self._private_hosts[host] = time.monotonic()
            return None
        self._private_hosts[host] = any(_private_ip(a) for a in addresses)
        return self._private_hosts[host]


@dataclass
class GuardLog:
    """One slot's guard state: its policy, what it refused, and the task-page pin."""

    policy: NavigationPolicy
    refusals: list[Refusal] = field(default_factory=list)
    pinned: bool = False  # refuse every new main-frame document (single-page tasks)
    closing: bool = False  # refuse everything: the context is about to close
    # The guard's answers not sent yet, one task per paused request (held here, too, so
    # the tasks are not collected midway).
    answering: set[asyncio.Future] = field(default_factory=set, repr=False)
    session: Any = field(default=None, repr=False)  # the CDP session install_guard opened

    def pin(self) -> None:
        self.pinned = True

    def reset(self) -> None:
        """A new episode: nothing refused yet, nothing pinned."""
        self.refusals.clear()
        self.pinned = False

    async def decide(self, url: str, *, navigation: bool) -> str | None:
        if self.closing:
            return CLOSING
        if navigation and self.pinned:
            return LEAVES_TASK_PAGE
        return await self.policy.check(url, navigation=navigation)

    async def shut(self, context: Any) -> None:
        """Call before closing the guarded context. Closing detaches the guard's CDP
        session, and Chromium lets every request still paused on it go on: a forbidden
        fetch fired as the page closes would reach its server. So: refuse everything from
        now on, take the context offline (a request let go on fails instead of leaving
        the machine), and wait for the decisions in flight to be sent."""
        self.closing = True
        with contextlib.suppress(Exception):  # a context that is gone already
            await asyncio.wait_for(context.set_offline(True), DRAIN_TIMEOUT_S)
        for page in list(context.pages):
            # Unload the documents: their timers and scripts stop asking for anything, and
            # the requests they left paused are cancelled, not let go on.
            with contextlib.suppress(Exception):
                await page.goto("about:blank", wait_until="commit", timeout=DRAIN_TIMEOUT_S * 1000)
        if self.session is not None:
            # A round trip on the guard's session: every requestPaused Chromium sent
            # before its answer is in `answering` when it returns.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.session.send("Page.getFrameTree"), DRAIN_TIMEOUT_S)
        if self.answering:
            await asyncio.wait(set(self.answering), timeout=DRAIN_TIMEOUT_S)


def offline_policy(origins: Sequence[str]) -> NavigationPolicy:
    return NavigationPolicy(allowed_origins=tuple(origins))


def live_policy(
    *, allow_private: bool = False, private_origins: Sequence[str] = ()
) -> NavigationPolicy:
    return NavigationPolicy(
        allowed_origins=None, allow_private=allow_private, private_origins=tuple(private_origins)
    )


async def install_guard(context: Any, page: Any, guard: GuardLog) -> None:
    """Apply `guard` to every request of `page` (one page per context) and its frames."""
    cdp = await context.new_cdp_session(page)
    tree = await cdp.send("Page.getFrameTree")
    main_frame = tree["frameTree"]["frame"]["id"]  # stable for the page's lifetime

    guard.session = cdp

    def on_paused(event: dict[str, Any]) -> None:
        # Registered synchronously as the event arrives, so GuardLog.shut can wait for it.
        task = asyncio.ensure_future(paused(event))
        guard.answering.add(task)
        task.add_done_callback(guard.answering.discard)

    async def paused(event: dict[str, Any]) -> None:
        url = event["request"]["url"]
        document = event.get("resourceType") == "Document"
        main = document and event.get("frameId") == main_frame
        try:
            reason = await guard.decide(url, navigation=document)
            if reason is None:
                await cdp.send("Fetch.continueRequest", {"requestId": event["requestId"]})
                return
            guard.refusals.append(Refusal(url, reason, navigation=main))
            # Aborted: the navigation is cancelled and the page stays; BlockedByClient
            # would replace it with Chromium's error page.
            error = "Aborted" if document else "BlockedByClient"
            await cdp.send(
                "Fetch.failRequest", {"requestId": event["requestId"], "errorReason": error}
            )
        except Exception as exc:  # the page went away meanwhile
            log.debug("navigation guard: %s", exc)

    cdp.on("Fetch.requestPaused", on_paused)
    await cdp.send("Fetch.enable", FETCH_ALL)

    async def websocket(ws: Any) -> None:
        reason = await guard.decide(ws.url, navigation=False)
        if reason is None:
            ws.connect_to_server()  # messages then flow both ways untouched
        else:
            guard.refusals.append(Refusal(ws.url, reason, navigation=False))
            await ws.close()

    await context.route_web_socket(lambda _url: True, websocket)
    await context.add_init_script(SAME_PAGE_JS)


async def _system_resolve(host: str) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, None)
    return [info[4][0] for info in infos]


def _in_origins(url: str, origins: Sequence[str]) -> bool:
    return any(url == o or url.startswith(o + "/") for o in origins)


_IGNORED = re.compile("[\t\n\r]")
_EDGES = "".join(chr(c) for c in range(0x21))  # C0 controls and space


def _split(url: str) -> SplitResult:
    """`url` split as a browser reads it (WHATWG): edge controls and spaces stripped, tabs
    and newlines dropped, and for web schemes `\\` read as `/` (else
    `http://127.0.0.1\\@example.com/` is example.com to urlsplit and 127.0.0.1 to Chromium).
    Raises ValueError for what urlsplit cannot read (an unclosed `[`)."""
    url = _IGNORED.sub("", url.strip(_EDGES))
    scheme = url.partition(":")[0].lower()
    if scheme in WEB_SCHEMES:
        url = url.replace("\\", "/")
    return urlsplit(url)


def canonical_host(parts: SplitResult) -> str:
    """The host as Chromium compares it: percent-decoded, NFKC-folded (full-width letters
    and dots), lower case, without trailing dots; IPv6 brackets kept off."""
    host = unquote(parts.hostname or "")
    host = unicodedata.normalize("NFKC", host).lower()
    host = host.replace("\u3002", ".").replace("\uff0e", ".").replace("\uff61", ".")
    return host.rstrip(".")


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


# IPv6 prefixes whose addresses carry an IPv4 address in their last 32 bits: IPv4-mapped
# (::ffff:0:0/96), IPv4-translated (SIIT, ::ffff:0:0:0/96), IPv4-compatible (::/96,
# deprecated) and the NAT64 well-known prefix (64:ff9b::/96, RFC 6052). 6to4
# (2002::/16) and Teredo (2001::/32) carry theirs elsewhere (ip.sixtofour, ip.teredo).
_EMBEDS_LAST_32 = tuple(
    ipaddress.IPv6Network(n) for n in ("::ffff:0:0/96", "::ffff:0:0:0/96", "::/96", "64:ff9b::/96")
)
_TEREDO = ipaddress.IPv6Network("2001::/32")
# Not globally reachable by the IANA registry, though Python 3.11 calls it global: the
# NAT64 local-use prefix (RFC 8215), which embeds an IPv4 address where its operator
# chooses.
_NOT_GLOBAL_V6 = (ipaddress.IPv6Network("64:ff9b:1::/48"),)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses an IPv6 address embeds (mapped, translated, compatible, NAT64,
    6to4, Teredo's server and client); empty for any other address."""
    if any(ip in net for net in _EMBEDS_LAST_32):
        return (ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF),)
    if ip.sixtofour is not None:
        return (ip.sixtofour,)
    if ip.teredo is not None:
        return ip.teredo
    return ()


def _private_ip(address: str) -> bool:
    """`address` is not a public unicast address. An IPv6 address that embeds an IPv4
    address is judged by the address it embeds (`[::127.0.0.1]`, `[64:ff9b::7f00:1]`
    and `[2002:7f00:1::]` are this machine to a guard that reads them as IPv6); a
    Teredo address must also be public itself (Python: it is not)."""
    ip = _ip(address.split("%")[0])  # drop an IPv6 zone ("fe80::1%eth0")
    if ip is None:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        if any(ip in net for net in _NOT_GLOBAL_V6):
            return True
        embedded = _embedded_ipv4(ip)
        if embedded:
            private = any(_private_ip(str(v4)) for v4 in embedded)
            return private or (ip in _TEREDO and not ip.is_global)
    return not ip.is_global or ip.is_multicast


def _literal_ip(host: str) -> str | None:
    """The address a host written as an IP literal stands for, else None. Chromium also
    reads numeric IPv4 forms such as 2130706433, 0x7f.1 or 0177.0.0.1."""
    if _ip(host) is not None:
        return host.strip("[]")
    if not re.fullmatch(r"[0-9a-fx.]+", host):
        return None  # inet_aton would also read "1.2.3.4 junk"
    try:
        return socket.inet_ntoa(socket.inet_aton(host))
    except OSError:
        return None


def _private_host(host: str) -> bool:
    """`host` (canonical) names this machine or a private network, whatever DNS says."""
    if host in PRIVATE_NAMES or host.endswith(PRIVATE_SUFFIXES):
        return True
    address = _literal_ip(host)
    return address is not None and _private_ip(address)
