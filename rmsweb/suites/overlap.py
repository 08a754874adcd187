"""Training and evaluation tasks apart: what `rmsweb validate` checks of `eval.suites`.

A spec's policies train on `suite` and are evaluated on each of `eval.suites`. An
evaluation task the training suite also holds (the same task id, or the same start URL
and goal) is an error: the policy would be tested on a task it was trained on. Sharing
websites is allowed, but said: the evaluation is then not of unseen sites.

    errors, warnings = eval_overlaps(spec)    # [(dotted spec key, message)] each

The training suite's every task counts (whatever its split): collection, mining and
the hash split all read from it. An evaluation suite counts the tasks it evaluates
(after its filters, and within its split unless `split: all`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rmsweb.suites.live import LiveTaskInfo, split_of
from rmsweb.suites.task_pool import site_of

EXAMPLES = 3  # tasks named per message


def _key(task: LiveTaskInfo) -> tuple[str, str]:
    """Same start URL and goal: the URL without a trailing slash, the goal's words."""
    return task.start_url.strip().rstrip("/"), " ".join(task.goal.split()).casefold()


def evaluated_tasks(ev: Any) -> list[LiveTaskInfo]:
    """The tasks an `eval.suites` entry evaluates."""
    from rmsweb.suites.benchmarks import load_tasks

    tasks = load_tasks(ev.suite)
    if ev.split == "all":
        return tasks
    s = ev.suite
    return [t for t in tasks if split_of(t.id, s.test_fraction, s.val_fraction) == ev.split]


def _training_tasks(spec: Any) -> list[LiveTaskInfo]:
    from rmsweb.suites.factory import LIVE_SUITES

    if spec.suite.kind not in LIVE_SUITES:
        return []  # an offline suite shares no task with a live benchmark
    from rmsweb.suites.benchmarks import load_tasks

    return load_tasks(spec.suite)


def _names(tasks: Sequence[str]) -> str:
    shown = ", ".join(tasks[:EXAMPLES])
    return shown + (f" and {len(tasks) - EXAMPLES} more" if len(tasks) > EXAMPLES else "")


def eval_overlaps(spec: Any) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(errors, warnings) of `spec`'s evaluation suites against its training suite."""
    errors: list[tuple[str, str]] = []
    warnings: list[tuple[str, str]] = []
    if not spec.eval.suites:
        return errors, warnings
    train = _training_tasks(spec)
    if not train:
        return errors, warnings
    by_id = {t.id: t for t in train}
    by_key = {_key(t): t for t in train}
    train_sites: dict[str, int] = {}
    for t in train:
        train_sites[site_of(t.start_url)] = train_sites.get(site_of(t.start_url), 0) + 1
    where = f"the training suite ({spec.suite.kind}" + (
        f", {spec.suite.tasks_file})" if getattr(spec.suite, "tasks_file", None) else ")"
    )
    for j, ev in enumerate(spec.eval.suites):
        tasks = evaluated_tasks(ev)
        same: list[str] = []
        for t in tasks:
            if t.id in by_id:
                same.append(f"{t.id!r} (same id)")
            elif _key(t) in by_key:
                same.append(f"{t.id!r} (same start URL and goal as {by_key[_key(t)].id!r})")
        if same:
            errors.append(
                (
                    f"eval.suites.{j}.suite",
                    f"{len(same)} of the {len(tasks)} tasks of evaluation suite {ev.name!r} "
                    f"are also in {where}: {_names(same)}. A policy would be tested on tasks "
                    "it was trained on. Fix: train on a pool without them, or filter the "
                    "evaluation suite (sites, limit).",
                )
            )
            continue
        sites: dict[str, int] = {}
        for t in tasks:
            site = site_of(t.start_url)
            if site in train_sites:
                sites[site] = sites.get(site, 0) + 1
        if sites:
            shared = sorted(sites, key=lambda s: (-sites[s], s))
            warnings.append(
                (
                    f"eval.suites.{j}.suite",
                    f"evaluation suite {ev.name!r} shares {len(shared)} website(s) with "
                    f"{where}: {sum(sites.values())} of its {len(tasks)} tasks start on "
                    f"them ({_names(shared)}), where {sum(train_sites[s] for s in shared)} "
                    "training tasks start; on those its numbers are not of unseen sites.",
                )
            )
    return errors, warnings


def located_overlaps(spec: Any, source: Any, overrides: Sequence[str] = ()) -> tuple[list, list]:
    """`eval_overlaps` at the spec file's lines: (SpecErrors' errors, warning lines)."""
    from rmsweb.spec.loader import SpecError, apply_overrides, display_path, load_located

    errors, warnings = eval_overlaps(spec)
    if not errors and not warnings:
        return [], []
    located = apply_overrides(load_located(source), overrides)

    def at(key: str) -> Any:
        path: tuple[str | int, ...] = tuple(int(p) if p.isdigit() else p for p in key.split("."))
        for n in range(len(path), 0, -1):
            if path[:n] in located.positions:
                return located.positions[path[:n]]
        from rmsweb.spec.loader import Pos

        return Pos(display_path(source), 1, 1)

    return (
        [SpecError(at(key), key, message) for key, message in errors],
        [f"{at(key)} {key}: {message}" for key, message in warnings],
    )
