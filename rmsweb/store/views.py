"""DuckDB views of the run tables: one view per table over the committed shards of many runs.

Each view has the table's columns plus `run` ("eval/miniwob-cpu/sft") and
`stage` ("eval") taken from the run's folder, which win over any stored
`run`/`stage` column, so runs join on one naming whatever wrote them.

The views list their shard files explicitly instead of globbing: only
committed, checked shards are read (layout.py), temp files and a stage's
hidden temporary output are never matched, and a corrupt shard is reported
by name before any query runs. Files that appear later are picked up by the
next connect (or the next `--print-views`). A table that no run has still
gets an empty view with the right columns, so queries never fail on it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from rmsweb.store import layout
from rmsweb.store.reader import ShardInfo, shards
from rmsweb.store.schemas import PATH_COLUMNS, TABLES, duckdb_type, schema

if TYPE_CHECKING:
    import duckdb


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _null(name: str, sql_type: str) -> str:
    return f"CAST(NULL AS {sql_type}) AS {_ident(name)}"


def _branch(run: str, table: str, infos: list[ShardInfo]) -> str:
    cols = [f for f in schema(table) if f.name not in PATH_COLUMNS]
    have = set().union(*(i.columns for i in infos))
    select = [f"{_lit(run)} AS run", f"{_lit(layout.stage_of(run))} AS stage"]
    select += [
        _ident(f.name) if f.name in have else _null(f.name, duckdb_type(f.type)) for f in cols
    ]
    # Absolute paths, so the printed views work from any directory (`duckdb -init`).
    files = ", ".join(_lit(os.path.abspath(i.path)) for i in infos)
    # Shards of different schema versions have different columns: align them by name.
    by_name = ", union_by_name = true" if len({i.columns for i in infos}) > 1 else ""
    return f"SELECT {', '.join(select)}\nFROM read_parquet([{files}]{by_name})"


def _empty(table: str) -> str:
    cols = [f for f in schema(table) if f.name not in PATH_COLUMNS]
    select = [_null("run", "VARCHAR"), _null("stage", "VARCHAR")]
    select += [_null(f.name, duckdb_type(f.type)) for f in cols]
    return f"SELECT {', '.join(select)}\nWHERE false"


def view_sql(runs: Mapping[str, Path], *, skip_corrupt: bool = False) -> str:
    """CREATE VIEW statements for every table over the given runs (name -> folder)."""
    # One listing of each run's episodes files first: companions are matched against it.
    episode_names = {
        run: {p.name for p in layout.part_files(Path(folder), "episodes")}
        for run, folder in runs.items()
    }
    statements = []
    for table in TABLES:
        branches = []
        for run, folder in sorted(runs.items()):
            # Skipping must also catch bad data pages, which only a full read finds.
            infos = shards(
                folder,
                table,
                skip_corrupt=skip_corrupt,
                verify_data=skip_corrupt,
                episode_names=episode_names[run],
            )
            if infos:
                branches.append(_branch(run, table, infos))
        body = "\nUNION ALL\n".join(branches) if branches else _empty(table)
        statements.append(f"CREATE OR REPLACE VIEW {table} AS\n{body};")
    return "\n\n".join(statements) + "\n"


def connect(
    runs: Mapping[str, Path], *, skip_corrupt: bool = False, threads: int | None = None
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the views over the given runs."""
    import duckdb

    con = duckdb.connect(":memory:")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    con.execute(view_sql(runs, skip_corrupt=skip_corrupt))
    return con


def connect_root(root: Path, *, skip_corrupt: bool = False) -> duckdb.DuckDBPyConnection:
    """Views over every run below a runs root (`runs/` by default in the CLI)."""
    return connect(layout.find_runs(root), skip_corrupt=skip_corrupt)
