"""One Chromium, N isolated contexts: the asyncio browser pool behind the episode runner.

Each running episode holds one slot (a context with one page) for its whole length.
Slots are reused across episodes, because a new context costs ~130 ms on these
machines while a page reset costs ~80 ms. A slot's context is still replaced every
`recycle_after` episodes: a renderer that keeps navigating to the same pages grows by
~0.4 MB an episode here (300 -> 790 MB over 1,200 MiniWoB episodes), which a long
collection run would otherwise turn into gigabytes. Recovery is per slot: after an environment
error the slot's context is thrown away; a dead or hung browser is killed (its whole
process group) and relaunched; every slot then gets a fresh context lazily.

Every context carries the navigation guard (guard.py) when the pool has a policy:
allowed origins for offline suites, the safety policy for live ones.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any

from rmsweb.env.errors import EnvError
from rmsweb.env.guard import GuardLog, NavigationPolicy, install_guard, offline_policy
from rmsweb.env.launch import (
    LAUNCH_FLAGS,
    find_chromium,
    find_main_pid,
    kill_group,
    new_marker,
    process_state,
)

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Slot:
    """A context and its page, held by one episode at a time."""

    index: int
    context: Any = None
    page: Any = None
    generation: int = -1  # the browser launch this context belongs to
    broken: bool = False  # crashed, hung, or left in an unknown state
    episodes: int = 0  # episodes served by the current context
    guard: GuardLog | None = None  # the navigation guard's state (None: no guard)

    @property
    def blocked(self) -> GuardLog | None:
        """The guard log under the name the episode runner passes to PageSession."""
        return self.guard


class BrowserPool:
    """Launch Chromium once; hand out `contexts` isolated slots; recover from crashes.

    Use as `async with BrowserPool(2) as pool: async with pool.slot() as s: page = await
    pool.page(s)`. `policy` is the navigation guard of every context (guard.py);
    `allowed_origins` (e.g. ["http://127.0.0.1:8000"]) is short for the offline policy
    that refuses every request to any other origin. With neither, pages load anything.
    """

    def __init__(
        self,
        contexts: int = 2,
        *,
        viewport: tuple[int, int] = (1024, 768),
        allowed_origins: Sequence[str] | None = None,
        policy: NavigationPolicy | None = None,
        executable: str | None = None,
        launch_timeout_s: float = 30.0,
        op_timeout_s: float = 10.0,
        recycle_after: int = 200,
    ) -> None:
        if contexts < 1:
            raise ValueError("contexts must be >= 1")
        if recycle_after < 1:
            raise ValueError("recycle_after must be >= 1")
        self.recycle_after = recycle_after
        self.contexts = contexts
        self.viewport = viewport
        if policy is not None and allowed_origins is not None:
            raise ValueError("give either allowed_origins or policy, not both")
        if allowed_origins is not None:
            policy = offline_policy(allowed_origins)
        self.policy = policy
        self._executable = executable
        self.launch_timeout_s = launch_timeout_s
        self.op_timeout_s = op_timeout_s  # creating/closing contexts
        self.generation = 0
        self.relaunches = 0
        self.browser_pid: int | None = None
        self._pw: Any = None
        self._browser: Any = None
        self._marker = ""
        self._lock = asyncio.Lock()
        self._slots = [Slot(i) for i in range(contexts)]
        self._free: asyncio.Queue[Slot] = asyncio.Queue()
        for s in self._slots:
            self._free.put_nowait(s)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> BrowserPool:
        from playwright.async_api import async_playwright

        self._pw = await async_playwright().start()
        try:
            self._executable = self._executable or find_chromium(self._pw.chromium.executable_path)
            await self._launch()
        except BaseException:
            await self._pw.stop()
            self._pw = None
            raise
        return self

    async def __aenter__(self) -> BrowserPool:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _launch(self) -> None:
        self._marker = new_marker()
        try:
            self._browser = await asyncio.wait_for(
                self._pw.chromium.launch(
                    executable_path=self._executable,
                    headless=True,
                    args=[*LAUNCH_FLAGS, self._marker],
                    timeout=self.launch_timeout_s * 1000,
                ),
                self.launch_timeout_s + 5,
            )
        except Exception as exc:
            self._kill_browser()
            raise EnvError(f"could not launch Chromium ({self._executable}): {exc}") from exc
        self.browser_pid = find_main_pid(self._marker)
        self.generation += 1
        log.debug("launched Chromium pid %s (generation %d)", self.browser_pid, self.generation)

    def _kill_browser(self) -> None:
        pid = self.browser_pid or (find_main_pid(self._marker) if self._marker else None)
        if pid:
            kill_group(pid)  # Chromium's children share its process group

    def browser_alive(self) -> bool:
        if self._browser is None or not self._browser.is_connected():
            return False
        return self.browser_pid is None or _alive(self.browser_pid)

    async def relaunch(self) -> None:
        """Kill the current browser (whatever state it is in) and start a new one."""
        async with self._lock:
            await self._relaunch_locked()

    async def _relaunch_locked(self) -> None:
        old = self._browser
        self._browser = None
        self._kill_browser()
        if old is not None:
            # it is dead already; this only drops Playwright's handle
            with suppress(Exception):
                await asyncio.wait_for(old.close(), 2)
        self.relaunches += 1
        await self._launch()

    async def close(self) -> None:
        """Close everything; no Chromium process survives this."""
        for s in self._slots:
            await self._close_context(s)
        if self._browser is not None:
            try:
                await asyncio.wait_for(self._browser.close(), self.op_timeout_s)
            except Exception as exc:
                log.debug("browser.close failed: %s", exc)
            self._browser = None
        if self._pw is not None:
            try:
                await asyncio.wait_for(self._pw.stop(), self.op_timeout_s)
            except Exception as exc:
                log.debug("playwright.stop failed: %s", exc)
            self._pw = None
        self._kill_browser()
        self.browser_pid = None

    # ------------------------------------------------------------------ slots

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[Slot]:
        """Hold one slot for the length of an episode."""
        s = await self._free.get()
        try:
            yield s
        finally:
            s.episodes += 1
            if s.episodes >= self.recycle_after:
                s.broken = True  # the next `page(s)` opens a fresh context
            self._free.put_nowait(s)

    async def page(self, slot: Slot) -> Any:
        """A live page for `slot`, relaunching the browser or remaking the context first
        where needed. Raises EnvError when even a fresh browser cannot give one."""
        async with self._lock:
            if not self.browser_alive():
                log.warning("Chromium is gone; relaunching")
                await self._relaunch_locked()
        fresh = slot.generation == self.generation and not slot.broken
        if fresh and slot.page is not None and not slot.page.is_closed():
            if slot.guard is not None:
                slot.guard.reset()  # a new episode: no refusals, no pinned page yet
            return slot.page
        await self._close_context(slot)
        try:
            await self._open_context(slot)
        except Exception as exc:
            # A browser that cannot make a context is hung: start over once.
            log.warning("new context failed (%s); relaunching Chromium", exc)
            await self.relaunch()
            try:
                await self._open_context(slot)
            except Exception as exc2:
                raise EnvError(f"cannot open a browser context: {exc2}") from exc2
        return slot.page

    def discard(self, slot: Slot) -> None:
        """Mark the slot's context unusable (after an environment error); the next
        `page(slot)` replaces it."""
        slot.broken = True

    async def _open_context(self, slot: Slot) -> None:
        w, h = self.viewport
        ctx = await asyncio.wait_for(
            self._browser.new_context(
                viewport={"width": w, "height": h},
                device_scale_factor=1,
                service_workers="block",
                accept_downloads=False,
            ),
            self.op_timeout_s,
        )
        slot.context = ctx
        page = await asyncio.wait_for(ctx.new_page(), self.op_timeout_s)
        slot.page = page
        slot.generation = self.generation
        slot.broken = False
        slot.episodes = 0
        slot.guard = None

        def on_crash(_: Any) -> None:
            slot.broken = True

        page.on("crash", on_crash)
        # Pop-ups would pile up in a reused context; the episode's page is the only one.
        ctx.on(
            "page", lambda p: asyncio.ensure_future(_close_quietly(p)) if p is not page else None
        )
        if self.policy is not None:
            slot.guard = GuardLog(self.policy)
            await install_guard(ctx, page, slot.guard)

    async def _close_context(self, slot: Slot) -> None:
        ctx, slot.context, slot.page = slot.context, None, None
        if ctx is None:
            return
        if slot.guard is not None:
            await slot.guard.shut(ctx)  # no request paused on the guard goes on as it closes
        try:
            await asyncio.wait_for(ctx.close(), self.op_timeout_s)
        except Exception as exc:
            log.debug("context.close failed: %s", exc)


async def _close_quietly(page: Any) -> None:
    with suppress(Exception):
        await page.close()


def _alive(pid: int) -> bool:
    # A killed browser lingers as a zombie (Z); a stopped one (T) never answers again.
    return process_state(pid) not in (None, "Z", "X", "T")
