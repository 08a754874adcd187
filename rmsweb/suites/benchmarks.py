"""The live benchmarks by suite kind: their loaders, and a live suite from a suite spec.

    suite = build_live_suite(spec.suite)    # a WebVoyagerSuite / ... spec section

`BENCHMARKS` is what `rmsweb suite list` / `suite show` print for the live kinds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rmsweb.suites.live import LiveSuite, LiveTaskInfo, select
from rmsweb.suites.online_mind2web import load_online_mind2web
from rmsweb.suites.task_pool import load_task_pool
from rmsweb.suites.webtailbench import load_webtailbench
from rmsweb.suites.webvoyager import load_webvoyager


@dataclass(frozen=True)
class Benchmark:
    kind: str
    title: str
    category_name: str  # what a task's `category` is in this benchmark
    judge: str  # the judge protocol its authors score with
    load: Callable[..., list[LiveTaskInfo]]


BENCHMARKS: dict[str, Benchmark] = {
    "webvoyager": Benchmark(
        "webvoyager", "WebVoyager (595 cleaned / 643 tasks, 15 sites)", "site", "webvoyager",
        load_webvoyager,
    ),
    "online_mind2web": Benchmark(
        "online_mind2web", "Online-Mind2Web (300 tasks, 3 levels)", "level", "webjudge",
        load_online_mind2web,
    ),
    "webtailbench": Benchmark(
        "webtailbench", "WebTailBench (609 tasks, 11 categories)", "category", "webtailbench",
        load_webtailbench,
    ),
    "task_pool": Benchmark(
        "task_pool", "Task pool (your live tasks; default: the bundled example)", "site",
        "webvoyager", load_task_pool,
    ),
}  # fmt: skip


def load_tasks(spec: Any) -> list[LiveTaskInfo]:
    """The spec's tasks: its task file (or the bundled one), filtered and limited."""
    kind = spec.kind
    if kind == "webvoyager":
        tasks = load_webvoyager(spec.tasks_file, cleaned=spec.cleaned)
        categories: Sequence[str] = ()
    elif kind == "online_mind2web":
        tasks = load_online_mind2web(spec.tasks_file)
        categories = spec.levels
    elif kind == "webtailbench":
        tasks = load_webtailbench(spec.tasks_file, start_url=spec.start_url)
        categories = spec.categories
    elif kind == "task_pool":
        tasks = load_task_pool(spec.tasks_file)
        categories = ()
    else:
        raise ValueError(f"not a live suite kind: {kind!r}")
    return select(tasks, benchmark=kind, sites=spec.sites, categories=categories, limit=spec.limit)


def build_live_suite(spec: Any) -> LiveSuite:
    """A LiveSuite from a live suite spec section (configs become plain arguments here)."""
    return LiveSuite(
        spec.kind,
        load_tasks(spec),
        test_fraction=spec.test_fraction,
        val_fraction=spec.val_fraction,
        max_steps=spec.max_steps,
        max_wall_s=spec.max_wall_s,
        allow_private_network=spec.allow_private_network,
        private_origins=spec.private_origins,
    )
