"""Property tests: every table's rows survive writer -> Parquet -> reader (and DuckDB) unchanged."""

from __future__ import annotations

import dataclasses
import math
import tempfile
import typing
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmsweb.store import schemas
from rmsweb.store.reader import read_records, read_rows
from rmsweb.store.rows import (
    EpisodeRecord,
    EpisodeRow,
    JudgmentRow,
    ReflectionRow,
    ScreenshotRow,
    StepLabelRow,
    StepRow,
)
from rmsweb.store.views import connect
from rmsweb.store.writer import ShardWriter, TableWriter

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=64)
TEXT = st.text(max_size=30)  # hypothesis' default alphabet excludes lone surrogates


def strategy_for(hint: Any) -> st.SearchStrategy[Any]:
    """A strategy for a row field's type hint, derived the same way the schema is."""
    inner, nullable = schemas._strip_optional(hint)
    base: st.SearchStrategy[Any]
    if inner is str:
        base = TEXT
    elif inner is int:
        base = INT64
    elif inner is float:
        base = FLOATS
    elif inner is bool:
        base = st.booleans()
    elif inner is bytes:
        base = st.binary(max_size=64)
    elif typing.get_origin(inner) is list:
        (item,) = typing.get_args(inner)
        base = st.lists(strategy_for(item), max_size=4)
    elif dataclasses.is_dataclass(inner):
        base = rows_of(inner)
    else:
        raise AssertionError(f"no strategy for {hint!r}")
    return st.one_of(st.none(), base) if nullable else base


def rows_of(row_type: type) -> st.SearchStrategy[Any]:
    hints = typing.get_type_hints(row_type)
    return st.builds(
        row_type, **{f.name: strategy_for(hints[f.name]) for f in dataclasses.fields(row_type)}
    )


def same(a: Any, b: Any) -> bool:
    """Equality with NaN == NaN (dataclass == says nan != nan)."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and all(
            same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a)
        )
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(same, a, b))
    return type(a) is type(b) and a == b


SETTINGS = settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _check_duckdb_count(run_dir: Path, table: str, n: int) -> None:
    con = connect({"x/run": run_dir})
    assert con.execute(f"select count(*) from {table}").fetchone()[0] == n
    names = [r[0] for r in con.execute(f"describe {table}").fetchall()]
    assert names[:2] == ["run", "stage"]
    expected = [f for f in schemas.schema(table).names if f not in schemas.PATH_COLUMNS]
    assert names[2:] == expected


@SETTINGS
@given(rows=st.lists(rows_of(schemas.ROW_TYPES["mined_states"]), max_size=8))
def test_mined_states_round_trip(rows: list) -> None:
    _table_round_trip("mined_states", rows)


@SETTINGS
@given(rows=st.lists(rows_of(schemas.ROW_TYPES["rl_groups"]), max_size=8))
def test_rl_groups_round_trip(rows: list) -> None:
    _table_round_trip("rl_groups", rows)


@SETTINGS
@given(rows=st.lists(rows_of(schemas.ROW_TYPES["evals"]), max_size=8))
def test_evals_round_trip(rows: list) -> None:
    _table_round_trip("evals", rows)


def _table_round_trip(table: str, rows: list) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        with TableWriter(run, table, max_rows=3) as w:  # 3: several shards per example
            w.write_many(rows)
        back = read_rows(run, table)
        assert len(back) == len(rows)
        assert all(map(same, rows, back)), (rows, back)
        _check_duckdb_count(run, table, len(rows))


@st.composite
def episode_records(draw: st.DrawFn) -> list[EpisodeRecord]:
    """Records with distinct episode ids whose child rows point at their episode."""
    episodes = draw(st.lists(rows_of(EpisodeRow), max_size=5, unique_by=lambda e: e.episode_id))
    records = []
    for ep in episodes:
        steps = [
            dataclasses.replace(s, episode_id=ep.episode_id)
            for s in draw(st.lists(rows_of(StepRow), max_size=3))
        ]
        reflections = [
            dataclasses.replace(r, episode_id=ep.episode_id)
            for r in draw(st.lists(rows_of(ReflectionRow), max_size=2))
        ]
        judgments = [
            dataclasses.replace(j, episode_id=ep.episode_id)
            for j in draw(st.lists(rows_of(JudgmentRow), max_size=2))
        ]
        labels = [
            dataclasses.replace(lab, episode_id=ep.episode_id)
            for lab in draw(st.lists(rows_of(StepLabelRow), max_size=2))
        ]
        shots = draw(st.lists(rows_of(ScreenshotRow), max_size=2, unique_by=lambda s: s.sha256))
        records.append(EpisodeRecord(ep, steps, shots, reflections, judgments, labels))
    return records


@SETTINGS
@given(records=episode_records())
def test_episode_tables_round_trip(records: list[EpisodeRecord]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        with ShardWriter(run, max_episodes=2) as sink:
            for rec in records:
                sink.write(rec)
        for table, attr in (
            ("steps", "steps"),
            ("reflections", "reflections"),
            ("judgments", "judgments"),
            ("step_labels", "labels"),
        ):
            want = [row for rec in records for row in getattr(rec, attr)]
            got = read_rows(run, table)
            assert len(got) == len(want) and all(map(same, want, got)), table
            _check_duckdb_count(run, table, len(want))
        got_eps = read_rows(run, "episodes")
        assert all(map(same, [r.episode for r in records], got_eps))
        _check_duckdb_count(run, "episodes", len(records))
        # Screenshots are stored once per sha256 across the whole run.
        first: dict[str, ScreenshotRow] = {}
        for rec in records:
            for shot in rec.screenshots:
                first.setdefault(shot.sha256, shot)
        shots = read_rows(run, "screenshots")
        assert {s.sha256 for s in shots} == set(first) and len(shots) == len(first)
        assert all(same(first[s.sha256], s) for s in shots)
        # Whole records come back with steps sorted by step number.
        back = {r.episode.episode_id: r for r in read_records(run)}
        for rec in records:
            got_steps = back[rec.episode.episode_id].steps
            assert [s.step for s in got_steps] == sorted(s.step for s in rec.steps)
            assert all(map(same, rec.judgments, back[rec.episode.episode_id].judgments))


def test_duckdb_reads_struct_list_and_blob_values(tmp_path: Path) -> None:
    from rmsweb.store.synthetic import make_episode

    rec = make_episode(run="eval/x/p", task="t", seed=1, policy="p", success=True, n_steps=2)
    with ShardWriter(tmp_path) as sink:
        sink.write(rec)
    con = connect({"eval/x/p": tmp_path})
    action = con.execute("select action from steps where step = 1").fetchone()[0]
    assert action == {"type": "click", "target": "3", "text": None, "x": None, "y": None}
    png = con.execute("select png from screenshots limit 1").fetchone()[0]
    assert png.startswith(b"\x89PNG")
