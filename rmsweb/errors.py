"""User-facing errors: the CLI prints their message (no traceback) and exits 2."""

from __future__ import annotations


class UserError(Exception):
    """Bad input, a missing file or tool, an unusable config: something the user can fix."""
