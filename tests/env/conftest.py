"""Fixtures for browser tests: one event loop and one local site per module."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from rmsweb.env.server import StaticServer

PAGES = Path(__file__).parent / "pages"


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    # Playwright objects belong to the loop that made them; a module shares one so the
    # browser starts once per module (a launch costs ~1 s).
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()


@pytest.fixture(scope="module")
def site() -> Iterator[StaticServer]:
    with StaticServer(PAGES) as server:
        yield server
