"""One episode on one page: observe, execute actions, enforce timeouts.

Every browser call goes through `call()`, which turns a hang (no answer within the
action timeout) or a vanished page into an EnvError. Everything the page survives (an
unknown id, a covered element, a blocked URL, an unknown key) comes back from
`execute()` as a step error string that the next observation shows.

Navigation is the policy's business, not the environment's:
- a URL the navigation guard refuses (guard.py) leaves the page where it was; `goto`
  returns the refusal as its step error, and a refused link or script navigation is
  noted in the next observation;
- a page that is slow to load is waited for up to `navigation_timeout_s` (a page's
  scripts cannot run while its next document is pending, so a plain call would look
  hung); past that, loading is stopped and the next observation says so. Only a page
  that does not answer with no navigation pending is an environment error;
- an input action (click, key press, ...) that makes the page ask for a new document
  returns once that document has committed (requested.py): Playwright returns from the
  input before the page has handled it, and an observation taken then reads the page
  the action left.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Sequence
from contextlib import suppress
from typing import Any, TypeVar

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page
from playwright.async_api import TimeoutError as PlaywrightTimeout

from rmsweb.env.actions import Action
from rmsweb.env.errors import EnvError, is_gone
from rmsweb.env.guard import GuardLog, NavigationPolicy, offline_policy
from rmsweb.env.observe import ID_ATTR, build_observation, observe_args, parse_raw, script
from rmsweb.env.requested import NavigationRequests
from rmsweb.env.types import Box, Observation

T = TypeVar("T")
_NAVIGATED = ("Execution context was destroyed", "navigation", "Cannot find context")
# Actions whose page handlers can start a navigation after Playwright has returned.
_INPUT_ACTIONS = ("click", "click_xy", "fill", "select", "press")
# A navigation the renderer asked for whose request has not come by then was dropped by
# the browser (a scheme it refuses, ...); the episode goes on from the page it is on.
REQUEST_GRACE_S = 5.0


class PageSession:
    """Drive one page for one episode. Create after the page is reset (`setup`), so
    that only the episode's own navigations count for `go_back`."""

    def __init__(
        self,
        page: Page,
        *,
        action_timeout_s: float = 5.0,
        exclude: Sequence[str] = (),
        screenshot_clip: Box | None = None,
        allowed_origins: Sequence[str] | None = None,
        blocked: GuardLog | None = None,
        guard: GuardLog | None = None,
        navigation_timeout_s: float | None = None,
    ) -> None:
        """`guard` is the slot's guard log (`slot.guard`; `blocked` is the same under the
        name the episode runner uses). Without one, `goto` still refuses what the
        offline policy of `allowed_origins` refuses, and browser-internal schemes."""
        self.page = page
        self.action_timeout_s = action_timeout_s
        self.navigation_timeout_s = max(navigation_timeout_s or 30.0, action_timeout_s)
        self.exclude = tuple(exclude)
        self.screenshot_clip = screenshot_clip
        self.guard = guard if guard is not None else blocked
        if self.guard is not None:
            self._policy = self.guard.policy
        elif allowed_origins is not None:
            self._policy = offline_policy(allowed_origins)
        else:  # no guard: refuse at least file:, javascript:, ... in goto
            self._policy = NavigationPolicy(allow_private=True)
        self.next_id = 1
        self.navigations = 0  # main-frame navigations since tracking started
        self._refusals_seen = len(self.guard.refusals) if self.guard is not None else 0
        self._notes: list[str] = []  # what the next observation reports (stopped loads)
        self._pending: set[Any] = set()  # main-frame document requests in flight
        self._requests_seen = 0  # main-frame document requests since tracking started
        self._tracking = False

    # ------------------------------------------------------------------ plumbing

    async def call(self, awaitable: Awaitable[T], what: str, timeout_s: float | None = None) -> T:
        """Await a browser call; a hang or a vanished page becomes an EnvError."""
        t = timeout_s or self.action_timeout_s
        try:
            return await asyncio.wait_for(awaitable, t)
        except TimeoutError:
            raise EnvError(f"{what}: no answer within {t:.1f} s (page or browser hung)") from None
        except PlaywrightError as exc:
            if is_gone(exc) and not any(s in str(exc) for s in _NAVIGATED):
                raise EnvError(f"{what}: {_first_line(exc)}") from exc
            raise

    async def evaluate(self, source: str, arg: Any = None, what: str = "evaluate") -> Any:
        """page.evaluate that survives a navigation in progress (waits, then retries).

        Any other script failure is an EnvError: our scripts do not throw on sane pages.
        """
        for attempt in range(3):
            try:
                return await self.call(self.page.evaluate(source, arg), what)
            except EnvError:
                # No answer: a pending navigation blocks the page's scripts until its
                # document commits. Wait for it (or stop it), then ask again.
                if attempt < 2 and await self._settle_navigation():
                    continue
                raise
            except PlaywrightError as exc:
                if attempt < 2 and any(s in str(exc) for s in _NAVIGATED):
                    await self._wait_loaded()
                    continue
                raise EnvError(f"{what}: {_first_line(exc)}") from exc
        raise AssertionError("unreachable")

    async def _settle_navigation(self) -> bool:
        """If a main-frame document is loading, wait for it up to navigation_timeout_s,
        then stop it; True when there was one (the page was busy, not hung)."""
        if not self._pending:
            return False
        deadline = time.monotonic() + self.navigation_timeout_s
        while self._pending and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if self._pending:
            url = next(iter(self._pending)).url
            self._pending.clear()
            cdp = await self.call(self.page.context.new_cdp_session(self.page), "stop loading")
            try:
                await self.call(cdp.send("Page.stopLoading"), "stop loading")
            finally:
                with suppress(PlaywrightError):
                    await cdp.detach()
            self._notes.append(
                f"{url} did not load within {self.navigation_timeout_s:g} s; loading was stopped"
            )
        return True

    async def _wait_loaded(self) -> None:
        # An error page also counts as loaded; the observation will show it.
        with suppress(PlaywrightError):
            await self.call(
                self.page.wait_for_load_state(
                    "domcontentloaded", timeout=self.action_timeout_s * 1000
                ),
                "waiting for the page to load",
                self.action_timeout_s + 1,
            )

    def track_navigation(self) -> None:
        """Count main-frame navigations from now on (for `go_back`), and follow main-frame
        document loads in flight (to tell a loading page from a hung one)."""
        if not self._tracking:
            self.page.on("framenavigated", self._on_navigated)
            self.page.on("request", self._on_request)
            self.page.on("requestfailed", self._on_request_done)
            self._tracking = True

    def pin_page(self) -> None:
        """From now on refuse any new main-frame document (single-page tasks): leaving or
        reloading the task page becomes a step error instead of a lost episode."""
        if self.guard is not None:
            self.guard.pin()

    def close(self) -> None:
        """Detach listeners (the page is reused by the next episode)."""
        if self._tracking:
            self.page.remove_listener("framenavigated", self._on_navigated)
            self.page.remove_listener("request", self._on_request)
            self.page.remove_listener("requestfailed", self._on_request_done)
            self._tracking = False

    def _on_navigated(self, frame: Any) -> None:
        if frame == self.page.main_frame:
            self.navigations += 1
            self._pending.clear()

    def _on_request(self, request: Any) -> None:
        if request.is_navigation_request() and request.frame == self.page.main_frame:
            self._pending.add(request)
            self._requests_seen += 1
            if request.redirected_from is not None:
                self._pending.discard(request.redirected_from)

    def _on_request_done(self, request: Any) -> None:
        self._pending.discard(request)

    # ------------------------------------------------------------------ observe

    async def observe(
        self, *, screenshot: bool = False, marks: bool = False, last_error: str | None = None
    ) -> Observation:
        data = await self.evaluate(
            script("observe.js"), observe_args(self.next_id, self.exclude), "observe"
        )
        raw = parse_raw(json.loads(data))
        self.next_id = raw.next_id
        png = None
        if screenshot:
            png = await self._screenshot(raw.elements if marks else None)
        for note in self._new_notes():
            last_error = f"{last_error}; {note}" if last_error else note
        return build_observation(raw, png, last_error)

    async def _screenshot(self, marks: list[Any] | None) -> bytes:
        if marks is not None:
            boxes = [[e.id, e.box.x, e.box.y, e.box.width, e.box.height] for e in marks if e.box]
            await self.evaluate(script("marks.js"), [True, boxes], "set-of-marks")
        clip = self.screenshot_clip
        kwargs: dict[str, Any] = {"type": "png", "timeout": self.action_timeout_s * 1000}
        if clip is not None:
            kwargs["clip"] = {"x": clip.x, "y": clip.y, "width": clip.width, "height": clip.height}
        try:
            png = await self.call(self.page.screenshot(**kwargs), "screenshot")
        except PlaywrightTimeout as exc:
            raise EnvError(f"screenshot: {_first_line(exc)}") from exc
        if marks is not None:
            await self.evaluate(script("marks.js"), [False, []], "set-of-marks")
        return png

    def _new_notes(self) -> list[str]:
        """Refused navigations and stopped loads since the last observation (the last
        refusal only: one click can be refused several times over redirects)."""
        notes, self._notes = self._notes, []
        if self.guard is not None:
            new = self.guard.refusals[self._refusals_seen :]
            self._refusals_seen = len(self.guard.refusals)
            refused = [r for r in new if r.navigation]
            if refused:
                notes.insert(
                    0, f"navigation to {refused[-1].url} was blocked ({refused[-1].reason})"
                )
        return notes

    # ------------------------------------------------------------------ act

    async def execute(self, action: Action) -> str | None:
        """Run one action; return its step error (None when it went through)."""
        before, seen = self.navigations, self._requests_seen
        requests = None
        if self._tracking and action.type in _INPUT_ACTIONS:
            requests = await NavigationRequests.of(self.page, self.action_timeout_s)
            if requests is not None:
                requests.clear()
        try:
            err = await self._execute(action)
        except PlaywrightTimeout as exc:
            await self._probe()
            return _first_line(exc)
        except PlaywrightError as exc:
            if is_gone(exc) and not any(s in str(exc) for s in _NAVIGATED):
                raise EnvError(f"{action.type}: {_first_line(exc)}") from exc
            return _first_line(exc)
        if requests is not None:
            await self._follow_requested(requests, before, seen)
        if self.navigations != before:
            await self._wait_loaded()
        return err

    async def _follow_requested(self, requests: NavigationRequests, before: int, seen: int) -> None:
        """If the action made the main frame ask for a new document, wait until it commits
        (or its request fails, or loading is stopped): the next observation must not read
        the document the action left. `before`, `seen`: navigations and document requests
        counted before the action."""
        if not await requests.after_input(self.page.url, self.action_timeout_s):
            return
        deadline = time.monotonic() + min(REQUEST_GRACE_S, self.navigation_timeout_s)
        while self.navigations == before and not self._pending and self._requests_seen == seen:
            if time.monotonic() >= deadline:
                return
            await asyncio.sleep(0.02)
        await self._settle_navigation()

    async def _probe(self) -> None:
        """After a Playwright timeout: is the page loading, merely busy with the action,
        or hung?"""
        if await self._settle_navigation():
            return
        await self.call(self.page.evaluate("1"), "liveness probe", min(2.0, self.action_timeout_s))

    async def _target(self, target: str | None, mode: str) -> dict[str, Any]:
        return await self.evaluate(script("target.js"), [ID_ATTR, target or "", mode], mode)

    async def _execute(self, a: Action) -> str | None:
        page = self.page
        ms = self.action_timeout_s * 1000
        if a.type in ("click", "fill"):
            r = await self._target(a.target, a.type)
            if "error" in r:
                return str(r["error"])
            if a.type == "click":
                await self.call(page.mouse.click(r["x"], r["y"]), "click")
            else:
                loc = page.locator(f'[{ID_ATTR}="{a.target}"]')
                await self.call(loc.fill(a.text or "", timeout=ms), "fill")
            return None
        if a.type == "select":
            r = await self._target(a.target, "select")
            if "error" in r:
                return str(r["error"])
            return await self.evaluate(
                script("select.js"), [ID_ATTR, a.target, a.text or ""], "select"
            )
        if a.type == "press":
            await self.call(page.keyboard.press(a.text or ""), "press")
            return None
        if a.type == "scroll":
            return await self.evaluate(script("scroll.js"), [a.text or "down"], "scroll")
        if a.type == "click_xy":
            x, y = a.x or 0.0, a.y or 0.0
            vp = page.viewport_size or {"width": 0, "height": 0}
            if not (0 <= x < vp["width"] and 0 <= y < vp["height"]):
                return f"point ({x:g}, {y:g}) is outside the {vp['width']}x{vp['height']} viewport"
            await self.call(page.mouse.click(x, y), "click_xy")
            return None
        if a.type == "goto":
            url = a.text or ""
            reason = (
                await self.guard.decide(url, navigation=True)
                if self.guard is not None
                else await self._policy.check(url, navigation=True)
            )
            if reason is not None:
                return f"navigation to {url} is blocked ({reason})"
            nav_ms = self.navigation_timeout_s * 1000
            await self.call(
                page.goto(url, wait_until="domcontentloaded", timeout=nav_ms),
                "goto",
                self.navigation_timeout_s + 1,
            )
            return None
        if a.type == "go_back":
            if self.navigations == 0:
                return "there is no previous page in this episode"
            if self.guard is not None and self.guard.pinned:
                return "navigation back is blocked (it would leave the task page)"
            nav_ms = self.navigation_timeout_s * 1000
            await self.call(
                page.go_back(wait_until="domcontentloaded", timeout=nav_ms),
                "go_back",
                self.navigation_timeout_s + 1,
            )
            return None
        if a.type in ("answer", "stop"):
            return None  # ends the episode; nothing to do in the page
        return f"unknown action type {a.type!r}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
