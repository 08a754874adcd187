"""Build suites and runners from spec sections: configs become plain arguments here.

suite = build_suite(cfg.suite)
runner = build_runner(cfg.suite, run="eval/miniwob-cpu", stage="eval")
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any

from rmsweb.errors import UserError

if TYPE_CHECKING:
    from rmsweb.runner import EpisodeRunner
    from rmsweb.spec import BrowserSpec
    from rmsweb.suites.base import Suite

# Every suite kind the spec knows; only the offline one runs in this build.
SUITE_KINDS = ("miniwob", "webvoyager", "online_mind2web", "webtailbench")
LIVE_SUITES = ("webvoyager", "online_mind2web", "webtailbench")


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
            test_seeds=spec.test.seeds(),
            max_steps=spec.max_steps,
        )
    raise UserError(
        f"the live suite {kind!r} is not available in this rmsweb build; use the offline "
        "`miniwob` suite."
    )


def runner_options(browser: BrowserSpec) -> dict[str, Any]:
    """EpisodeRunner keyword arguments from a BrowserSpec."""
    return {
        "contexts": browser.contexts,
        "screenshots": browser.screenshots,
        "set_of_marks": browser.set_of_marks,
        "viewport": (browser.viewport_width, browser.viewport_height),
        "action_timeout_s": browser.action_timeout_s,
        "episode_timeout_s": browser.episode_timeout_s,
        "max_env_retries": browser.max_env_retries,
    }


def build_runner(spec: Any, *, run: str, stage: str, **overrides: Any) -> EpisodeRunner:
    """An EpisodeRunner for a suite spec (not started: `async with` it)."""
    from rmsweb.runner import EpisodeRunner

    options = runner_options(spec.browser)
    options["max_steps"] = spec.max_steps
    options.update(overrides)
    return EpisodeRunner(build_suite(spec), run=run, stage=stage, **options)
