"""The task pool format (rmsweb/suites/task_pool.py) and validate's overlap check
(rmsweb/suites/overlap.py): an evaluation task the training suite holds is refused at
its line with exit 2; shared websites are a warning naming how many tasks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rmsweb.cli import app
from rmsweb.errors import UserError
from rmsweb.spec import load_experiment
from rmsweb.suites import rehearsal_site as site
from rmsweb.suites.benchmarks import build_live_suite
from rmsweb.suites.live import split_of
from rmsweb.suites.overlap import eval_overlaps
from rmsweb.suites.task_pool import EXAMPLE_POOL, load_task_pool, pool_task_id

ROOT = Path(__file__).resolve().parents[2]


def _write(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_example_pool_loads_with_defaults() -> None:
    tasks = load_task_pool(EXAMPLE_POOL)
    assert len(tasks) == 40 and len({t.id for t in tasks}) == 40
    first = tasks[0]
    assert first.id == pool_task_id(first.start_url, first.goal)
    assert first.site == first.category == "en.wikipedia.org"
    assert first.extra == {"reference_answer": "1889"}


def test_pool_splits_by_task_id_hash(tmp_path: Path) -> None:
    spec = load_experiment(ROOT / "experiments" / "paper-8b.yaml").suite
    suite = build_live_suite(spec)
    for task_id in suite.task_ids():
        assert suite.split(task_id) == split_of(task_id, spec.test_fraction, spec.val_fraction)
    assert suite.task_ids("train")  # most of the pool trains


@pytest.mark.parametrize(
    ("rows", "words"),
    [
        ([{"goal": "g"}], ":1: missing or empty start_url"),
        ([{"start_url": "ftp://x.org/", "goal": "g"}], ":1: start_url 'ftp://x.org/' is not"),
        ([{"start_url": "https://a.org/", "goal": "g", "answer": "x"}], ":1: unknown field"),
        ([{"start_url": "https://a.org/", "goal": 3}], ":1: goal must be a string"),
        (
            [{"start_url": "https://a.org/", "goal": "g"}, {"start_url": "https://a.org/", "goal": "g"}],
            ":2: the same start_url and goal as line 1",
        ),
        (
            [{"id": "t", "start_url": "https://a.org/", "goal": "g"}, {"id": "t", "start_url": "https://b.org/", "goal": "g"}],
            ":2: task id 't' is also on line 1",
        ),
        ([], "holds no task"),
    ],
)  # fmt: skip
def test_bad_pool_lines_are_user_errors_at_the_line(
    tmp_path: Path, rows: list[object], words: str
) -> None:
    path = _write(tmp_path / "pool.jsonl", rows)
    with pytest.raises(UserError, match=r"pool\.jsonl") as exc:
        load_task_pool(path)
    assert words in str(exc.value)


def test_rehearsal_pools_are_generated_and_disjoint() -> None:
    ids: set[str] = set()
    for name in site.POOLS:
        assert site.pool_file(name).read_text(encoding="utf-8") == site.pool_jsonl(name)
        pool = {t.id for t in load_task_pool(site.pool_file(name))}
        assert not pool & ids
        ids |= pool


def _project(tmp_path: Path) -> Path:
    """A spec that trains on a pool and evaluates on a pool, in a scratch project."""
    (tmp_path / "experiments").mkdir()
    shutil.copy(ROOT / "experiments" / "paper-8b-rehearsal.yaml", tmp_path / "experiments")
    shutil.copy(ROOT / "experiments" / "paper-8b.yaml", tmp_path / "experiments")
    return tmp_path


def _pools(tmp_path: Path, train: list[dict], evaluated: list[dict]) -> list[str]:
    a = _write(tmp_path / "train.jsonl", train)
    b = _write(tmp_path / "eval.jsonl", evaluated)
    return [f"suite.tasks_file={a}", f"eval.suites.0.suite.tasks_file={b}"]


TRAIN = [
    {"id": "t1", "start_url": "https://a.org/", "goal": "Find the opening hours."},
    {"id": "t2", "start_url": "https://b.org/", "goal": "Find the phone number."},
]


@pytest.mark.parametrize(
    ("evaluated", "words"),
    [
        ([{"id": "t1", "start_url": "https://c.org/", "goal": "Other."}], "'t1' (same id)"),
        (
            [{"id": "e1", "start_url": "https://a.org", "goal": "find the  opening hours."}],
            "'e1' (same start URL and goal as 't1')",
        ),
    ],
)
def test_validate_refuses_an_evaluation_task_the_pool_holds(
    tmp_path: Path, evaluated: list[dict], words: str
) -> None:
    root = _project(tmp_path)
    overrides = _pools(tmp_path, TRAIN, evaluated)
    args = ["validate", str(root / "experiments" / "paper-8b-rehearsal.yaml")]
    for o in overrides:
        args += ["-o", o]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    line = next(x for x in result.output.splitlines() if "eval.suites.0.suite:" in x)
    assert "paper-8b-rehearsal.yaml:1" in line  # the file and line of eval.suites.0.suite
    assert "1 of the 1 tasks of evaluation suite 'shopa'" in line and words in line


def test_validate_warns_when_sites_are_shared(tmp_path: Path) -> None:
    root = _project(tmp_path)
    evaluated = [
        {"id": "e1", "start_url": "https://www.a.org/x", "goal": "Something else."},
        {"id": "e2", "start_url": "https://d.org/", "goal": "Another."},
    ]
    args = ["validate", str(root / "experiments" / "paper-8b-rehearsal.yaml")]
    for o in _pools(tmp_path, TRAIN, evaluated):
        args += ["-o", o]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "shares 1 website(s)" in result.output
    assert "1 of its 2 tasks start on them (a.org), where 1 training tasks start" in result.output


def test_split_all_evaluates_every_task_and_test_only_its_split() -> None:
    spec = load_experiment(ROOT / "experiments" / "paper-8b-rehearsal.yaml")
    assert not eval_overlaps(spec)[0]
    ev = spec.eval.suites[0]
    suite = build_live_suite(ev.suite)
    assert suite.task_ids("test") != suite.task_ids()  # its own hash split leaves train
    suite.hold_out_all()
    assert suite.name == "task_pool" and suite.task_ids("test") == suite.task_ids()


def test_training_on_webvoyager_and_evaluating_on_it_is_refused_at_the_line() -> None:
    """tests/specs/overlap/overlap.yaml: paper-8b trained on WebVoyager again."""
    spec = ROOT / "tests" / "specs" / "overlap" / "overlap.yaml"
    result = CliRunner().invoke(app, ["validate", str(spec)])
    assert result.exit_code == 2, result.output
    assert "overlap.yaml:11:7 eval.suites.0.suite: 595 of the 595 tasks" in result.output
    assert "overlap.yaml:15:7 eval.suites.1.suite: evaluation suite 'om2w' shares 9" in (
        result.output
    )


def test_the_example_pool_shares_no_task_and_no_site_with_the_benchmarks() -> None:
    """rmsweb/suites/data/README.md's claim about the pool paper-8b and paper-32b train on."""
    for name in ("paper-8b", "paper-32b"):
        spec = load_experiment(ROOT / "experiments" / f"{name}.yaml")
        assert eval_overlaps(spec) == ([], [])
