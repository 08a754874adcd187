"""`rmsweb suite check`: run each scripted expert through the episode runner.

Every local task has a gold path; this checks that the experts still reach reward 1
on the pages as served (a model-free check, also run by tests).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from rmsweb.errors import UserError
from rmsweb.suites.factory import check_suite_name

PASS_RATE = 0.95  # every scripted expert must solve at least this share of episodes


def check_experts(
    suite: str,
    *,
    split: str = "test",
    seeds: int = 50,
    tasks: Sequence[str] | None = None,
    contexts: int = 2,
) -> int:
    """Run each expert on `seeds` seeds of `split`; print a per-task table; return the
    exit code (1 when an expert solves fewer than 95% of its episodes)."""
    from rmsweb.spec import MiniWoBSuite, SeedRange
    from rmsweb.suites.miniwob import resolve_tasks
    from rmsweb.suites.miniwob_experts import EXPERTS

    name = check_suite_name(suite)
    if name != "miniwob":
        raise UserError(f"{name} has no scripted experts (only miniwob does).")
    if split not in ("train", "test"):
        raise UserError(f"unknown split {split!r}; use train or test.")
    if seeds < 1:
        raise UserError("--seeds must be at least 1.")
    names = resolve_tasks(tasks) if tasks else sorted(EXPERTS)
    missing = [t for t in names if t not in EXPERTS]
    if missing:
        raise UserError(
            f"no expert for {', '.join(missing)}. Tasks with experts: {', '.join(sorted(EXPERTS))}."
        )
    defaults = MiniWoBSuite()
    ranges = {
        "train": SeedRange(start=defaults.train.start, count=seeds),
        "test": SeedRange(start=defaults.test.start, count=seeds),
    }
    if ranges["train"].overlaps(ranges["test"]):
        raise UserError(f"--seeds {seeds} is too many: train and test seeds would overlap.")
    spec = MiniWoBSuite(
        tasks=names,
        train=ranges["train"],
        test=ranges["test"],
        browser=defaults.browser.model_copy(update={"contexts": contexts}),
    )
    stats = asyncio.run(_run_experts(spec, split))
    return _report(stats, names, split, seeds)


async def _run_experts(spec: object, split: str):  # -> RunStats
    from rmsweb.agents.expert import ExpertPolicy
    from rmsweb.rollout.build import build_runner
    from rmsweb.store.rows import MemorySink
    from rmsweb.suites.miniwob_experts import EXPERTS

    async with build_runner(spec, run="suite-check", stage="check") as runner:
        suite = runner.suite
        return await runner.run(
            ExpertPolicy(EXPERTS),
            suite.task_ids(),
            suite.seeds(split),
            MemorySink(),
            split=split,
            description="experts",
        )


def _report(stats: object, names: Sequence[str], split: str, seeds: int) -> int:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"miniwob experts, {split} split, {seeds} seeds per task")
    table.add_column("task", no_wrap=True)
    for col in ("episodes", "success", "steps", "env errors", "reruns"):
        table.add_column(col, justify="right")
    failing = []
    per_task = stats.per_task  # type: ignore[attr-defined]
    for task in names:
        rows = per_task.get(task, [])
        n = len(rows)
        rate = sum(r.success for r in rows) / n if n else 0.0
        steps = sum(r.n_steps for r in rows) / n if n else 0.0
        errors = sum(r.error is not None for r in rows)
        reruns = sum(r.env_retries for r in rows)
        ok = rate >= PASS_RATE
        if not ok:
            failing.append(task)
        style = "" if ok else "bold red"
        table.add_row(
            task, str(n), f"{rate:.0%}", f"{steps:.1f}", str(errors), str(reruns), style=style
        )
    console = Console()
    console.print(table)
    wall = stats.wall_s  # type: ignore[attr-defined]
    episodes = stats.episodes  # type: ignore[attr-defined]
    console.print(
        f"{episodes} episodes in {wall:.1f} s ({episodes / wall if wall else 0:.1f} episodes/s)."
    )
    if failing:
        console.print(f"[bold red]below {PASS_RATE:.0%}: {', '.join(failing)}[/]")
        return 1
    console.print(f"all {len(names)} experts at or above {PASS_RATE:.0%}.")
    return 0
