"""Environment errors: the browser failed, not the policy.

An EnvError ends the current try of an episode; the runner recovers the browser and
reruns the episode (up to a limit). Errors of a single action that the page survives
(a missing element id, a blocked URL) are step errors instead: plain strings shown to
the policy in the next observation.
"""

from __future__ import annotations


class EnvError(Exception):
    """The browser or page crashed, hung, or lost the task page."""


# Substrings of Playwright error messages that mean the page or browser is gone.
_GONE = (
    "Target page, context or browser has been closed",
    "Target closed",
    "Browser has been closed",
    "Browser closed",
    "browser has disconnected",
    "Page crashed",
    "Target crashed",
    "Connection closed",
    "Execution context was destroyed",
    "has been closed",
)


def is_gone(exc: BaseException) -> bool:
    """True when a Playwright error says the page, context or browser no longer exists."""
    msg = str(exc)
    return any(s in msg for s in _GONE)
