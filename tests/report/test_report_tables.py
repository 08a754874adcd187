"""Eval rows and tables: exact roll-ups, env errors apart, README-ready markdown."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmsweb.report.tables import (
    eval_metrics,
    eval_rows,
    eval_rows_for_run,
    eval_table,
    per_task_table,
)
from rmsweb.store.stats import wilson_interval
from rmsweb.store.synthetic import make_episode
from rmsweb.store.views import connect
from rmsweb.store.writer import ShardWriter


def write(
    run: Path, specs: list[tuple[str, int, bool, int, int, str | None]], policy: str = "sft"
) -> None:
    """specs: (task, seed, success, n_steps, parse_errors, env_error)."""
    with ShardWriter(run) as sink:
        for task, seed, ok, n, perr, err in specs:
            rec = make_episode(
                run="eval/e/" + policy,
                task=task,
                seed=seed,
                policy=policy,
                success=ok,
                n_steps=n,
                parse_errors=perr,
                env_error=err,
            )
            sink.write(rec)


@pytest.fixture
def run(tmp_path: Path) -> Path:
    run = tmp_path / "runs" / "eval" / "e" / "sft"
    write(
        run,
        [
            ("a", 0, True, 2, 0, None),
            ("a", 1, False, 4, 1, None),
            ("a", 2, True, 4, 0, None),
            ("b", 0, True, 3, 0, None),
            ("b", 1, False, 5, 2, "browser crashed"),  # env error: not in n
        ],
    )
    return run


def test_suite_and_task_rows(run: Path) -> None:
    rows = eval_rows(connect({"eval/e/sft": run}))
    top, a, b = rows
    assert (top.task_id, a.task_id, b.task_id) == ("*", "a", "b")
    # The crashed episode counts as a failure (as in the eval stage) and is listed apart.
    assert (top.n, top.env_errors) == (5, 1)
    assert (a.success_rate, b.success_rate) == (pytest.approx(2 / 3), 0.5)
    assert top.success_rate == pytest.approx((2 / 3 + 1 / 2) / 2)  # mean over tasks
    assert (top.ci_low, top.ci_high) == pytest.approx(wilson_interval(3, 5))  # pooled counts
    assert top.mean_steps_solved == pytest.approx((2 + 4 + 3) / 3)
    # Parse errors over every stored step: 1 + 2 of 2 + 4 + 4 + 3 + 5 = 18.
    assert top.parse_error_rate == pytest.approx(3 / 18)
    assert (a.n, b.n, a.env_errors, b.env_errors) == (3, 2, 0, 1)
    assert b.mean_steps_solved == 3.0
    assert top.run == "eval/e/sft" and top.policy == "sft" and top.suite == "miniwob"


def test_agrees_with_the_eval_stage_metrics(tmp_path: Path) -> None:
    # The report recomputes eval rows in SQL; they must equal the eval stage's own
    # (rmsweb/evaluate/metrics.py), or the README table and `dvc metrics` disagree.
    from rmsweb.evaluate.metrics import eval_rows as stage_rows
    from rmsweb.store.reader import read_records

    run = tmp_path / "runs" / "eval" / "e" / "sft"
    specs = [("a", s, s % 3 == 0, 2 + s % 4, s % 2, None) for s in range(7)]
    specs += [("b", s, s % 2 == 0, 3, 0, "timeout" if s == 1 else None) for s in range(4)]
    specs += [("c", 0, False, 6, 3, None)]
    write(run, specs)
    with ShardWriter(run) as sink:  # an episode a policy exception ended after one step
        sink.write(
            make_episode(
                run="eval/e/sft",
                task="c",
                seed=1,
                policy="sft",
                success=False,
                n_steps=1,
                policy_error="ValueError: boom (at x.py:1)",
            )
        )
    ours = {r.task_id: r for r in eval_rows_for_run(run, run="eval/e/sft")}
    theirs = {
        r.task_id: r
        for r in stage_rows(read_records(run), "eval/e/sft", "sft", "miniwob", "test", wall_s=0)
    }
    assert set(ours) == set(theirs) == {"*", "a", "b", "c"}
    assert (theirs["*"].env_errors, theirs["*"].policy_errors) == (1, 1)
    for task, want in theirs.items():
        got = ours[task]
        fields = ("n", "success_rate", "ci_low", "ci_high", "parse_error_rate")
        for field in (*fields, "env_errors", "policy_errors"):
            assert getattr(got, field) == pytest.approx(getattr(want, field)), (task, field)
        if want.mean_steps_solved is None:
            assert got.mean_steps_solved is None
        else:
            assert got.mean_steps_solved == pytest.approx(want.mean_steps_solved)


def test_eval_rows_for_a_run_folder_anywhere(tmp_path: Path) -> None:
    out = tmp_path / "stage-out"  # not below runs/: the stage filter must not drop it
    write(out, [("a", 0, True, 2, 0, None), ("a", 1, False, 2, 0, None)])
    rows = eval_rows_for_run(out, run="eval/e/sft")
    assert [(r.task_id, r.n, r.success_rate) for r in rows] == [("*", 2, 0.5), ("a", 2, 0.5)]
    assert rows[0].run == "eval/e/sft"


def test_an_episode_lost_to_env_errors_is_a_failure(tmp_path: Path) -> None:
    run = tmp_path / "r"
    write(run, [("a", 0, False, 1, 0, "timeout")])
    (top, _) = eval_rows_for_run(run)
    assert (top.n, top.success_rate, top.env_errors) == (1, 0.0, 1)
    hi = 100 * wilson_interval(0, 1)[1]
    row = f"| sft | miniwob | test | 1 | 0.0% | [0.0, {hi:.1f}] | — | 0.0% | 1 | 0 |"
    assert row in eval_table([top]).to_markdown()


def test_markdown_table_is_readme_ready(run: Path) -> None:
    rows = eval_rows(connect({"eval/e/sft": run}))
    lo, hi = wilson_interval(3, 5)
    assert eval_table(rows).to_markdown().splitlines() == [
        "| Policy | Suite | Split | n | Success | 95% CI | Steps (solved) | Parse errors "
        "| Env errors | Policy errors |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| sft | miniwob | test | 5 | 58.3% | [{100 * lo:.1f}, {100 * hi:.1f}] | 3.0 | 16.7% "
        "| 1 | 0 |",
    ]
    assert per_task_table(rows).to_markdown().splitlines()[2:] == [
        "| a | 66.7% (3) |",
        "| b | 50.0% (2) |",
    ]


def test_metrics_are_flat_and_keyed_by_policy(run: Path, tmp_path: Path) -> None:
    other = tmp_path / "runs" / "eval" / "e" / "rl"
    write(other, [("a", 0, False, 2, 0, None)], policy="rl")
    rows = eval_rows(connect({"eval/e/sft": run, "eval/e/rl": other}))
    m = eval_metrics(rows)
    assert m["success/sft"] == pytest.approx(7 / 12) and m["success/rl"] == 0.0
    assert m["n/rl"] == 1 and "ci_low/sft" in m and "steps_solved/rl" in m
    assert all(isinstance(v, int | float) or v is None for v in m.values())
    assert per_task_table(rows).headers == ["Task", "rl", "sft"]
