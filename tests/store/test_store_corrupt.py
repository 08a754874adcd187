"""Damaged shards: an error naming the file (exit 2 in the CLI), or skipped with a warning."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from rmsweb.cli import app
from rmsweb.errors import UserError
from rmsweb.store import schemas
from rmsweb.store.reader import CorruptShardError, SchemaVersionError, read_rows, read_table
from rmsweb.store.synthetic import write_eval_run
from rmsweb.store.views import connect


@pytest.fixture
def run(tmp_path: Path) -> Path:
    # 5 tasks x 4 seeds = 20 episodes in shards of 7: parts 0, 1, 2.
    return write_eval_run(tmp_path / "runs", "exp", "sft", 0.5, seeds=4)


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def scramble_middle(path: Path) -> None:
    # Footer intact, data pages broken: only a full decode notices.
    data = bytearray(path.read_bytes())
    for i in range(200, min(len(data) - 600, 1200)):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))


def cli(runs: Path, *args: str):
    return CliRunner().invoke(app, ["query", "--runs", str(runs), *args])


def test_truncated_shard_is_named_by_readers_views_and_cli(run: Path) -> None:
    bad = run / "steps" / "part-00001.parquet"
    truncate(bad)
    with pytest.raises(CorruptShardError, match=str(bad)) as exc:
        read_rows(run, "steps")
    assert isinstance(exc.value, UserError)
    with pytest.raises(CorruptShardError, match=str(bad)):
        connect({"eval/exp/sft": run})
    res = cli(run.parents[2], "select count(*) from steps")
    assert res.exit_code == 2
    assert str(bad) in res.stderr and "--skip-corrupt" in res.stderr
    assert "Traceback" not in res.stderr


def test_skip_corrupt_skips_with_a_warning(run: Path, capsys: pytest.CaptureFixture) -> None:
    bad = run / "episodes" / "part-00002.parquet"
    truncate(bad)
    rows = read_rows(run, "episodes", skip_corrupt=True)
    assert len(rows) == 14  # parts 0 and 1
    assert f"warning: skipping {bad}" in capsys.readouterr().err
    res = cli(
        run.parents[2], "select count(*) as n from episodes", "--skip-corrupt", "--format", "csv"
    )
    assert res.exit_code == 0
    assert res.stdout.splitlines() == ["n", "14"]
    assert str(bad) in res.stderr


def test_damaged_data_pages_are_named_too(run: Path) -> None:
    bad = run / "steps" / "part-00001.parquet"
    scramble_middle(bad)
    pq.read_metadata(bad)  # the footer still reads: this is the hard case
    with pytest.raises(CorruptShardError, match=str(bad)):
        read_table(run, "steps")
    res = cli(run.parents[2], "select sum(length(obs_text)) from steps")
    assert res.exit_code == 2 and str(bad) in res.stderr
    res = cli(
        run.parents[2], "select count(*) as n from episodes", "--skip-corrupt", "--format", "csv"
    )
    assert res.exit_code == 0 and res.stdout.splitlines()[1] == "20"
    assert len(read_table(run, "steps", skip_corrupt=True)) > 0


def test_newer_schema_version_is_refused_naming_the_file(run: Path) -> None:
    path = run / "episodes" / "part-00000.parquet"
    data = pq.read_table(path)
    meta = dict(data.schema.metadata)
    meta[schemas.META_VERSION] = str(schemas.SCHEMA_VERSION + 1).encode()
    pq.write_table(data.replace_schema_metadata(meta), path)
    for skip in (False, True):  # a newer shard is not corrupt: never silently skipped
        with pytest.raises(SchemaVersionError, match=str(path)):
            read_rows(run, "episodes", skip_corrupt=skip)
    res = cli(run.parents[2], "select 1")
    assert res.exit_code == 2 and "newer" in res.stderr and str(path) in res.stderr


def test_foreign_or_retyped_files_are_refused(run: Path) -> None:
    import pyarrow as pa

    path = run / "episodes" / "part-00000.parquet"
    pq.write_table(pa.table({"x": [1]}), path)
    with pytest.raises(CorruptShardError, match="not an rmsweb episodes shard"):
        read_rows(run, "episodes")
    data = pq.read_table(run / "episodes" / "part-00001.parquet")
    i = data.schema.get_field_index("seed")
    retyped = data.set_column(i, "seed", data.column(i).cast(pa.string()))
    pq.write_table(retyped.replace_schema_metadata(data.schema.metadata), path)
    with pytest.raises(CorruptShardError, match="column seed is string"):
        read_rows(run, "episodes")
