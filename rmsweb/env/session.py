"""One episode on one page: observe, execute actions, enforce timeouts.

Every browser call goes through `call()`, which turns a hang (no answer within the
action timeout) or a vanished page into an EnvError. Everything the page survives (an
unknown id, a covered element, a blocked URL, an unknown key) comes back from
`execute()` as a step error string that the next observation shows.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Sequence
from contextlib import suppress
from typing import Any, TypeVar

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page
from playwright.async_api import TimeoutError as PlaywrightTimeout

from rmsweb.env.actions import Action
from rmsweb.env.errors import EnvError, is_gone
from rmsweb.env.observe import ID_ATTR, build_observation, observe_args, parse_raw, script
from rmsweb.env.types import Box, Observation

T = TypeVar("T")
_NAVIGATED = ("Execution context was destroyed", "navigation", "Cannot find context")


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
        blocked: list[str] | None = None,
    ) -> None:
        self.page = page
        self.action_timeout_s = action_timeout_s
        self.exclude = tuple(exclude)
        self.screenshot_clip = screenshot_clip
        self.allowed_origins = tuple(allowed_origins) if allowed_origins is not None else None
        self.next_id = 1
        self.navigations = 0  # main-frame navigations since tracking started
        self._blocked = blocked if blocked is not None else []
        self._blocked_seen = len(self._blocked)
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
            except PlaywrightError as exc:
                if attempt < 2 and any(s in str(exc) for s in _NAVIGATED):
                    await self._wait_loaded()
                    continue
                raise EnvError(f"{what}: {_first_line(exc)}") from exc
        raise AssertionError("unreachable")

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
        """Count main-frame navigations from now on (for `go_back`)."""
        if not self._tracking:
            self.page.on("framenavigated", self._on_navigated)
            self._tracking = True

    def close(self) -> None:
        """Detach listeners (the page is reused by the next episode)."""
        if self._tracking:
            self.page.remove_listener("framenavigated", self._on_navigated)
            self._tracking = False

    def _on_navigated(self, frame: Any) -> None:
        if frame == self.page.main_frame:
            self.navigations += 1

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
        blocked = self._new_blocked()
        if blocked:
            note = f"navigation to {blocked[-1]} was blocked (outside the task's site)"
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

    def _new_blocked(self) -> list[str]:
        new = self._blocked[self._blocked_seen :]
        self._blocked_seen = len(self._blocked)
        return new

    # ------------------------------------------------------------------ act

    async def execute(self, action: Action) -> str | None:
        """Run one action; return its step error (None when it went through)."""
        before = self.navigations
        try:
            err = await self._execute(action)
        except PlaywrightTimeout as exc:
            await self._probe()
            return _first_line(exc)
        except PlaywrightError as exc:
            if is_gone(exc) and not any(s in str(exc) for s in _NAVIGATED):
                raise EnvError(f"{action.type}: {_first_line(exc)}") from exc
            return _first_line(exc)
        if self.navigations != before:
            await self._wait_loaded()
        return err

    async def _probe(self) -> None:
        """After a Playwright timeout: is the page merely busy with the action, or hung?"""
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
            if self.allowed_origins is not None and not _allowed(url, self.allowed_origins):
                return f"navigation to {url} is blocked (outside the task's site)"
            await self.call(
                page.goto(url, wait_until="domcontentloaded", timeout=ms), "goto", ms / 1000 + 1
            )
            return None
        if a.type == "go_back":
            if self.navigations == 0:
                return "there is no previous page in this episode"
            await self.call(
                page.go_back(wait_until="domcontentloaded", timeout=ms), "go_back", ms / 1000 + 1
            )
            return None
        if a.type in ("answer", "stop"):
            return None  # ends the episode; nothing to do in the page
        return f"unknown action type {a.type!r}"


def _allowed(url: str, origins: Sequence[str]) -> bool:
    return any(url == o or url.startswith(o.rstrip("/") + "/") for o in origins)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
