"""Environment throughput: rmsweb vs a raw Playwright loop vs BrowserGym-miniwob.

    python benchmarks/env_throughput.py            # ~1 h on 2 cores, most of it BrowserGym
    python benchmarks/env_throughput.py --browsergym-episodes 8   # quicker BrowserGym part

A performance script, not a test. The scripted experts play 5 MiniWoB tasks x N seeds
(single- and multi-step): click-button, click-link, enter-text (2 steps), login-user
(3 steps), click-checkboxes (1-7 steps). Measured:

- rmsweb: EpisodeRunner + ExpertPolicy with 1, 2 and 4 contexts, text observations and
  with screenshots. Step time = executing the action, reading the reward and the next
  observation (the policy's own time is excluded; the expert takes ~0.05 ms).
- raw floor: the same episodes as a bare Playwright loop: same reset, then the expert's
  actions as selector clicks/fills (benchmarks/raw_plans.py) and a reward read; no
  observation at all.
- BrowserGym-miniwob (own venv, Playwright 1.44, made here on first use): the same
  tasks, seeds (the task's derived seed is replaced by the episode seed, so the
  problems are identical) and selector actions, passed as Python code
  (action_mapping=None), with its defaults and in its fastest honest setting
  (pre_observation_delay=0, slow_mo=0). Its env.reset relaunches Chromium (and a chat
  window browser) every episode: that is how BrowserGym works, so it is counted.

The last line is `ratio_vs_browsergym_text=X ratio_vs_browsergym_screenshot=Y
ratio_vs_raw_text=Z`: rmsweb episodes/s (1 context, like BrowserGym's one env) over
BrowserGym's fastest episodes/s, in text and screenshot mode; and rmsweb's mean step
time over the raw floor's (1 context, text). Goals: X, Y >= 5 and Z <= 1.5.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))

from raw_plans import TASKS, raw_plan  # noqa: E402

BENCH_DIR = ROOT / "runs" / "benchmarks"
BG_VENV = BENCH_DIR / "browsergym-venv"
TEST_SEED0 = 100_000  # the default test split's first seed
WARMUP_SEEDS = [0]  # one train-split episode per task before timing (warm HTTP cache)


@dataclass
class Result:
    name: str
    episodes: int
    successes: int
    steps: int
    wall_s: float
    step_s: float  # summed time of steps (no resets)

    @property
    def eps_per_s(self) -> float:
        return self.episodes / self.wall_s

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.wall_s

    @property
    def step_ms(self) -> float:
        return 1000 * self.step_s / self.steps

    def line(self) -> str:
        return (
            f"{self.name:34s} {self.episodes:5d} ep  {self.successes / self.episodes:6.1%} ok  "
            f"{self.eps_per_s:7.2f} ep/s  {self.steps_per_s:7.2f} steps/s  "
            f"{self.step_ms:7.1f} ms/step  {self.steps / self.episodes:4.2f} steps/ep  "
            f"{self.wall_s:7.1f} s"
        )


# --------------------------------------------------------------------------- rmsweb


async def run_rmsweb(seeds: list[int], contexts: int, screenshots: bool) -> Result:
    from rmsweb.agents.expert import ExpertPolicy
    from rmsweb.rollout.runner import EpisodeRunner
    from rmsweb.store.rows import MemorySink
    from rmsweb.suites.miniwob import MiniWoB
    from rmsweb.suites.miniwob_experts import EXPERTS

    suite = MiniWoB(TASKS, train_seeds=WARMUP_SEEDS, test_seeds=seeds)
    async with EpisodeRunner(
        suite, contexts=contexts, screenshots=screenshots, progress=False
    ) as runner:
        policy = ExpertPolicy(EXPERTS)
        await runner.run(policy, TASKS, WARMUP_SEEDS, MemorySink(), split="train")
        stats = await runner.run(policy, TASKS, seeds, MemorySink(), split="test")
    mode = "screenshot" if screenshots else "text"
    return Result(
        name=f"rmsweb {mode}, {contexts} context(s)",
        episodes=stats.episodes,
        successes=stats.successes,
        steps=stats.timing.steps,
        wall_s=stats.wall_s,
        step_s=stats.timing.env_s,
    )


# --------------------------------------------------------------------------- raw floor


async def run_raw(seeds: list[int], contexts: int) -> Result:
    from playwright.async_api import async_playwright

    from rmsweb.env.launch import LAUNCH_FLAGS, find_chromium
    from rmsweb.env.server import StaticServer
    from rmsweb.suites.miniwob import NO_TIME_LIMIT_MS, START_JS, html_root

    totals = {"episodes": 0, "successes": 0, "steps": 0, "step_s": 0.0}

    async def episode(page, base: str, task: str, seed: int, count: bool) -> None:
        await page.goto(f"{base}/miniwob/{task}.html", wait_until="load")
        started = await page.evaluate(START_JS, [seed, "raw", NO_TIME_LIMIT_MS])
        success = False
        for kind, selector, text in raw_plan(task, started["utterance"]):
            t = time.perf_counter()
            if kind == "click":
                await page.click(selector)
            else:
                await page.fill(selector, text)
            done, raw = await page.evaluate("() => [WOB_DONE_GLOBAL, WOB_RAW_REWARD_GLOBAL]")
            if count:
                totals["step_s"] += time.perf_counter() - t
                totals["steps"] += 1
            if done:
                success = raw >= 1.0
                break
        if count:
            totals["episodes"] += 1
            totals["successes"] += int(success)

    with StaticServer(html_root()) as server:
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(
                executable_path=find_chromium(pw.chromium.executable_path),
                headless=True,
                args=list(LAUNCH_FLAGS),
            )
            pages = []
            for _ in range(contexts):
                ctx = await browser.new_context(viewport={"width": 1024, "height": 768})
                pages.append(await ctx.new_page())
            for task in TASKS:  # warm-up, like the rmsweb runs
                await episode(pages[0], server.origin, task, WARMUP_SEEDS[0], count=False)
            queue = [(t, s) for s in seeds for t in TASKS]

            async def worker(page) -> None:
                while queue:
                    task, seed = queue.pop(0)
                    await episode(page, server.origin, task, seed, count=True)

            t0 = time.perf_counter()
            await asyncio.gather(*(worker(p) for p in pages))
            wall = time.perf_counter() - t0
            await browser.close()
    return Result(
        name=f"raw Playwright floor, {contexts} context(s)",
        episodes=totals["episodes"],
        successes=totals["successes"],
        steps=totals["steps"],
        wall_s=wall,
        step_s=totals["step_s"],
    )


# --------------------------------------------------------------------------- BrowserGym


def ensure_browsergym() -> Path:
    """BrowserGym's own venv (it pins Playwright 1.44), and a Chromium it can launch."""
    python = BG_VENV / "bin" / "python"
    if not python.exists():
        print(f"making {BG_VENV} (pip install browsergym-miniwob) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(BG_VENV)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "browsergym-miniwob"], check=True
        )
    # BrowserGym passes its own `args` to launch (ours would clash), and starts a second
    # browser for its chat window from Playwright's browser folder: both go through a
    # wrapper that adds the flags which keep Chromium off the (closed) network.
    wrapper = BENCH_DIR / "chromium-wrapper"
    from rmsweb.env.launch import LAUNCH_FLAGS

    binary = "/usr/lib/chromium/chromium"
    if not os.access(binary, os.X_OK):
        binary = "/usr/bin/chromium"
    wrapper.write_text(f'#!/bin/sh\nexec {binary} {" ".join(LAUNCH_FLAGS)} "$@"\n')
    wrapper.chmod(0o755)
    link = BENCH_DIR / "pw-browsers" / "chromium-1117" / "chrome-linux" / "chrome"
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(wrapper)
    return wrapper


