"""User-facing errors: the CLI prints their message (no traceback) and exits 2."""

from __future__ import annotations


class UserError(Exception):
    """Bad input, a missing file or tool, an unusable config: something the user can fix."""


class DiskFullError(UserError):
    """The disk filled up while writing an output; what was committed before is intact."""


def is_disk_full(exc: OSError) -> bool:
    """Whether an OSError means no space (or quota) is left where it was writing."""
    import errno

    return exc.errno in (errno.ENOSPC, errno.EDQUOT) or "No space left on device" in str(exc)
