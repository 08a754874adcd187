"""Build an episode runner from a suite spec: configs become plain arguments here.

runner = build_runner(cfg.suite, run="eval/miniwob-cpu", stage="eval")
async with runner: ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rmsweb.suites.factory import build_suite

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
    }


def build_runner(spec: Any, *, run: str, stage: str, **overrides: Any) -> EpisodeRunner:
    """An EpisodeRunner for a suite spec (not started: `async with` it)."""
    from rmsweb.rollout.runner import EpisodeRunner

    options = runner_options(spec.browser)
    options["max_steps"] = spec.max_steps
    options.update(overrides)
    return EpisodeRunner(build_suite(spec), run=run, stage=stage, **options)