def run_browsergym(seeds: list[int], fast: bool) -> tuple[Result, list[str]]:
    from rmsweb.env.server import StaticServer
    from rmsweb.suites.miniwob import html_root

    wrapper = ensure_browsergym()
    with StaticServer(html_root()) as server, tempfile.TemporaryDirectory() as tmp:
        job = Path(tmp) / "job.json"
        job.write_text(
            json.dumps(
                {"tasks": list(TASKS), "seeds": seeds, "fast": fast, "chromium": str(wrapper)}
            )
        )
        env = dict(
            os.environ,
            MINIWOB_URL=server.url("miniwob/"),  # over http the served root is html/
            PLAYWRIGHT_BROWSERS_PATH=str(BENCH_DIR / "pw-browsers"),
        )
        out = subprocess.run(
            [
                str(BG_VENV / "bin" / "python"),
                str(Path(__file__).parent / "browsergym_worker.py"),
                str(job),
            ],
            env=env,
            capture_output=True,
            text=True,
        )
    if out.returncode != 0:
        raise SystemExit(f"BrowserGym worker failed:\n{out.stderr[-4000:]}")
    data = json.loads(out.stdout.strip().splitlines()[-1])
    eps = data["episodes"]
    steps = [s for e in eps for s in e["step_s"]]
    name = "BrowserGym fastest (delay 0, slow_mo 0)" if fast else "BrowserGym defaults"
    result = Result(
        name=name,
        episodes=len(eps),
        successes=sum(e["success"] for e in eps),
        steps=len(steps),
        wall_s=sum(e["wall_s"] for e in eps),
        step_s=sum(steps),
    )
    return result, [f"{e['task']}/{e['seed']}: {e['utterance']}" for e in eps]


