"""Seeds derived from named parts, so every random draw of a run can be replayed."""

from __future__ import annotations

import hashlib


def derived_seed(*parts: object) -> int:
    """A 63-bit seed from any parts, the same in every process (no Python hash salt)."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1
