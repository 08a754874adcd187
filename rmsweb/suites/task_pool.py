"""A training task pool: live tasks a user writes or generates, in one JSON-lines file.

One JSON object a line (blank lines are skipped):

    {"start_url": "https://docs.python.org/3/", "goal": "Find ...", "reference_answer": "..."}

- `start_url` (required): where the episode starts, http(s).
- `goal` (required): the instruction the policy gets.
- `id` (optional): a stable task id; default `pool-` and 12 hex digits of
  sha256(start_url, goal), so a task keeps its id (and split) when lines move.
- `reference_answer` (optional): kept with the task for analysis, as the benchmarks'
  reference answers are; the judge does not see it.
- `site` (optional): default the start URL's host without `www.`.
- `category` (optional): what reports group by; default the site.

Splits are the live suites' own (`rmsweb.suites.live.split_of`: a hash of the task id
against test_fraction and val_fraction). Any problem is a UserError naming file:line.
The bundled example is data/task_pool/example.jsonl.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from urllib.parse import urlsplit

from rmsweb.errors import UserError
from rmsweb.suites.live import DATA, LiveTaskInfo

EXAMPLE_POOL = DATA / "task_pool" / "example.jsonl"
FIELDS = ("id", "start_url", "goal", "reference_answer", "site", "category")


def pool_task_id(start_url: str, goal: str) -> str:
    """The default id of a pool task: stable, from what the task is."""
    digest = hashlib.sha256(f"{start_url}\n{goal}".encode()).hexdigest()
    return f"pool-{digest[:12]}"


def site_of(url: str) -> str:
    """The host of `url`, lowercase, without a leading `www.` ("" when it has none)."""
    host = (urlsplit(url).hostname or "").lower()
    return host.removeprefix("www.")


def load_task_pool(tasks_file: str | Path | None = None) -> list[LiveTaskInfo]:
    """The tasks of a pool file (default: the bundled example)."""
    path = Path(tasks_file) if tasks_file else EXAMPLE_POOL
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read task pool {path}: {exc.strerror or exc}") from None
    tasks: list[LiveTaskInfo] = []
    seen_ids: dict[str, int] = {}
    seen_tasks: dict[tuple[str, str], int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{where}: not JSON ({exc.msg}).") from None
        if not isinstance(row, dict):
            raise UserError(f"{where}: expected a JSON object per line.")
        unknown = sorted(set(row) - set(FIELDS))
        if unknown:
            raise UserError(
                f"{where}: unknown field(s) {', '.join(unknown)}; a pool task has "
                f"{', '.join(FIELDS)} (start_url and goal required)."
            )
        for key in FIELDS:
            if key in row and not isinstance(row[key], str):
                raise UserError(f"{where}: {key} must be a string.")
        start_url, goal = row.get("start_url", "").strip(), row.get("goal", "").strip()
        missing = [k for k, v in (("start_url", start_url), ("goal", goal)) if not v]
        if missing:
            raise UserError(f"{where}: missing or empty {', '.join(missing)}.")
        parts = urlsplit(start_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UserError(f"{where}: start_url {start_url!r} is not an http(s) URL with a host.")
        task_id = row.get("id", "").strip() or pool_task_id(start_url, goal)
        if (start_url, goal) in seen_tasks:
            raise UserError(
                f"{where}: the same start_url and goal as line {seen_tasks[start_url, goal]}."
            )
        if task_id in seen_ids:
            raise UserError(f"{where}: task id {task_id!r} is also on line {seen_ids[task_id]}.")
        seen_ids[task_id] = seen_tasks[start_url, goal] = lineno
        site = row.get("site", "").strip() or site_of(start_url)
        extra = {"reference_answer": row["reference_answer"]} if "reference_answer" in row else {}
        tasks.append(
            LiveTaskInfo(
                id=task_id,
                goal=goal,
                start_url=start_url,
                site=site,
                category=row.get("category", "").strip() or site,
                extra=extra,
            )
        )
    if not tasks:
        raise UserError(f"{path}: the task pool holds no task.")
    return tasks
