"""Runs the benchmark episodes through BrowserGym-miniwob (in BrowserGym's own venv).

Usage: python browsergym_worker.py JOB.json  -> prints one JSON result line.
The job names tasks, seeds and settings. Episodes use the same seeds as rmsweb
(the task's derived seed is replaced by the episode seed, so the problems are the
same), and the same selector actions as the raw Playwright floor, passed as Python
code (action_mapping=None): what is measured is BrowserGym's own reset, waits and
observation extraction.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from browsergym.core.env import BrowserEnv
from browsergym.miniwob import ALL_MINIWOB_TASKS
from raw_plans import as_python, raw_plan


class _Fixed:
    """Stands in for the task's RandomState: randint gives the episode seed."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def randint(self, lo: int, hi: int) -> int:
        return self.seed


def seeded(task_cls: type) -> type:
    class Seeded(task_cls):  # type: ignore[misc, valid-type]
        def __init__(self, seed: int, **kwargs: object) -> None:
            super().__init__(seed=seed, **kwargs)
            self._episode_seed = seed

        def setup(self, page):  # type: ignore[no-untyped-def]
            # BrowserGym seeds MiniWoB with randint(seed); use the seed itself, as rmsweb does
            self.random = _Fixed(self._episode_seed)
            return super().setup(page)

    return Seeded


def main() -> None:
    job = json.loads(Path(sys.argv[1]).read_text())
    episodes = []
    t_all = time.perf_counter()
    for task in job["tasks"]:
        entry = next(t for t in ALL_MINIWOB_TASKS if t.subdomain == task)
        kwargs: dict = {
            "task_entrypoint": seeded(entry),
            "headless": True,
            "action_mapping": None,
            "pw_chromium_kwargs": {"executable_path": job["chromium"]},
        }
        if job["fast"]:
            kwargs.update(pre_observation_delay=0.0, slow_mo=0)
        env = BrowserEnv(**kwargs)
        try:
            for seed in job["seeds"]:
                t0 = time.perf_counter()
                obs, _ = env.reset(seed=seed)
                reset_s = time.perf_counter() - t0
                step_s = []
                reward, done = 0.0, False
                for step in raw_plan(task, obs["goal"]):
                    t = time.perf_counter()
                    obs, reward, done, _, _ = env.step(as_python(step))
                    step_s.append(time.perf_counter() - t)
                    if done:
                        break
                episodes.append(
                    {
                        "task": task,
                        "seed": seed,
                        "utterance": obs["goal"],
                        "success": bool(done and reward > 0),
                        "error": obs["last_action_error"] or None,
                        "reset_s": reset_s,
                        "step_s": step_s,
                        "wall_s": time.perf_counter() - t0,
                    }
                )
        finally:
            env.close()
    print(json.dumps({"episodes": episodes, "wall_s": time.perf_counter() - t_all}))


if __name__ == "__main__":
    main()
