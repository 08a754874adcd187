"""Where the miniwob package keeps the MiniWoB++ task pages (its own module, so the
experts that read a page's data, e.g. the email templates, need not import the suite)."""

from __future__ import annotations

from pathlib import Path

from rmsweb.errors import UserError


def html_root() -> Path:
    """site-packages/miniwob/html: the served root (task pages load ../core/, ../common/)."""
    try:
        import miniwob
    except ImportError:
        raise UserError(
            "the MiniWoB++ pages are missing: `pip install miniwob` (the rmsweb venv has it)."
        ) from None
    return Path(miniwob.__file__).parent / "html"
