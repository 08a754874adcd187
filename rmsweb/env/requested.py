"""Navigations a page's renderer has asked for, before the browser starts them.

Playwright's `mouse.click` (and `keyboard.press`, ...) returns once the input is
dispatched, which can be before the page has handled it: measured on the rehearsal site,
25 of 60 link clicks returned before the renderer asked to navigate, 63 of 100 before
the browser had sent any request. An observation taken in that window reads the old
document (it stays alive until the new one commits), so the policy sees the page it
just left and acts on it again. Chromium's Page.frameRequestedNavigation is the one
signal that comes before the request: after an input action the session flushes the
renderer's task queue, then asks this watcher whether the main frame asked to go
somewhere, and if so waits for that navigation (session.py).
"""

from __future__ import annotations

import asyncio
from contextlib import suppress
from typing import Any
from weakref import WeakKeyDictionary

from playwright.async_api import Error as PlaywrightError

# A task queued behind the ones the input queued: once it has run, the renderer has
# handled the input (and asked for any navigation the input starts).
_FLUSH = {"expression": "new Promise(r => setTimeout(r, 0))", "awaitPromise": True}

_WATCHERS: WeakKeyDictionary[Any, NavigationRequests] = WeakKeyDictionary()


def starts_document(url: str, current: str) -> bool:
    """Whether a requested navigation to `url` would replace the document at `current`:
    not a javascript: URL, not a jump to a #fragment of the same document."""
    if url.lower().startswith("javascript:"):
        return False
    return not ("#" in url and url.split("#", 1)[0] == current.split("#", 1)[0])


class NavigationRequests:
    """One page's CDP session, listening for the main frame's requested navigations; it
    lives as long as the page (pages are reused across episodes)."""

    def __init__(self, cdp: Any, main_frame: str) -> None:
        self.cdp = cdp
        self.main_frame = main_frame
        self.urls: list[str] = []
        cdp.on("Page.frameRequestedNavigation", self._on_requested)

    @classmethod
    async def of(cls, page: Any, timeout_s: float) -> NavigationRequests | None:
        """The page's watcher (made on first use); None where there is no CDP (not
        Chromium) or the page does not answer: the session then works as before."""
        watcher = _WATCHERS.get(page)
        if watcher is not None:
            return watcher
        try:
            cdp = await asyncio.wait_for(page.context.new_cdp_session(page), timeout_s)
            await asyncio.wait_for(cdp.send("Page.enable"), timeout_s)
            tree = await asyncio.wait_for(cdp.send("Page.getFrameTree"), timeout_s)
        except (PlaywrightError, TimeoutError):
            return None
        watcher = cls(cdp, tree["frameTree"]["frame"]["id"])  # stable for the page's life
        _WATCHERS[page] = watcher
        return watcher

    def _on_requested(self, event: dict[str, Any]) -> None:
        if event.get("frameId") == self.main_frame:
            self.urls.append(str(event.get("url", "")))

    def clear(self) -> None:
        self.urls.clear()

    async def after_input(self, current_url: str, timeout_s: float) -> bool:
        """Whether the main frame asked for a new document since `clear()`, once the
        renderer has handled the input. A flush that fails (the old document went away:
        a navigation committed) or times out (a busy page) still answers from what came."""
        with suppress(PlaywrightError, TimeoutError):
            await asyncio.wait_for(self.cdp.send("Runtime.evaluate", _FLUSH), timeout_s)
        return any(starts_document(url, current_url) for url in self.urls)
