"""`rmsweb query`: read-only DuckDB SQL over the tables of every run below a runs root.

    rmsweb query "select policy, avg(success::int) from episodes group by 1"
    rmsweb query --print-views > views.sql && duckdb -init views.sql

Read-only by construction: the database is in memory, and only SELECT-like
statements (SELECT, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN, PIVOT, UNPIVOT) are accepted,
so a query cannot COPY, ATTACH or write into a run folder.

    rmsweb query "pivot (from evals where task_id = '*') on split using first(success_rate)
                  group by policy"
"""

from __future__ import annotations

import base64
import csv
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

from rmsweb.errors import UserError

FORMATS = ("table", "md", "csv", "json")
# Table format only: long observation texts would wrap every row. `--width 0`: no cut.
CELL_WIDTH = 60


def _cell_text(value: Any, limit: int | None) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes | bytearray):
        return f"<{len(value)} bytes>"
    if isinstance(value, float):
        text = f"{value:.6g}"
    else:
        text = str(value)
    text = text.replace("\r", " ").replace("\n", " ")
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def format_table(
    columns: list[str], rows: list[tuple[Any, ...]], width: int | None = CELL_WIDTH
) -> str:
    """Aligned columns; cells longer than `width` characters end in "…" (None: whole)."""
    cells = [[_cell_text(v, width) for v in row] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()
    rule = "  ".join("-" * w for w in widths)
    body = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join([line, rule, *body, f"({len(rows)} row{'s' if len(rows) != 1 else ''})"])


def format_markdown(columns: list[str], rows: list[tuple[Any, ...]]) -> str:
    def esc(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| " + " | ".join(esc(c) for c in columns) + " |"]
    lines.append("|" + "|".join("---" for _ in columns) + "|")
    for row in rows:
        lines.append("| " + " | ".join(esc(_cell_text(v, None)) for v in row) + " |")
    return "\n".join(lines)


def format_csv(columns: list[str], rows: list[tuple[Any, ...]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(
            ["" if v is None else f"<{len(v)} bytes>" if isinstance(v, bytes) else v for v in row]
        )
    return buf.getvalue().rstrip("\n")


def _json_value(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return None
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)  # dates, decimals, UUIDs


def format_json(columns: list[str], rows: list[tuple[Any, ...]]) -> str:
    records = [{c: _json_value(v) for c, v in zip(columns, row, strict=True)} for row in rows]
    return json.dumps(records, indent=1, ensure_ascii=False)


FORMATTERS = {
    "table": format_table,
    "md": format_markdown,
    "csv": format_csv,
    "json": format_json,
}


# Keywords that begin a statement which writes, loads or changes settings. DuckDB parses
# a PIVOT whose columns come from the data as MULTI (it first reads the distinct values),
# and so it parses `COPY (PIVOT ...) TO 'f'` or `CREATE TABLE t AS PIVOT ...`: a MULTI
# statement passes only when it pivots and holds none of these keywords.
WRITING_KEYWORDS = frozenset(
    [
        "alter",
        "attach",
        "call",
        "checkpoint",
        "copy",
        "create",
        "delete",
        "detach",
        "drop",
        "export",
        "import",
        "insert",
        "install",
        "load",
        "merge",
        "pragma",
        "reset",
        "set",
        "truncate",
        "update",
        "use",
        "vacuum",
    ]
)


_WORD = re.compile(r"[A-Za-z_]+")


def _is_read_only_pivot(query: str) -> bool:
    import duckdb

    words = {
        m.group(0).lower()
        for pos, kind in duckdb.tokenize(query)
        if kind == duckdb.token_type.keyword and (m := _WORD.match(query, pos))
    }
    return bool(words & {"pivot", "unpivot"}) and not words & WRITING_KEYWORDS


def check_read_only(sql: str) -> list[str]:
    """Split SQL into statements and refuse anything but SELECT-like ones."""
    import duckdb

    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise UserError(f"SQL does not parse: {exc}") from None
    allowed = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}
    for st in statements:
        if st.type == duckdb.StatementType.MULTI and _is_read_only_pivot(st.query):
            continue
        if st.type not in allowed:
            raise UserError(
                f"only SELECT queries are allowed (read-only), got {st.type.name}: "
                f"{st.query.strip()[:80]}"
            )
    if not statements:
        raise UserError("empty SQL.")
    return [st.query for st in statements]


def find_corrupt_shard(runs: dict[str, Path]) -> None:
    """Decode every shard of the runs; raise CorruptShardError naming the first bad one."""
    from rmsweb.store.reader import shards
    from rmsweb.store.schemas import TABLES

    for folder in runs.values():
        for table in TABLES:
            shards(folder, table, verify_data=True)


def run_query(sql: str, runs: Path, *, skip_corrupt: bool = False) -> list[tuple[list[str], list]]:
    """(columns, rows) of each statement of a read-only query over the runs below `runs`."""
    import duckdb

    from rmsweb.store.layout import find_runs
    from rmsweb.store.views import connect

    statements = check_read_only(sql)
    found = find_runs(runs)
    con = connect(found, skip_corrupt=skip_corrupt)
    results = []
    try:
        for statement in statements:
            cur = con.execute(statement)
            columns = [d[0] for d in cur.description or []]
            results.append((columns, cur.fetchall()))
    except (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException) as exc:
        raise UserError(f"query failed: {exc}") from None
    except duckdb.Error as exc:
        # Footers were checked, so this may be a damaged data page; DuckDB's message
        # does not always say which file, so find it (slow, but only on failure).
        find_corrupt_shard(found)
        raise UserError(f"query failed: {exc}") from None
    finally:
        con.close()
    return results


def main(
    sql: str | None,
    *,
    fmt: str = "table",
    runs: Path = Path("runs"),
    print_views: bool = False,
    skip_corrupt: bool = False,
    width: int = CELL_WIDTH,
) -> None:
    """The `rmsweb query` command."""
    if fmt not in FORMATTERS:
        raise UserError(f"--format {fmt!r}: use one of {', '.join(FORMATS)}.")
    if width < 0:
        raise UserError(f"--width {width}: give a number of characters, or 0 for no limit.")
    runs = Path(runs)
    if not runs.is_dir():
        raise UserError(f"runs folder {runs} does not exist (--runs DIR).")
    if print_views:
        from rmsweb.store.layout import find_runs
        from rmsweb.store.views import view_sql

        sys.stdout.write(view_sql(find_runs(runs), skip_corrupt=skip_corrupt))
        if not sql:
            return
    if not sql:
        raise UserError('give a query, e.g. rmsweb query "select count(*) from episodes".')
    results = run_query(sql, runs, skip_corrupt=skip_corrupt)
    if fmt == "table":
        out = [format_table(columns, rows, width or None) for columns, rows in results]
    else:
        out = [FORMATTERS[fmt](columns, rows) for columns, rows in results]
    sys.stdout.write("\n\n".join(out) + "\n")
