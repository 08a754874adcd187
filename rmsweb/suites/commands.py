"""`rmsweb suite list` / `suite show`: what the suites hold. (`suite check` is
rmsweb.evaluate.experts.)

Live suites are read from their bundled task files; `show` gives the split of a spec
with the default fractions (the split is by task-id hash, so these are the tasks a
default spec trains, validates and tests on).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from rmsweb.suites.factory import LIVE_SUITES, SUITE_KINDS, check_suite_name


def _default_live_spec(kind: str) -> Any:
    from rmsweb.spec.suite import (
        OnlineMind2WebSuite,
        TaskPoolSuite,
        WebTailBenchSuite,
        WebVoyagerSuite,
    )
    from rmsweb.suites.task_pool import EXAMPLE_POOL

    if kind == "task_pool":  # no bundled benchmark: the documented example pool
        return TaskPoolSuite(tasks_file=str(EXAMPLE_POOL))
    classes = {
        "webvoyager": WebVoyagerSuite,
        "online_mind2web": OnlineMind2WebSuite,
        "webtailbench": WebTailBenchSuite,
    }
    return classes[kind]()


def live_summary(kind: str) -> dict[str, Any]:
    """A live suite with its spec's defaults: tasks, and per category the tasks per split."""
    from rmsweb.suites.benchmarks import BENCHMARKS, build_live_suite

    spec = _default_live_spec(kind)
    suite = build_live_suite(spec)
    split_of = {t: s for s in ("train", "val", "test") for t in suite.task_ids(s)}
    per_category: dict[str, Counter[str]] = {}
    for task_id in suite.task_ids():
        category = suite.info(task_id).category
        per_category.setdefault(category, Counter())[split_of[task_id]] += 1
    bench = BENCHMARKS[kind]
    return {
        "kind": kind,
        "title": bench.title,
        "category_name": bench.category_name,
        "judge": bench.judge,
        "tasks": len(suite.task_ids()),
        "splits": {s: len(suite.task_ids(s)) for s in ("train", "val", "test")},
        "fractions": {"test": spec.test_fraction, "val": spec.val_fraction},
        "sites": len({suite.info(t).site for t in suite.task_ids()} - {""}),
        "per_category": per_category,
    }


def list_tasks(suite: str | None = None) -> None:
    """Print the suites, or one suite's tasks (MiniWoB: marking those with an expert)."""
    from rich.console import Console
    from rich.table import Table

    from rmsweb.spec.miniwob_tasks import MINIWOB_TASKS
    from rmsweb.suites.miniwob_experts import EXPERTS
    from rmsweb.suites.miniwob_experts.gold import GOLD_STEPS

    console = Console()
    if suite is None:
        table = Table(title="Suites (`rmsweb suite show NAME` for one)")
        for col in ("suite", "kind", "tasks", "experts", "success", "splits", "groups"):
            table.add_column(col, justify="right" if col in ("tasks", "experts") else "left")
        table.add_row(
            "miniwob",
            "offline",
            str(len(MINIWOB_TASKS)),
            str(len(EXPERTS)),
            "task reward",
            "seed ranges",
            f"{len(MINIWOB_TASKS)} tasks",
        )
        for name in LIVE_SUITES:
            s = live_summary(name)
            n, what = len(s["per_category"]), s["category_name"]
            table.add_row(
                name,
                "live",
                str(s["tasks"]),
                "0",
                f"{s['judge']} judge",
                "/".join(str(s["splits"][k]) for k in ("train", "val", "test")),
                f"{n} {'categories' if what == 'category' else what + 's'}",
            )
        console.print(table)
        console.print(
            "Live tasks: the default spec (WebVoyager: the cleaned file); splits "
            "train/val/test by task-id hash at the default fractions."
        )
        return
    name = check_suite_name(suite)
    if name in LIVE_SUITES:
        _list_live_tasks(console, name)
        return
    multi = sum(GOLD_STEPS.get(t, 0.0) >= 3 for t in EXPERTS)
    table = Table(
        title=f"miniwob: {len(MINIWOB_TASKS)} tasks, {len(EXPERTS)} with an expert "
        f"({multi} multi-step: gold >= 3 steps)"
    )
    table.add_column("task")
    table.add_column("expert", justify="center")
    table.add_column("gold steps", justify="right")
    for task in MINIWOB_TASKS:
        gold = GOLD_STEPS.get(task) if task in EXPERTS else None
        table.add_row(task, "yes" if task in EXPERTS else "", f"{gold:.2f}" if gold else "")
    console.print(table)
    console.print(
        "gold steps: the expert's mean episode length on the 50 default test seeds "
        "(`rmsweb suite check miniwob` measures it)."
    )


def _list_live_tasks(console: Any, name: str) -> None:
    from rich.table import Table

    from rmsweb.suites.benchmarks import build_live_suite

    suite = build_live_suite(_default_live_spec(name))
    split_of = {t: s for s in ("train", "val", "test") for t in suite.task_ids(s)}
    table = Table(title=f"{name}: {len(suite.task_ids())} tasks (default spec)")
    for col in ("task", "category", "split", "start URL"):
        table.add_column(col)
    for task_id in suite.task_ids():
        info = suite.info(task_id)
        table.add_row(task_id, info.category, split_of[task_id], info.start_url)
    console.print(table)


def show_suite(suite: str) -> None:
    """Print one suite: task counts, categories (sites, levels, segments) and splits."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    name = check_suite_name(suite)
    if name not in LIVE_SUITES:
        from rmsweb.spec import MiniWoBSuite
        from rmsweb.spec.miniwob_tasks import MINIWOB_TASKS
        from rmsweb.suites.miniwob_experts import EXPERTS

        spec = MiniWoBSuite()
        console.print(
            f"miniwob: offline MiniWoB++, {len(MINIWOB_TASKS)} tasks, {len(EXPERTS)} with a "
            "scripted expert; success is the task's reward.\n"
            f"Splits are seed ranges per task (defaults): train {spec.train.count} seeds "
            f"from {spec.train.start}, val {spec.val.count} from {spec.val.start}, test "
            f"{spec.test.count} from {spec.test.start}.\n"
            "`rmsweb suite list miniwob` lists the tasks."
        )
        return
    s = live_summary(name)
    f = s["fractions"]
    sites = f", {s['sites']} sites" if s["sites"] and s["category_name"] != "site" else ""
    console.print(
        f"{name}: {s['title']}. {s['tasks']} tasks in the default spec{sites}; judged by "
        f"the {s['judge']} protocol.\n"
        f"Split by task-id hash (test_fraction {f['test']:g}, val_fraction {f['val']:g}): "
        f"train {s['splits']['train']}, val {s['splits']['val']}, test {s['splits']['test']}."
    )
    table = Table(title=f"{name} by {s['category_name']}")
    for col in (s["category_name"], "tasks", "train", "val", "test"):
        table.add_column(col, justify="left" if col == s["category_name"] else "right")
    order = {"easy": 0, "medium": 1, "hard": 2}  # Online-Mind2Web's levels, in their order
    for category, counts in sorted(
        s["per_category"].items(), key=lambda kv: (order.get(kv[0], 3), kv[0])
    ):
        table.add_row(
            category,
            str(sum(counts.values())),
            *(str(counts[split]) for split in ("train", "val", "test")),
        )
    console.print(table)


__all__ = ["SUITE_KINDS", "list_tasks", "show_suite"]
