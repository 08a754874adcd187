"""A live task in a real browser: its start page under the safety policy, its budget."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from rmsweb.env.errors import EnvError
from rmsweb.env.pool import BrowserPool
from rmsweb.env.server import StaticServer
from rmsweb.env.session import PageSession
from rmsweb.errors import UserError
from rmsweb.suites import live
from rmsweb.suites.live import LiveSuite, LiveTaskInfo

pytestmark = pytest.mark.browser
SITE = Path(__file__).parents[1] / "judge" / "site"


def suite_for(url: str, **kw) -> LiveSuite:
    info = LiveTaskInfo("Shop--0", "Find the price.", url, "Shop", "Shop")
    return LiveSuite("webvoyager", [info], test_fraction=0.5, **kw)


class Clock:
    """A fake monotonic clock: the budget test must not depend on how busy the machine is."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


async def setup_task(suite: LiveSuite, clock: Clock | None = None):
    clock = clock or Clock()
    task = suite.task("Shop--0", 0, suite.split("Shop--0"))
    async with BrowserPool(1, policy=suite.navigation_policy) as pool, pool.slot() as slot:
        session = PageSession(await pool.page(slot), guard=slot.guard, navigation_timeout_s=5)
        instruction = await task.setup(session)
        clock.now += 199.0
        first = await task.evaluate(session, None)
        clock.now += 1.0
        later = await task.evaluate(session, None)
        return instruction, session.page.url, first, later


def test_start_page_loads_and_the_budget_ends_the_episode(monkeypatch) -> None:
    clock = Clock()
    monkeypatch.setattr(live, "time", clock)
    with StaticServer(SITE) as shop:
        suite = suite_for(shop.url("index.html"), max_wall_s=200, private_origins=[shop.origin])
        instruction, url, first, later = asyncio.run(setup_task(suite, clock))
    assert instruction == "Find the price." and url == shop.url("index.html")
    assert not first.done  # success is the judge's: the page never says
    assert later.done and not later.success and later.info == {"budget": "wall time 200 s"}


def test_a_refused_start_page_is_a_user_error() -> None:
    with StaticServer(SITE) as shop:
        suite = suite_for(shop.url("index.html"))  # 127.0.0.1 is not allowed
        with pytest.raises(UserError, match=r"refused by the navigation guard \(a private address"):
            asyncio.run(setup_task(suite))


def test_an_unreachable_start_page_is_an_env_error() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    suite = suite_for(f"http://127.0.0.1:{port}/", allow_private_network=True)
    with pytest.raises(EnvError, match="could not load"):
        asyncio.run(setup_task(suite))
