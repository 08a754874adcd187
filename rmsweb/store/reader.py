"""Read a run's tables back: committed shards only, checked, conformed to the current schema.

Every shard's footer is checked before use: a truncated or corrupt file, or
one that is not an rmsweb shard of this table, raises CorruptShardError
naming the file (or, with skip_corrupt, is skipped with a warning); a shard
written by a newer rmsweb raises SchemaVersionError naming the file, always.
Shards from an older schema read with the missing columns as nulls.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmsweb.errors import UserError
from rmsweb.store import layout
from rmsweb.store.rows import EpisodeRecord
from rmsweb.store.schemas import META_TABLE, META_VERSION, SCHEMA_VERSION, arrow_to_rows, schema

if TYPE_CHECKING:
    import pyarrow as pa


class CorruptShardError(UserError):
    """A shard file that cannot be read (truncated, corrupt, or not an rmsweb shard)."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(
            f"{path}: {reason}. Delete the file (a rerun of its stage redoes its rows) "
            "or pass --skip-corrupt to read without it."
        )


class SchemaVersionError(UserError):
    """A shard written by a newer rmsweb than this one."""


@dataclass(frozen=True)
class ShardInfo:
    path: Path
    table: str
    version: int
    columns: tuple[str, ...]  # the columns of the current schema this shard has
    num_rows: int


def inspect_shard(path: Path, table: str) -> ShardInfo:
    """Check a shard's footer against the table's schema; raise naming the file if unusable."""
    import pyarrow.parquet as pq

    try:
        meta = pq.read_metadata(path)
        file_schema = meta.schema.to_arrow_schema()
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... for bad footers
        raise CorruptShardError(path, f"corrupt or truncated Parquet shard ({exc})") from None
    kv = meta.metadata or {}
    if kv.get(META_TABLE) != table.encode() or META_VERSION not in kv:
        found = kv.get(META_TABLE, b"no rmsweb metadata").decode(errors="replace")
        raise CorruptShardError(path, f"not an rmsweb {table} shard ({found})")
    try:
        version = int(kv[META_VERSION])
    except ValueError:
        raise CorruptShardError(path, f"unreadable schema version {kv[META_VERSION]!r}") from None
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{path}: written with table schema version {version}, newer than this rmsweb's "
            f"{SCHEMA_VERSION}. Update rmsweb to read it."
        )
    expected = schema(table)
    present = []
    for field in expected:
        i = file_schema.get_field_index(field.name)
        if i < 0:
            continue
        got = file_schema.field(i).type
        if not got.equals(field.type):
            raise CorruptShardError(
                path, f"column {field.name} is {got}, expected {field.type} for {table}"
            )
        present.append(field.name)
    return ShardInfo(path, table, version, tuple(present), meta.num_rows)


def _skip(exc: CorruptShardError) -> None:
    # Printed, not logged: `rmsweb query --skip-corrupt` must show it whatever the logging setup.
    print(f"warning: skipping {exc.path}: {exc.reason}", file=sys.stderr)


def _verify_data(info: ShardInfo) -> None:
    import pyarrow.parquet as pq

    try:
        pq.read_table(info.path)
    except Exception as exc:
        raise CorruptShardError(info.path, f"corrupt Parquet data ({exc})") from None


def shards(
    run_dir: Path,
    table: str,
    *,
    skip_corrupt: bool = False,
    verify_data: bool = False,
    episode_names: set[str] | None = None,
) -> list[ShardInfo]:
    """The checked, committed shards of one table of a run, in name order.

    Footers are always checked; `verify_data` also decodes every page (slow:
    for skipping shards whose footer is intact but whose data is not).
    """
    out = []
    for path in layout.committed_parts(Path(run_dir), table, episode_names):
        try:
            info = inspect_shard(path, table)
            if verify_data:
                _verify_data(info)
            out.append(info)
        except CorruptShardError as exc:
            if not skip_corrupt:
                raise
            _skip(exc)
    return out


def _conform(data: pa.Table, target: pa.Schema) -> pa.Table:
    import pyarrow as pa

    columns = [
        data.column(f.name) if f.name in data.column_names else pa.nulls(len(data), f.type)
        for f in target
    ]
    return pa.Table.from_arrays(columns, schema=target)


def read_table(
    run_dir: Path,
    table: str,
    *,
    columns: list[str] | None = None,
    skip_corrupt: bool = False,
) -> pa.Table:
    """One table of a run as an Arrow table of the current schema (or the given columns)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    full = schema(table)
    target = pa.schema([full.field(c) for c in columns]) if columns else full
    parts = []
    for info in shards(run_dir, table, skip_corrupt=skip_corrupt):
        wanted = [c for c in target.names if c in info.columns]
        try:
            data = pq.read_table(info.path, columns=wanted)
        except Exception as exc:  # a footer can be fine while a data page is not
            err = CorruptShardError(info.path, f"corrupt Parquet data ({exc})")
            if not skip_corrupt:
                raise err from None
            _skip(err)
            continue
        parts.append(_conform(data, target))
    if not parts:
        return target.empty_table()
    return pa.concat_tables(parts)


def read_column(run_dir: Path, table: str, column: str) -> list[Any]:
    """One column of a table (e.g. the episode ids a resumed run skips)."""
    return read_table(run_dir, table, columns=[column]).column(0).to_pylist()


def read_rows(run_dir: Path, table: str, *, skip_corrupt: bool = False) -> list[Any]:
    """A table of a run as its typed rows (EpisodeRow, MinedStateRow, ...)."""
    return arrow_to_rows(table, read_table(run_dir, table, skip_corrupt=skip_corrupt))


def read_records(run_dir: Path, *, skip_corrupt: bool = False) -> list[EpisodeRecord]:
    """Whole episodes of a run (steps in step order, screenshots, reflections, judgments,
    step labels)."""
    episodes = read_rows(run_dir, "episodes", skip_corrupt=skip_corrupt)
    steps = defaultdict(list)
    for s in read_rows(run_dir, "steps", skip_corrupt=skip_corrupt):
        steps[s.episode_id].append(s)
    reflections = defaultdict(list)
    for r in read_rows(run_dir, "reflections", skip_corrupt=skip_corrupt):
        reflections[r.episode_id].append(r)
    judgments = defaultdict(list)
    for j in read_rows(run_dir, "judgments", skip_corrupt=skip_corrupt):
        judgments[j.episode_id].append(j)
    labels = defaultdict(list)
    for lab in read_rows(run_dir, "step_labels", skip_corrupt=skip_corrupt):
        labels[lab.episode_id].append(lab)
    shots = {s.sha256: s for s in read_rows(run_dir, "screenshots", skip_corrupt=skip_corrupt)}
    records = []
    for ep in episodes:
        ep_steps = sorted(steps.get(ep.episode_id, []), key=lambda s: s.step)
        wanted = dict.fromkeys(s.screenshot for s in ep_steps if s.screenshot)
        records.append(
            EpisodeRecord(
                ep,
                ep_steps,
                [shots[h] for h in wanted if h in shots],
                reflections.get(ep.episode_id, []),
                judgments.get(ep.episode_id, []),
                sorted(labels.get(ep.episode_id, []), key=lambda lab: lab.step),
            )
        )
    return records
