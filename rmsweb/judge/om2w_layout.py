"""The Online-Mind2Web judge-input layout: write any rmsweb run in it, read any agent's.

One folder per task, named by its task id:

    <task_id>/result.json                    task_id, task, final_result_response,
                                             action_history, thoughts
    <task_id>/trajectory/<N>_full_screenshot.png   one per step, N = 0, 1, ...

This is what the authors' evaluator (src/run.py, "v1" results) reads, so rmsweb's runs
can be judged by their scripts, and runs of other agents in this layout can be judged
by rmsweb (`read_trajectory`). The newer "online-mind2web-v2" result.json (a list of
{action, thought, screenshot} steps, `agent_final_answer`) is read too. As in the
reference reader, screenshots of a v1 run are ordered by the first number in their
file name, and the final answer is not part of the action history.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rmsweb.errors import UserError
from rmsweb.judge.episode import JudgeInput, from_record
from rmsweb.store.rows import EpisodeRecord

RESULT = "result.json"
TRAJECTORY = "trajectory"
V2 = "online-mind2web-v2"


def screenshot_name(i: int) -> str:
    return f"{i}_full_screenshot.png"


def write_trajectory(inp: JudgeInput, out_dir: Path, folder: str | None = None) -> Path:
    """Write one trajectory as <out_dir>/<folder or task_id>/; returns that folder."""
    target = Path(out_dir) / (folder or inp.task_id)
    shots = target / TRAJECTORY
    shots.mkdir(parents=True, exist_ok=True)
    for old in shots.glob("*_full_screenshot.png"):
        old.unlink()  # a rewrite must not keep a longer earlier run's tail
    for i, png in enumerate(inp.screenshots):
        (shots / screenshot_name(i)).write_bytes(png)
    result = {
        "task_id": inp.task_id,
        "task": inp.task,
        "final_result_response": inp.answer or "",
        "action_history": inp.actions,
        "thoughts": inp.thoughts,
    }
    # indent 4, no final newline: as the authors' example result.json is written
    (target / RESULT).write_text(json.dumps(result, indent=4, ensure_ascii=False))
    return target


def export_run(
    records: Iterable[EpisodeRecord], out_dir: Path, pngs: Mapping[str, bytes] | None = None
) -> list[Path]:
    """Write every episode of a run. A task met more than once (seeds, attempts) gets
    folders <task_id>__s<seed>_a<attempt>, since one folder is one judged run."""
    records = list(records)
    seen: dict[str, int] = {}
    for r in records:
        seen[r.episode.task_id] = seen.get(r.episode.task_id, 0) + 1
    out = []
    for r in records:
        ep = r.episode
        name = ep.task_id if seen[ep.task_id] == 1 else f"{ep.task_id}__s{ep.seed}_a{ep.attempt}"
        out.append(write_trajectory(from_record(r, pngs), out_dir, _safe(name)))
    return out


def export_run_dir(run_dir: Path, out_dir: Path) -> list[Path]:
    """`rmsweb export-om2w`: every episode of a stored run (its folder of tables) in the
    layout under `out_dir`; episodes that ended in an environment error have no
    trajectory and are left out."""
    from rmsweb.store.layout import is_run_dir
    from rmsweb.store.reader import read_records

    if not is_run_dir(Path(run_dir)):
        raise UserError(f"{run_dir}: not a run folder (no episodes/ ... tables in it).")
    records = [r for r in read_records(Path(run_dir)) if r.episode.error is None and r.steps]
    if not records:
        raise UserError(f"{run_dir}: no finished episodes to export.")
    return export_run(records, Path(out_dir))


def read_trajectory(folder: Path) -> JudgeInput:
    """One run in the layout (v1 or v2 result.json) as the judge's input."""
    folder = Path(folder)
    path = folder / RESULT
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UserError(f"{path}: not JSON ({exc}).") from None
    if not isinstance(result, dict) or not isinstance(result.get("task"), str):
        raise UserError(f"{path}: expected an object with a `task` string.")
    task_id = str(result.get("task_id") or folder.name)
    if result.get("schema_version") == V2:
        steps = _list(result, "action_history", path)
        actions = [str(s["action"]) for s in steps[:-1]]  # the last is the final answer
        thoughts = [str(s.get("thought") or "") for s in steps[:-1]]
        files = [folder / TRAJECTORY / s["screenshot"] for s in steps if s.get("screenshot")]
        answer = result.get("agent_final_answer")
    else:
        actions = [str(a) for a in _list(result, "action_history", path)]
        thoughts = [str(t or "") for t in _list(result, "thoughts", path)]
        files = _numbered_files(folder / TRAJECTORY)
        answer = result.get("final_result_response")
    try:
        screenshots = [f.read_bytes() for f in files]
    except OSError as exc:
        raise UserError(f"{folder}: cannot read a screenshot: {exc}") from None
    return JudgeInput(
        episode_id=f"import/{folder.name}",
        task_id=task_id,
        task=result["task"],
        answer=answer if isinstance(answer, str) and answer else None,
        actions=actions,
        thoughts=thoughts,
        screenshots=screenshots,
    )


def read_run(root: Path) -> list[JudgeInput]:
    """Every task folder (one holding result.json) below `root`, in name order; `root`
    itself when it is one."""
    if (Path(root) / RESULT).is_file():
        return [read_trajectory(Path(root))]
    folders = sorted(p.parent for p in Path(root).glob(f"*/{RESULT}"))
    if not folders:
        raise UserError(f"{root}: no <task_id>/{RESULT} folders (Online-Mind2Web layout).")
    return [read_trajectory(f) for f in folders]


def _list(result: dict[str, Any], key: str, path: Path) -> list[Any]:
    value = result.get(key, [])
    if not isinstance(value, list):
        raise UserError(f"{path}: `{key}` must be a list.")
    return value


def _numbered_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    files = [f for f in folder.iterdir() if f.is_file() and re.search(r"\d+", f.name)]
    return sorted(files, key=lambda f: int(re.findall(r"\d+", f.name)[0]))


def _safe(name: str) -> str:
    """A folder name from a task id (ids may hold "/" or spaces on other benchmarks)."""
    return re.sub(r"[^\w.\-]+", "_", name)