async def utterances(seeds: list[int]) -> list[str]:
    """rmsweb's instructions for the same episodes (to show the problems are the same)."""
    from rmsweb.env.pool import BrowserPool
    from rmsweb.env.session import PageSession
    from rmsweb.suites.miniwob import MiniWoB

    suite = MiniWoB(TASKS, test_seeds=seeds)
    await suite.start()
    out = []
    try:
        async with (
            BrowserPool(1, allowed_origins=suite.allowed_origins) as pool,
            pool.slot() as slot,
        ):
            page = await pool.page(slot)
            for task in TASKS:
                for seed in seeds:
                    session = PageSession(page)
                    text = await suite.task(task, seed, "test").setup(session)
                    out.append(f"{task}/{seed}: {text}")
    finally:
        await suite.close()
    return out


# --------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--episodes", type=int, default=40, help="seeds per task (default 40)")
    ap.add_argument(
        "--browsergym-episodes",
        type=int,
        default=None,
        help="seeds per task for BrowserGym (default: --episodes); the first N of the same seeds",
    )
    ap.add_argument("--contexts", default="1,2,4", help="rmsweb context counts")
    ap.add_argument("--skip-browsergym", action="store_true")
    args = ap.parse_args()
    seeds = list(range(TEST_SEED0, TEST_SEED0 + args.episodes))
    bg_seeds = seeds[: args.browsergym_episodes or args.episodes]
    contexts = [int(c) for c in args.contexts.split(",")]
    print(
        f"tasks: {', '.join(TASKS)}; {len(seeds)} seeds per task ({len(seeds) * len(TASKS)} episodes)"
    )
    print(f"machine: {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}", flush=True)

    results: dict[str, Result] = {}

    def show(key: str, r: Result) -> None:
        results[key] = r
        print(r.line(), flush=True)

    # The floor and rmsweb's 1-context text run back to back: the step-time ratio
    # compares them under the same machine load.
    show("raw1", asyncio.run(run_raw(seeds, 1)))
    show("text1", asyncio.run(run_rmsweb(seeds, 1, False)))
    for c in contexts:
        if c != 1:
            show(f"raw{c}", asyncio.run(run_raw(seeds, c)))
    for shots in (False, True):
        for c in contexts:
            key = f"{'shot' if shots else 'text'}{c}"
            if key not in results:
                show(key, asyncio.run(run_rmsweb(seeds, c, shots)))

    ratio_raw = results["text1"].step_ms / results["raw1"].step_ms
    print(f"rmsweb step time / raw floor step time (1 context, text): {ratio_raw:.2f}")
    if args.skip_browsergym:
        print(
            f"ratio_vs_browsergym_text=nan ratio_vs_browsergym_screenshot=nan ratio_vs_raw_text={ratio_raw:.2f}"
        )
        return

    print(
        f"BrowserGym: {len(bg_seeds)} seeds per task ({len(bg_seeds) * len(TASKS)} episodes)",
        flush=True,
    )
    bg_default, _ = run_browsergym(bg_seeds, fast=False)
    show("bg_default", bg_default)
    bg_fast, bg_texts = run_browsergym(bg_seeds, fast=True)
    show("bg_fast", bg_fast)
    ours = asyncio.run(utterances(bg_seeds))
    same = len(set(ours) & set(bg_texts))
    print(f"same instructions in rmsweb and BrowserGym: {same}/{len(ours)} episodes")

    rt = results["text1"].eps_per_s / bg_fast.eps_per_s
    rs = results["shot1"].eps_per_s / bg_fast.eps_per_s
    best_t = max(r.eps_per_s for k, r in results.items() if k.startswith("text"))
    best_s = max(r.eps_per_s for k, r in results.items() if k.startswith("shot"))
    print(
        f"rmsweb / BrowserGym fastest episodes/s: text {rt:.1f}x, screenshot {rs:.1f}x "
        f"(1 context); best context count: text {best_t / bg_fast.eps_per_s:.1f}x, "
        f"screenshot {best_s / bg_fast.eps_per_s:.1f}x; vs BrowserGym defaults: "
        f"text {results['text1'].eps_per_s / bg_default.eps_per_s:.1f}x"
    )
    print(
        f"ratio_vs_browsergym_text={rt:.2f} ratio_vs_browsergym_screenshot={rs:.2f} ratio_vs_raw_text={ratio_raw:.2f}"
    )


if __name__ == "__main__":
    main()
