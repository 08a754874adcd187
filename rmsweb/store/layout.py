"""Where the tables of a run live on disk, and which shard files count.

    <run_dir>/<table>/part-<n>.parquet            one writer (the default)
    <run_dir>/<table>/part-<writer>-<n>.parquet   several writers in one run (nodes)
    <run_dir>/<table>/.part-<n>.parquet.tmp-<pid> being written; never read

A shard of whole episodes is the same file name in episodes/, steps/,
screenshots/, reflections/, judgments/ and step_labels/. Its episodes file is renamed
into place last, so it is the commit marker: a companion file whose episodes file is
missing belongs to a shard that was killed mid-commit and does not count (the next
writer on the run deletes it).

Runs are named by their path below the runs root ("eval/miniwob-cpu/sft");
the stage is the first part of that name.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from rmsweb.store.schemas import COMPANION_TABLES, TABLES

PART_RE = re.compile(r"^part-(?:(?P<writer>[A-Za-z0-9_]+)-)?(?P<n>\d+)\.parquet$")
WRITER_ID_RE = re.compile(r"^[A-Za-z0-9_]+$")


def part_name(n: int, writer_id: str | None = None) -> str:
    if writer_id is None:
        return f"part-{n:05d}.parquet"
    return f"part-{writer_id}-{n:05d}.parquet"


def parse_part(name: str) -> tuple[str | None, int] | None:
    """(writer id, number) of a shard file name, or None for anything else (temp files)."""
    m = PART_RE.match(name)
    return (m["writer"], int(m["n"])) if m else None


def temp_path(final: Path) -> Path:
    """The name a shard is written under before its rename (hidden, never globbed)."""
    return final.with_name(f".{final.name}.tmp-{os.getpid()}")


def is_temp_of(name: str, writer_id: str | None) -> bool:
    """Whether `name` is a temp file of a shard this writer id would own."""
    if not name.startswith(".part-") or ".parquet.tmp-" not in name:
        return False
    parsed = parse_part(name[1 : name.index(".tmp-")])
    return parsed is not None and parsed[0] == writer_id


def _part_key(path: Path) -> tuple[str, int]:
    parsed = parse_part(path.name)
    assert parsed is not None
    return (parsed[0] or "", parsed[1])


def part_files(run_dir: Path, table: str) -> list[Path]:
    """Every shard file of a table in name order, committed or not (temp files excluded)."""
    folder = run_dir / table
    if not folder.is_dir():
        return []
    files = [p for p in folder.iterdir() if parse_part(p.name) is not None]
    return sorted(files, key=_part_key)


def committed_parts(run_dir: Path, table: str, episode_names: set[str] | None = None) -> list[Path]:
    """The shard files of a table that readers use (see the module doc for the rule).

    `episode_names`: the episodes files a reader already listed. Companions are
    renamed before their episodes file, so filtering by that earlier listing
    (not by what exists now) never shows steps whose episodes the reader missed.
    The episodes table itself keeps to the same listing: a shard committed after
    it would otherwise show episodes whose steps the reader has already left out.
    """
    files = part_files(run_dir, table)
    if table == "episodes":
        if episode_names is not None:
            files = [p for p in files if p.name in episode_names]
    elif table in COMPANION_TABLES and files:
        if episode_names is None:
            episode_names = {p.name for p in part_files(run_dir, "episodes")}
        files = [p for p in files if p.name in episode_names]
    return files


def is_run_dir(path: Path) -> bool:
    return any(part_files(path, table) for table in TABLES)


def find_runs(root: Path, max_depth: int = 4) -> dict[str, Path]:
    """Run name -> folder for every folder under `root` that holds tables.

    Hidden folders (a stage's temporary output, `.dvc`) are skipped, and so is
    everything inside a run's table folders. Runs sit at runs/<stage>/<owner>[/<policy>];
    `max_depth` keeps the walk out of deep trees (checkpoints, venvs) below it.
    """
    root = Path(root)
    if is_run_dir(root):
        return {run_name(root): root}
    found: dict[str, Path] = {}
    for dirpath, dirnames, _ in os.walk(root):
        here = Path(dirpath)
        depth = len(here.relative_to(root).parts)
        keep = depth < max_depth
        dirnames[:] = sorted(
            d for d in dirnames if keep and not d.startswith(".") and d not in TABLES
        )
        if here != root and is_run_dir(here):
            found[here.relative_to(root).as_posix()] = here
    return found


def run_name(path: Path) -> str:
    """A run's name from its folder: the part after the last `runs/`, else the folder name."""
    parts = Path(os.path.abspath(path)).parts
    head = parts[:-1]
    if "runs" in head:
        i = len(head) - 1 - head[::-1].index("runs")
        return "/".join(parts[i + 1 :])
    return parts[-1]


def stage_of(run: str) -> str:
    return run.split("/", 1)[0]
