"""Online-Mind2Web: 300 live tasks (Xue et al., 2025), with difficulty levels.

Levels come from the human reference length: easy <= 5 steps, medium 6-10, hard >= 11;
the file states each task's level, and the loader checks it against that rule. The
category reports group by is the level.
"""

from __future__ import annotations

import json
from pathlib import Path

from rmsweb.errors import UserError
from rmsweb.suites.live import DATA, LiveTaskInfo, require

NAME = "online_mind2web"
TASKS = DATA / "online_mind2web" / "Online_Mind2Web_06042025.json"
LEVELS = ("easy", "medium", "hard")


def level_of(reference_length: int) -> str:
    """The published rule: easy <= 5 reference steps, medium 6-10, hard >= 11."""
    return "easy" if reference_length <= 5 else "medium" if reference_length <= 10 else "hard"


def load_online_mind2web(path: str | Path | None = None) -> list[LiveTaskInfo]:
    file = Path(path) if path is not None else TASKS
    try:
        rows = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read Online-Mind2Web task file {file}: {exc}") from None
    if not isinstance(rows, list):
        raise UserError(f"{file}: expected a JSON list of tasks.")
    tasks = []
    for i, row in enumerate(rows):
        where = f"{file}: task {i}"
        require(row, ("task_id", "confirmed_task", "website", "reference_length", "level"), where)
        length = int(row["reference_length"])
        if row["level"] != level_of(length):
            raise UserError(
                f"{where}: level {row['level']!r} does not match reference_length {length} "
                f"({level_of(length)} by the published rule)."
            )
        tasks.append(
            LiveTaskInfo(
                id=row["task_id"],
                goal=row["confirmed_task"].strip(),
                start_url=row["website"],
                site=row["website"],
                category=row["level"],
                reference_length=length,
            )
        )
    return tasks
