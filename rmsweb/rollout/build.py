"""Build an episode runner from a suite spec: configs become plain arguments here.

runner = build_runner(cfg.suite, run="eval/miniwob-cpu", stage="eval")
async with runner: ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rmsweb.suites.factory import LIVE_SUITES, build_suite

if TYPE_CHECKING:
    from rmsweb.rollout.runner import EpisodeRunner
    from rmsweb.spec import BrowserSpec


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
        "navigation_timeout_s": browser.navigation_timeout_s,
    }


def build_runner(spec: Any, *, run: str, stage: str, **overrides: Any) -> EpisodeRunner:
    """An EpisodeRunner for a suite spec (not started: `async with` it).

    Live suites: the browser pool carries the suite's safety policy (env/guard.py), and
    every episode gets a fresh context (`recycle_after=1`), so no cookie, login or cart
    of one task's site carries over into the next task.
    """
    from rmsweb.rollout.runner import EpisodeRunner

    suite = build_suite(spec)
    options = runner_options(spec.browser)
    options["max_steps"] = spec.max_steps
    if spec.kind in LIVE_SUITES:
        options["navigation_policy"] = suite.navigation_policy  # type: ignore[attr-defined]
        options["recycle_after"] = 1
    options.update(overrides)
    return EpisodeRunner(suite, run=run, stage=stage, **options)
