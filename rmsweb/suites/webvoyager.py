"""WebVoyager: 643 tasks on 15 live sites (He et al., 2024), and the cleaned 595.

The cleaned file (microsoft/fara, 2025-08-31) drops tasks that became impossible and
refreshes dates; it is the default. Categories are the 15 sites. Reference answers
(golden: one right answer; possible: one acceptable answer of several) ride along in
`extra` for analysis; the judge does not see them (as in the authors' auto-evaluation).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rmsweb.errors import UserError
from rmsweb.suites.live import DATA, LiveTaskInfo, read_jsonl, require

NAME = "webvoyager"
ORIGINAL = DATA / "webvoyager" / "WebVoyager_data.jsonl"
CLEANED = DATA / "webvoyager" / "WebVoyager_data_08312025.jsonl"
REFERENCE_ANSWERS = DATA / "webvoyager" / "reference_answer.json"


def load_webvoyager(path: str | Path | None = None, *, cleaned: bool = True) -> list[LiveTaskInfo]:
    """The tasks of `path` (default: the bundled cleaned or original file)."""
    file = Path(path) if path is not None else (CLEANED if cleaned else ORIGINAL)
    answers = reference_answers()
    tasks = []
    for lineno, row in enumerate(read_jsonl(file), 1):
        require(row, ("id", "ques", "web", "web_name"), f"{file}:{lineno}")
        extra = answers.get(row["id"], {})
        tasks.append(
            LiveTaskInfo(
                id=row["id"],
                goal=row["ques"].strip(),
                start_url=row["web"],
                site=row["web_name"],
                category=row["web_name"],
                extra=extra,
            )
        )
    return tasks


def reference_answers(path: Path = REFERENCE_ANSWERS) -> dict[str, dict[str, Any]]:
    """task id ("Site--N") -> {"reference_answer", "reference_type"} from the authors' file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read WebVoyager reference answers {path}: {exc}") from None
    out = {}
    for site, entry in data.items():
        for ans in entry.get("answers", []):
            out[f"{site}--{ans['id']}"] = {
                "reference_answer": ans["ans"],
                "reference_type": ans["type"],
            }
    return out
