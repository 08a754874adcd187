"""`rmsweb query`: views over runs/**, run/stage columns, formats, empty tables, read-only."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from rmsweb.cli import app
from rmsweb.store.layout import find_runs
from rmsweb.store.schemas import TABLES
from rmsweb.store.synthetic import make_episode, write_eval_run
from rmsweb.store.views import connect_root, view_sql
from rmsweb.store.writer import ShardWriter


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    write_eval_run(root, "exp", "sft", 0.5, seeds=2)  # 5 tasks x 2 seeds
    write_eval_run(root, "exp", "expert", 1.0, seeds=1)
    return root


def query(runs: Path, *args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, ["query", "--runs", str(runs), *args])
    return res.exit_code, res.stdout, res.stderr


def test_count_and_run_stage_columns(runs: Path) -> None:
    code, out, _ = query(
        runs,
        "select run, stage, count(*) as n from episodes group by all order by 1",
        "--format",
        "csv",
    )
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows == [
        {"run": "eval/exp/expert", "stage": "eval", "n": "5"},
        {"run": "eval/exp/sft", "stage": "eval", "n": "10"},
    ]


def test_formats(runs: Path) -> None:
    sql = "select task_id, count(*) as n from episodes where run = 'eval/exp/sft' group by 1 order by 1 limit 2"
    code, out, _ = query(runs, sql, "--format", "md")
    assert code == 0
    assert out.splitlines()[:4] == [
        "| task_id | n |",
        "|---|---|",
        "| choose-list | 2 |",
        "| click-button | 2 |",
    ]
    code, out, _ = query(runs, sql, "--format", "json")
    assert json.loads(out) == [
        {"task_id": "choose-list", "n": 2},
        {"task_id": "click-button", "n": 2},
    ]
    code, out, _ = query(runs, sql)
    lines = out.splitlines()
    assert lines[0].split() == ["task_id", "n"] and lines[-1] == "(2 rows)"
    code, out, _ = query(runs, "select png from screenshots limit 1", "--format", "json")
    assert json.loads(out)[0]["png"].startswith("iVBOR")  # base64 of a PNG
    code, _, err = query(runs, sql, "--format", "xml")
    assert code == 2 and "--format" in err


def test_tables_no_run_has_are_empty_views_with_columns(runs: Path) -> None:
    code, out, _ = query(runs, "select count(*) as n from rl_groups", "--format", "csv")
    assert code == 0 and out.splitlines() == ["n", "0"]
    con = connect_root(runs)
    cols = [r[0] for r in con.execute("describe mined_states").fetchall()]
    assert cols[:4] == ["run", "stage", "state_id", "episode_id"]
    assert con.execute("select count(*) from steps join rl_groups on true").fetchone() == (0,)


def test_writes_are_refused(runs: Path, tmp_path: Path) -> None:
    target = tmp_path / "x.csv"
    for sql in (
        f"copy (select 1) to '{target}'",
        "create table t as select 1",
        f"attach '{tmp_path / 'db.duckdb'}' as d",
        "select 1; drop view episodes",
    ):
        code, _, err = query(runs, sql)
        assert code == 2 and "only SELECT" in err, sql
    assert not target.exists()
    code, out, _ = query(runs, "describe steps")
    assert code == 0 and "obs_text" in out


def test_sql_errors_are_user_errors(runs: Path) -> None:
    code, _, err = query(runs, "select nope from episodes")
    assert code == 2 and err.startswith("error: query failed") and "nope" in err
    code, _, err = query(runs)
    assert code == 2 and "give a query" in err
    res = CliRunner().invoke(app, ["query", "--runs", str(runs / "missing"), "select 1"])
    assert res.exit_code == 2 and "does not exist" in res.stderr


def test_print_views_runs_in_a_plain_duckdb(runs: Path) -> None:
    code, out, _ = query(runs, "--print-views")
    assert code == 0 and out.count("CREATE OR REPLACE VIEW") == len(TABLES)
    con = duckdb.connect()  # what `duckdb -init views.sql` does
    con.execute(out)
    assert con.execute("select count(*) from episodes").fetchone() == (15,)
    assert con.execute("select count(*) from evals").fetchone() == (0,)


def test_temp_and_hidden_files_are_never_read(runs: Path) -> None:
    sft = runs / "eval" / "exp" / "sft"
    garbage = b"not parquet"
    (sft / "episodes" / ".part-00099.parquet.tmp-1").write_bytes(garbage)  # a writer's temp
    hidden = runs / "eval" / "exp" / ".expert.tmp"  # a stage's temporary output folder
    with ShardWriter(hidden) as sink:
        sink.write(
            make_episode(
                run="eval/exp/expert", task="t", seed=9, policy="e", success=True, n_steps=1
            )
        )
    code, out, err = query(runs, "select count(*) as n from episodes", "--format", "csv")
    assert code == 0, err
    assert out.splitlines() == ["n", "15"]
    assert set(find_runs(runs)) == {"eval/exp/sft", "eval/exp/expert"}


def test_view_sql_escapes_quotes_in_paths(tmp_path: Path) -> None:
    run = tmp_path / "it's" / "runs" / "eval" / "e" / "p"
    with ShardWriter(run) as sink:
        sink.write(
            make_episode(run="eval/e/p", task="t", seed=0, policy="p", success=True, n_steps=1)
        )
    con = duckdb.connect()
    con.execute(view_sql({"eval/e/p": run}))
    assert con.execute("select run, count(*) from steps group by 1").fetchall() == [("eval/e/p", 1)]


def test_pivot_is_a_query_and_pivoted_writes_are_refused(runs: Path, tmp_path: Path) -> None:
    sql = (
        "pivot (select policy, task_id, success::int as ok from episodes) "
        "on policy using sum(ok) group by task_id order by task_id"
    )
    code, out, err = query(runs, sql, "--format", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["task_id"] for r in rows] == sorted(r["task_id"] for r in rows) and len(rows) == 5
    assert {r["expert"] for r in rows} == {"1"}  # the expert solves its one seed per task
    target = tmp_path / "p.csv"
    for bad in (
        f"copy (pivot episodes on policy using count(*)) to '{target}'",
        "create table t as pivot episodes on policy using count(*)",
        "insert into x pivot episodes on policy using count(*)",
    ):
        code, _, err = query(runs, bad)
        assert code == 2 and "only SELECT" in err, bad
    assert not target.exists()


def test_width_option_cuts_long_cells_or_keeps_them_whole(runs: Path) -> None:
    sql = "select obs_text from steps order by episode_id, step limit 1"
    code, out, _ = query(runs, sql)
    line = out.splitlines()[2]
    assert code == 0 and len(line) == 60 and line.endswith("…")
    code, out, _ = query(runs, sql, "--width", "0")
    assert code == 0 and len(out.splitlines()[2]) > 60 and "…" not in out
    code, out, _ = query(runs, sql, "--width", "20")
    assert code == 0 and len(out.splitlines()[2]) == 20
    code, _, err = query(runs, sql, "--width", "-1")
    assert code == 2 and "--width" in err
