"""An icon whose image is slow to arrive is still in the observation (observe.js waits
for still-loading images, up to observe.IMAGE_WAIT_MS, and walks the page again)."""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rmsweb.env import observe, server
from rmsweb.env.pool import BrowserPool
from rmsweb.env.server import StaticServer
from rmsweb.env.session import PageSession

pytestmark = pytest.mark.browser

IMAGE_DELAY_S = 2.0  # longer than the 1 s the observation used to wait

PAGE = """<!doctype html><html><head><title>icons</title>
<style>.like { content: url(slow.png); height: 14px; }</style></head>
<body><button>Go</button>
<script>
// As MiniWoB builds its pages: the icon is added after load, so "load" does not wait for it.
window.onload = () => {
  const s = document.createElement('span');
  s.className = 'like'; s.title = 'like';
  document.body.appendChild(s);
};
</script></body></html>
"""


@pytest.fixture()
def slow_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StaticServer]:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (14, 14), "red").save(buf, format="PNG")
    (tmp_path / "slow.png").write_bytes(buf.getvalue())
    (tmp_path / "icons.html").write_text(PAGE)
    real_get = server._QuietHandler.do_GET

    def slow_get(self: server._QuietHandler) -> None:
        if self.path.endswith(".png"):
            time.sleep(IMAGE_DELAY_S)
        real_get(self)

    monkeypatch.setattr(server._QuietHandler, "do_GET", slow_get)
    with StaticServer(tmp_path) as site:
        yield site


def test_an_icon_whose_image_is_slow_is_observed(slow_site: StaticServer) -> None:
    assert observe.IMAGE_WAIT_MS / 1000 > IMAGE_DELAY_S

    async def go() -> str:
        pool = await BrowserPool(1, allowed_origins=[slow_site.origin]).start()
        try:
            async with pool.slot() as slot:
                page = await pool.page(slot)
                await page.goto(slow_site.url("icons.html"), wait_until="load")
                session = PageSession(page, allowed_origins=[slow_site.origin])
                return (await session.observe()).text
        finally:
            await pool.close()

    text = asyncio.run(go())
    assert 'img "like"' in text, text
