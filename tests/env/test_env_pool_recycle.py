"""A slot's context is replaced every `recycle_after` episodes (bounded renderer memory)."""

from __future__ import annotations

import pytest

from rmsweb.env.pool import BrowserPool

pytestmark = pytest.mark.browser


def test_slot_context_recycled_after_n_episodes(loop, site) -> None:
    async def go() -> list:
        contexts = []
        async with BrowserPool(1, allowed_origins=[site.origin], recycle_after=2) as pool:
            for _ in range(5):
                async with pool.slot() as slot:
                    page = await pool.page(slot)
                    await page.goto(site.url("form.html"))
                    assert await page.title() == "Snapshot form"
                    contexts.append(slot.context)  # kept alive: identities stay distinct
        return contexts

    c = loop.run_until_complete(go())
    # Episodes 1-2 share a context, 3-4 the next, 5 a third one.
    assert c[0] is c[1] and c[2] is c[3]
    assert len({id(x) for x in c}) == 3


def test_recycle_after_must_be_positive() -> None:
    with pytest.raises(ValueError, match="recycle_after"):
        BrowserPool(1, recycle_after=0)
