"""Append-only, buffered, crash-safe shard writers for a run folder.

- ShardWriter is the runner's EpisodeSink: it buffers whole episodes (with
  their steps, screenshots, reflections, judgments and step labels) and writes them
  as one shard, a file per table with the same name. Each file is written under a
  hidden temp name and renamed; the episodes file goes last and commits the shard (see
  layout.py). A writer killed at any point leaves only temp files and
  uncommitted companions, which readers ignore and the next writer deletes.
- Screenshots are stored once per run, deduplicated by sha256.
- `completed_keys()` is what a rerun skips; `write()` also drops an episode
  whose key is already stored, so each episode is stored exactly once.
  `write_unit()` keeps the episodes of one unit of work (a (task, seed) with
  its retries) in one shard: the runner skips a unit whose attempt 0 is stored,
  so a kill must never leave attempt 0 stored without the attempts after it.
- A full disk raises DiskFullError (a UserError: the CLI prints its message,
  no traceback). The shard being written is not committed and its files are
  removed; free space and rerun, and the rerun stores the rest.
- TableWriter does the same for one table of independent rows (mined_states,
  rl_groups, evals). Its rows are durable once `flush()` returns, so a stage
  that checkpoints (rl) flushes when it saves.

One writer per run folder and writer id; give each node its own `writer_id`.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmsweb.errors import DiskFullError, is_disk_full
from rmsweb.store import layout
from rmsweb.store.rows import EpisodeRecord, ReflectionRow, ScreenshotRow
from rmsweb.store.schemas import COMPANION_TABLES, EPISODE_TABLES, TABLES, rows_to_arrow

if TYPE_CHECKING:
    import pyarrow as pa


def write_parquet_atomic(path: Path, data: pa.Table) -> None:
    """Write a Parquet file under a temp name, fsync it, and rename it into place.

    A full disk raises DiskFullError naming the file; the temp file is removed.
    """
    import pyarrow.parquet as pq

    tmp = layout.temp_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(data, tmp, compression="zstd")
        # Without the fsync a power cut could leave a renamed but empty file.
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and is_disk_full(exc):
            raise DiskFullError(f"disk full while writing {path}") from exc
        raise


def _check_writer_id(writer_id: str | None) -> None:
    if writer_id is not None and not layout.WRITER_ID_RE.match(writer_id):
        raise ValueError(f"writer_id {writer_id!r}: use letters, digits and '_' only")


def _next_number(run_dir: Path, tables: tuple[str, ...], writer_id: str | None) -> int:
    numbers = [
        n
        for table in tables
        for p in layout.part_files(run_dir, table)
        for w, n in [layout.parse_part(p.name) or (None, -1)]
        if w == writer_id
    ]
    return max(numbers, default=-1) + 1


def _remove_own_temps(folder: Path, writer_id: str | None) -> None:
    if folder.is_dir():
        for p in folder.iterdir():
            if layout.is_temp_of(p.name, writer_id):
                p.unlink(missing_ok=True)


class ShardWriter:
    """The Parquet EpisodeSink of one run folder (episodes and their companion tables).

    Flushes a shard when `max_episodes` are buffered, when the buffer holds
    about `max_bytes`, or at the first write `max_seconds` after the oldest
    buffered episode; and on `close()` (also as a context manager).
    """

    def __init__(
        self,
        run_dir: Path,
        *,
        max_episodes: int = 1000,
        max_bytes: int = 64 * 2**20,
        max_seconds: float = 60.0,
        writer_id: str | None = None,
    ) -> None:
        _check_writer_id(writer_id)
        self.run_dir = Path(run_dir)
        self.max_episodes = max_episodes
        self.max_bytes = max_bytes
        self.max_seconds = max_seconds
        self.writer_id = writer_id
        self._lock = threading.Lock()
        self._in_unit = False  # inside write_unit: no flush until the unit is buffered
        self._recover()
        from rmsweb.store.reader import read_column

        self._committed: set[str] = set(read_column(self.run_dir, "episodes", "episode_id"))
        self._stored_shots: set[str] | None = None  # loaded at the first screenshot
        self._next = _next_number(self.run_dir, EPISODE_TABLES, writer_id)
        self._reset_buffer()

    # ------------------------------------------------------------------ sink API

    def completed_keys(self) -> set[str]:
        """Episode ids stored in this run (and buffered for the next shard)."""
        with self._lock:
            return self._committed | self._keys

    def write(self, record: EpisodeRecord) -> None:
        """Buffer one finished episode; an episode already stored is dropped."""
        key = record.episode.episode_id
        for row in (*record.steps, *record.reflections, *record.judgments, *record.labels):
            if row.episode_id != key:
                raise ValueError(
                    f"record {key!r} holds a {type(row).__name__} of episode {row.episode_id!r}"
                )
        with self._lock:
            if key in self._committed or key in self._keys:
                return
            self._start_clock()
            self._keys.add(key)
            self._buf["episodes"].append(record.episode)
            self._buf["steps"].extend(record.steps)
            self._buf["reflections"].extend(record.reflections)
            self._buf["judgments"].extend(record.judgments)
            self._buf["step_labels"].extend(record.labels)
            self._bytes += sum(len(s.obs_text) + len(s.output_text) for s in record.steps)
            for shot in record.screenshots:
                self._add_screenshot(shot)
            self._maybe_flush()

    def write_unit(self, records: list[EpisodeRecord]) -> None:
        """Buffer the episodes of one unit of work so they land in the same shard."""
        self._in_unit = True
        try:
            for record in records:
                self.write(record)
        finally:
            self._in_unit = False
        with self._lock:
            self._maybe_flush()

    def write_reflection(self, row: ReflectionRow) -> None:
        """Buffer a reflection written after its episode was stored; it goes in the next shard."""
        with self._lock:
            self._start_clock()
            self._buf["reflections"].append(row)
            self._maybe_flush()

    def write_screenshots(self, shots: list[ScreenshotRow]) -> None:
        """Buffer screenshots that no episode of this run shows (the mine stage's routine
        states name screenshots of the collect run); stored once per sha256 as usual."""
        with self._lock:
            self._start_clock()
            for shot in shots:
                self._add_screenshot(shot)
            self._maybe_flush()

    def flush(self) -> None:
        """Commit the buffered episodes as one shard now (no-op when the buffer is empty)."""
        with self._lock:
            self._flush()

    def close(self) -> None:
        self.flush()

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if isinstance(exc, DiskFullError):
            return  # a flush just failed for want of space; another one now would too
        self.close()

    # ------------------------------------------------------------------ internals

    def _recover(self) -> None:
        """Delete what a killed writer with this id left behind: temps and uncommitted files."""
        for table in EPISODE_TABLES:
            _remove_own_temps(self.run_dir / table, self.writer_id)
        episodes = self.run_dir / "episodes"
        for table in COMPANION_TABLES:
            for p in layout.part_files(self.run_dir, table):
                parsed = layout.parse_part(p.name)
                if parsed and parsed[0] == self.writer_id and not (episodes / p.name).exists():
                    p.unlink(missing_ok=True)

    def _reset_buffer(self) -> None:
        self._buf: dict[str, list[Any]] = {t: [] for t in EPISODE_TABLES}
        self._keys: set[str] = set()
        self._shots: set[str] = set()
        self._bytes = 0
        self._since = time.monotonic()

    def _start_clock(self) -> None:
        if not any(self._buf.values()):
            self._since = time.monotonic()  # max_seconds counts from the oldest buffered row

    def _add_screenshot(self, shot: ScreenshotRow) -> None:
        if self._stored_shots is None:
            from rmsweb.store.reader import read_column

            self._stored_shots = set(read_column(self.run_dir, "screenshots", "sha256"))
        if shot.sha256 in self._stored_shots or shot.sha256 in self._shots:
            return
        self._shots.add(shot.sha256)
        self._buf["screenshots"].append(shot)
        self._bytes += len(shot.png)

    def _maybe_flush(self) -> None:
        if self._in_unit or not any(self._buf.values()):
            return
        if (
            len(self._buf["episodes"]) >= self.max_episodes
            or self._bytes >= self.max_bytes
            or time.monotonic() - self._since >= self.max_seconds
        ):
            self._flush()

    def _disk_full(self, name: str, exc: DiskFullError) -> DiskFullError:
        # The episodes file commits a shard and was not written: remove the companions
        # already renamed into place (readers ignore them), so their space is free again.
        for table in COMPANION_TABLES:
            (self.run_dir / table / name).unlink(missing_ok=True)
        return DiskFullError(
            f"{exc} ({len(self._buf['episodes'])} finished episodes were not stored; "
            f"nothing partial was committed). Free space on that disk (df -h {self.run_dir}) "
            f"and rerun: the {len(self._committed)} episodes already stored are kept and "
            "only the rest run."
        )

    def _flush(self) -> None:
        if not any(self._buf.values()):
            return
        name = layout.part_name(self._next, self.writer_id)
        # Companions first, episodes last: the episodes file commits the shard. Empty
        # companions are not written (fewer small files for DVC and for readers to check);
        # the episodes file is, even when empty, as the shard's commit marker.
        try:
            for table in (*COMPANION_TABLES, "episodes"):
                if table != "episodes" and not self._buf[table]:
                    continue
                data = rows_to_arrow(table, self._buf[table])
                write_parquet_atomic(self.run_dir / table / name, data)
        except DiskFullError as exc:
            raise self._disk_full(name, exc) from exc.__cause__
        self._next += 1
        self._committed |= self._keys
        if self._stored_shots is not None:
            self._stored_shots |= self._shots
        self._reset_buffer()


class TableWriter:
    """Append-only buffered writer of one table of independent rows (not episode tables)."""

    def __init__(
        self,
        run_dir: Path,
        table: str,
        *,
        max_rows: int = 50_000,
        max_seconds: float = 60.0,
        writer_id: str | None = None,
    ) -> None:
        if table not in TABLES:
            raise ValueError(f"unknown table {table!r}; tables: {', '.join(TABLES)}")
        if table in EPISODE_TABLES:
            raise ValueError(
                f"{table} are written with whole episodes by ShardWriter "
                "(reflections: EpisodeRecord.reflections or ShardWriter.write_reflection)"
            )
        _check_writer_id(writer_id)
        self.run_dir = Path(run_dir)
        self.table = table
        self.max_rows = max_rows
        self.max_seconds = max_seconds
        self.writer_id = writer_id
        self._lock = threading.Lock()
        _remove_own_temps(self.run_dir / table, writer_id)
        self._next = _next_number(self.run_dir, (table,), writer_id)
        self._rows: list[Any] = []
        self._since = time.monotonic()

    def write(self, row: Any) -> None:
        self.write_many([row])

    def write_many(self, rows: list[Any]) -> None:
        with self._lock:
            if not self._rows:
                self._since = time.monotonic()
            self._rows.extend(rows)
            if (
                len(self._rows) >= self.max_rows
                or time.monotonic() - self._since >= self.max_seconds
            ):
                self._flush()

    def flush(self) -> None:
        with self._lock:
            self._flush()

    def close(self) -> None:
        self.flush()

    def __enter__(self) -> TableWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _flush(self) -> None:
        if not self._rows:
            return
        data = rows_to_arrow(self.table, self._rows)
        path = self.run_dir / self.table / layout.part_name(self._next, self.writer_id)
        write_parquet_atomic(path, data)
        self._next += 1
        self._rows = []
