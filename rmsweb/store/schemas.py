"""One Arrow schema per run table, derived from the typed rows in `rows.py`.

The rows are the contract; the schemas follow them mechanically (field order,
types, `X | None` -> nullable), so a field added to a row appears in its
table without a second edit. What lands on disk is versioned: every shard
carries `rmsweb.schema_version` in its Parquet metadata, and readers refuse
shards written by a newer rmsweb.

Bump SCHEMA_VERSION when a change would mislead an older reader (a renamed or
retyped column, a changed meaning). Adding a nullable or defaulted field does
not need a bump: older shards simply lack the column and read as nulls (or the
row default).
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from typing import TYPE_CHECKING, Any, Union

from rmsweb.store import rows as R

if TYPE_CHECKING:
    import pyarrow as pa

SCHEMA_VERSION = 1
META_VERSION = b"rmsweb.schema_version"
META_TABLE = b"rmsweb.table"

# Table name -> row class (DESIGN.md §4).
ROW_TYPES: dict[str, type] = {
    "episodes": R.EpisodeRow,
    "steps": R.StepRow,
    "screenshots": R.ScreenshotRow,
    "reflections": R.ReflectionRow,
    "step_labels": R.StepLabelRow,  # (added) mining rollouts' labels of visited states
    "mined_states": R.MinedStateRow,
    "rl_groups": R.RLGroupRow,
    "evals": R.EvalRow,
    "judgments": R.JudgmentRow,  # (added) every LLM-judge call on live suites (per episode)
}
TABLES: tuple[str, ...] = tuple(ROW_TYPES)

# Tables written together, one shard of whole episodes at a time, by the
# ShardWriter; the episodes file of a shard is its commit marker.
EPISODE_TABLES: tuple[str, ...] = (
    "episodes",
    "steps",
    "screenshots",
    "reflections",
    "judgments",
    "step_labels",
)
COMPANION_TABLES: tuple[str, ...] = (
    "steps",
    "screenshots",
    "reflections",
    "judgments",
    "step_labels",
)

# Columns a view takes from the run's folder instead of the shard (see views.py).
PATH_COLUMNS: tuple[str, ...] = ("run", "stage")


def _strip_optional(hint: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(hint)) == 2:
            return args[0], True
        raise TypeError(f"unsupported union in a row type: {hint!r}")
    return hint, False


def _arrow_type(hint: Any) -> pa.DataType:
    import pyarrow as pa

    scalars = {
        str: pa.string(),
        int: pa.int64(),
        float: pa.float64(),
        bool: pa.bool_(),
        bytes: pa.binary(),
    }
    if hint in scalars:
        return scalars[hint]
    if typing.get_origin(hint) is list:
        (item,) = typing.get_args(hint)
        return pa.list_(_arrow_type(item))
    if dataclasses.is_dataclass(hint):
        return pa.struct(_fields(hint))
    raise TypeError(f"no Arrow type for row field type {hint!r}")


def _fields(row_type: type) -> list[pa.Field]:
    import pyarrow as pa

    hints = typing.get_type_hints(row_type)
    out = []
    for f in dataclasses.fields(row_type):
        inner, nullable = _strip_optional(hints[f.name])
        out.append(pa.field(f.name, _arrow_type(inner), nullable=nullable))
    return out


_SCHEMAS: dict[str, pa.Schema] = {}


def schema(table: str) -> pa.Schema:
    """The Arrow schema of a table, with the table name and schema version as metadata."""
    import pyarrow as pa

    if table not in ROW_TYPES:
        raise KeyError(f"unknown table {table!r}; tables: {', '.join(TABLES)}")
    if table not in _SCHEMAS:
        _SCHEMAS[table] = pa.schema(
            _fields(ROW_TYPES[table]),
            metadata={META_TABLE: table.encode(), META_VERSION: str(SCHEMA_VERSION).encode()},
        )
    return _SCHEMAS[table]


def duckdb_type(t: pa.DataType) -> str:
    """The DuckDB SQL type of an Arrow type (for typed NULL columns of empty views)."""
    import pyarrow as pa

    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "VARCHAR"
    if pa.types.is_int64(t):
        return "BIGINT"
    if pa.types.is_float64(t):
        return "DOUBLE"
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "BLOB"
    if pa.types.is_list(t):
        return duckdb_type(t.value_type) + "[]"
    if pa.types.is_struct(t):
        inner = ", ".join(
            f'"{t.field(i).name}" {duckdb_type(t.field(i).type)}' for i in range(t.num_fields)
        )
        return f"STRUCT({inner})"
    raise TypeError(f"no DuckDB type for {t}")


# --------------------------------------------------------------------------- rows <-> Arrow


_SURROGATE = re.compile("[\ud800-\udfff]")


def _scrub(value: Any) -> Any:
    # Page text can hold lone UTF-16 surrogates (JavaScript strings allow them);
    # Arrow needs valid UTF-8, so they become U+FFFD instead of failing the shard.
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def rows_to_arrow(table: str, rows: typing.Iterable[Any]) -> pa.Table:
    """Typed rows -> an Arrow table of the table's schema."""
    import pyarrow as pa

    sch = schema(table)
    row_type = ROW_TYPES[table]
    records = []
    for row in rows:
        if not isinstance(row, row_type):
            raise TypeError(f"table {table} takes {row_type.__name__}, got {type(row).__name__}")
        records.append(dataclasses.asdict(row))
    try:
        return pa.Table.from_pylist(records, schema=sch)
    except UnicodeEncodeError:
        return pa.Table.from_pylist(_scrub(records), schema=sch)


def _from_dict(row_type: type, data: dict[str, Any]) -> Any:
    hints = typing.get_type_hints(row_type)
    kwargs = {}
    for f in dataclasses.fields(row_type):
        if f.name not in data:
            continue  # a column an older shard lacks: the row default applies
        value = data[f.name]
        inner, nullable = _strip_optional(hints[f.name])
        if value is None and not nullable:
            continue  # null only because an older shard lacks the column: the default applies
        if value is not None and isinstance(inner, type) and dataclasses.is_dataclass(inner):
            value = _from_dict(inner, value)
        elif value is not None and typing.get_origin(inner) is list:
            (item,) = typing.get_args(inner)
            if isinstance(item, type) and dataclasses.is_dataclass(item):  # list of structs
                value = [_from_dict(item, v) for v in value]
        kwargs[f.name] = value
    return row_type(**kwargs)


def arrow_to_rows(table: str, data: pa.Table) -> list[Any]:
    """An Arrow table (any column subset of the schema that covers required fields) -> rows."""
    row_type = ROW_TYPES[table]
    return [_from_dict(row_type, d) for d in data.to_pylist()]
