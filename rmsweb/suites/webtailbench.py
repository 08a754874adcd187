"""WebTailBench: 609 live tasks in 11 categories (microsoft/WebTailBench, 2025).

Tasks name no site (`web` is empty in every row): episodes start from `start_url`
(Google, as in stagehand's evals, where this copy of the file comes from). Categories
are the benchmark's segments; the first 8 test single skills, the last 3 multi-step or
cross-site tasks.
"""

from __future__ import annotations

from pathlib import Path

from rmsweb.suites.live import DATA, LiveTaskInfo, read_jsonl, require

NAME = "webtailbench"
TASKS = DATA / "webtailbench" / "WebTailBench_data.jsonl"
DEFAULT_START_URL = "https://www.google.com/"


def load_webtailbench(
    path: str | Path | None = None, *, start_url: str = DEFAULT_START_URL
) -> list[LiveTaskInfo]:
    file = Path(path) if path is not None else TASKS
    tasks = []
    for lineno, row in enumerate(read_jsonl(file), 1):
        require(row, ("id", "category", "ques"), f"{file}:{lineno}")
        tasks.append(
            LiveTaskInfo(
                id=row["id"],
                goal=row["ques"].strip(),  # rows end in "\r"
                start_url=row.get("web") or start_url,
                site="",
                category=row["category"],
            )
        )
    return tasks
