"""The Online-Mind2Web judge-input layout: write any rmsweb run in it, read any agent's.

One folder per task, named by its task id:

    <task_id>/result.json                    task_id, task, final_result_response,
                                             action_history, thoughts
    <task_id>/trajectory/<N>_full_screenshot.png   one per step, N = 0, 1, ..., and the
                                             page after the last action

This is what the authors' evaluator (src/run.py, "v1" results) reads, so rmsweb's runs
can be judged by their scripts, and runs of other agents in this layout can be judged
by rmsweb (`read_trajectory`). The newer "online-mind2web-v2" result.json (a list of
{action, thought, screenshot} steps, `agent_final_answer`) is read too. As in the
reference reader, screenshots of a v1 run are ordered by the first number in their
file name, and the final answer is not part of the action history.

Exports score what rmsweb scores. The authors' script (OSU-NLP-Group/Online-Mind2Web
src/run.py at ccdeb0d6327c1bb48ae15f35afa2dfedb21bb60e, `parallel_eval`) judges every
folder directly under the run and divides the successes by the number of folders. So
`export_run` writes exactly one top-level folder per unit rmsweb's eval metric counts,
a (task, seed) (live suites run each task once, at seed 0: one folder per task):
1. every episode has its folder, environment errors too: no actions, no answer, no
   screenshots and "rmsweb_error" in result.json; rmsweb counts them as failures, and a
   judge shown nothing to judge does too (leaving them out would flatter the run);
2. the scored episode is attempt 0 (the eval stage runs only that; in a collect run the
   later attempts were conditioned on reflections); the other attempts are kept beside
   it, inside its folder as <task_id>/attempts/a<k>/ in the same layout, where the
   authors' script does not look (it reads only result.json and trajectory/);
3. the screenshots are N+1 for N actions (the runner stores the last page;
   rmsweb.judge.episode).
A run with several seeds per task gets folders <task_id>__s<seed>: one per unit, so the
authors' success rate (pooled over folders) equals rmsweb's (mean over tasks of the
per-task rate) when every task has the same seeds, as in an eval run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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


ATTEMPTS = "attempts"
ERROR_KEY = "rmsweb_error"  # in result.json of an episode that ended in an environment error


@dataclass(frozen=True)
class Export:
    """What `export_run` wrote."""

    folders: list[Path]  # one per scored (task, seed), directly under the output folder
    attempts: int = 0  # further attempts kept under <folder>/attempts/
    env_errors: int = 0  # scored episodes that ended in an environment error


def write_trajectory(
    inp: JudgeInput, out_dir: Path, folder: str | None = None, error: str | None = None
) -> Path:
    """Write one trajectory as <out_dir>/<folder or task_id>/; returns that folder.
    `error`: the environment error that ended the episode (stored as rmsweb_error)."""
    target = Path(out_dir) / (folder or inp.task_id)
    shots = target / TRAJECTORY
    shots.mkdir(parents=True, exist_ok=True)  # also when empty: the authors' script lists it
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
    if error is not None:
        result[ERROR_KEY] = error
    # indent 4, no final newline: as the authors' example result.json is written
    (target / RESULT).write_text(json.dumps(result, indent=4, ensure_ascii=False))
    return target


def export_run(
    records: Iterable[EpisodeRecord], out_dir: Path, pngs: Mapping[str, bytes] | None = None
) -> Export:
    """Write every episode of a run: one folder per (task, seed), its attempt 0 scored
    and the other attempts beside it (see the module docstring)."""
    units: dict[tuple[str, int], list[EpisodeRecord]] = {}
    for r in records:
        units.setdefault((r.episode.task_id, r.episode.seed), []).append(r)
    seeds: dict[str, set[int]] = {}
    for task, seed in units:
        seeds.setdefault(task, set()).add(seed)
    by_seed = any(len(s) > 1 for s in seeds.values())
    names: dict[str, tuple[str, int]] = {}
    folders, attempts, env_errors = [], 0, 0
    for (task, seed), recs in units.items():
        name = _safe(f"{task}__s{seed}" if by_seed else task)
        if name in names:
            raise UserError(
                f"tasks {names[name][0]!r} and {task!r} would share the folder {name!r}; "
                "export them to separate folders."
            )
        names[name] = (task, seed)
        scored, *others = sorted(recs, key=lambda r: r.episode.attempt)
        folder = _write(scored, Path(out_dir), name, pngs)
        env_errors += scored.episode.error is not None
        for r in others:
            _write(r, folder / ATTEMPTS, f"a{r.episode.attempt}", pngs)
            attempts += 1
        folders.append(folder)
    return Export(folders, attempts, env_errors)


def _write(rec: EpisodeRecord, out_dir: Path, name: str, pngs: Mapping[str, bytes] | None) -> Path:
    return write_trajectory(from_record(rec, pngs), out_dir, name, error=rec.episode.error)


def export_run_dir(run_dir: Path, out_dir: Path) -> Export:
    """`rmsweb export-om2w`: every episode of a stored run (its folder of tables) in the
    layout under `out_dir`, environment errors included (see the module docstring)."""
    from rmsweb.store.layout import is_run_dir
    from rmsweb.store.reader import read_records

    if not is_run_dir(Path(run_dir)):
        raise UserError(f"{run_dir}: not a run folder (no episodes/ ... tables in it).")
    records = read_records(Path(run_dir))
    if not records:
        raise UserError(f"{run_dir}: no episodes to export.")
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
