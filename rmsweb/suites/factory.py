"""Build suites from spec sections: configs become plain arguments here.

suite = build_suite(cfg.suite)
(The episode runner over a suite is built by rmsweb.rollout.build.build_runner.)
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any

from rmsweb.errors import UserError

if TYPE_CHECKING:
    from rmsweb.suites.base import Suite

# Every suite kind the spec knows: MiniWoB offline, the others live (judged by an LLM):
# the three benchmarks, and a task pool of the user's own live tasks (suites/task_pool.py).
SUITE_KINDS = ("miniwob", "webvoyager", "online_mind2web", "webtailbench", "task_pool")
LIVE_SUITES = ("webvoyager", "online_mind2web", "webtailbench", "task_pool")


def check_suite_name(name: str) -> str:
    """Return `name` if it is a suite kind; else a UserError naming the closest ones."""
    if name in SUITE_KINDS:
        return name
    close = difflib.get_close_matches(name, SUITE_KINDS, n=3, cutoff=0.4)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise UserError(f"unknown suite {name!r}.{hint} Suites: {', '.join(SUITE_KINDS)}.")


def build_suite(spec: Any) -> Suite:
    """A suite object from a suite spec (rmsweb.spec MiniWoBSuite, ...)."""
    kind = check_suite_name(spec.kind)
    if kind == "miniwob":
        from rmsweb.suites.miniwob import MiniWoB

        return MiniWoB(
            spec.tasks,
            train_seeds=spec.train.seeds(),
            val_seeds=spec.val.seeds(),
            test_seeds=spec.test.seeds(),
            mine_seeds=spec.mine.seeds(),
            max_steps=spec.max_steps,
        )
    from rmsweb.suites.benchmarks import build_live_suite

    return build_live_suite(spec)
