"""The capacity measure of a budget sweep: per task, the share of the expert − SFT gap
that the highest budget closes over the lowest; pooled, the share of the gap that is
data-limited."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmsweb.report.capacity import capacity, table, task_row
from rmsweb.sweep.results import read_point, summarize


def _summary(tmp_path: Path, budgets: dict[int, dict[str, float]], other: str = "") -> dict:
    points = []
    for budget, per_task in budgets.items():
        f = tmp_path / f"b{budget}{other}.json"
        success = sum(per_task.values()) / len(per_task)
        f.write_text(json.dumps({"success": success, "n": 50, "per_task": per_task}))
        axes = {"budget": f"b{budget}"} | ({"size": other} if other else {})
        points.append(
            read_point(f"cap-b{budget}", axes, {"suite.train.count": budget}, {"s0": f}, "success")
        )
    definition = {
        "metric": "eval.sft.success",
        "split": "val",
        "axes": {"budget": {"suite.train.count": list(budgets)}},
    }
    return json.loads(json.dumps(summarize("cap", "exp", definition, points)))


def test_read_point_keeps_the_per_task_success_averaged_over_seeds(tmp_path: Path) -> None:
    files = {}
    for seed, rate in ((0, 0.4), (1, 0.6)):
        f = tmp_path / f"s{seed}.json"
        f.write_text(json.dumps({"success": rate, "n": 10, "per_task": {"a": rate, "b": 1.0}}))
        files[f"s{seed}"] = f
    r = read_point("p", {}, {}, files, "success")
    assert r.per_task == {"a": pytest.approx(0.5), "b": 1.0}
    # Only the success metric has a per-task breakdown in eval files.
    assert read_point("p", {}, {}, files, "n").per_task == {}


def test_a_task_that_more_data_does_not_fix_is_capacity_limited() -> None:
    assert task_row(1.0, 0.4, 0.9)["verdict"] == "data-limited"  # closes 0.5 of 0.6: 83%
    row = task_row(1.0, 0.3, 0.4)  # closes 0.1 of 0.7
    assert row["share"] == pytest.approx(1 / 7) and row["verdict"] == "capacity-limited"
    assert task_row(1.0, 0.99, 1.0)["verdict"] == "no gap"


def test_pooled_shares_weigh_tasks_by_their_gap(tmp_path: Path) -> None:
    summary = _summary(
        tmp_path,
        {
            25: {"fill": 0.2, "click": 0.6, "solved": 1.0},
            100: {"fill": 0.9, "click": 0.65, "solved": 1.0},
        },
    )
    result = capacity(summary)
    group = result["groups"]["all"]
    assert group["ratio"] == 4 and group["low"]["budget"] == 25
    assert group["tasks"]["fill"]["verdict"] == "data-limited"
    assert group["tasks"]["click"]["verdict"] == "capacity-limited"
    assert group["tasks"]["solved"]["verdict"] == "no gap"
    # gaps 0.8 (data-limited) and 0.4 (capacity-limited): 2/3 of the pooled gap is data
    assert group["pooled"]["data_limited_share"] == pytest.approx(0.8 / 1.2)
    assert group["pooled"]["closed_share"] == pytest.approx(0.75 / 1.2)
    assert group["pooled"]["capacity_limited"] == ["click"]
    assert "| click | 100.0 | 60.0 | 65.0 |" in table(result)


def test_the_expert_s_own_success_sets_the_gap(tmp_path: Path) -> None:
    summary = _summary(tmp_path, {25: {"t": 0.4}, 100: {"t": 0.6}})
    assert capacity(summary)["groups"]["all"]["tasks"]["t"]["verdict"] == "capacity-limited"
    # An expert at 0.8 leaves a gap of 0.4, of which 0.2 closes: half, data-limited.
    row = capacity(summary, {"t": 0.8})["groups"]["all"]["tasks"]["t"]
    assert row["share"] == pytest.approx(0.5) and row["verdict"] == "data-limited"


def test_a_sweep_without_a_budget_axis_is_refused() -> None:
    summary = {"sweep": "lr", "split": "val", "axes": {"lr": {"sft.learning_rate": [1]}}}
    with pytest.raises(ValueError, match=r"suite\.train\.count"):
        capacity(summary)


def test_intervals_say_how_sure_each_verdict_and_the_pooled_share_are(tmp_path: Path) -> None:
    summary = _summary(
        tmp_path,
        {
            25: {"sure": 0.0, "edge": 0.2, "solved": 1.0},
            100: {"sure": 0.95, "edge": 0.62, "solved": 1.0},
        },
    )
    group = capacity(summary)["groups"]["all"]
    tasks, pool = group["tasks"], group["pooled"]
    # 50 episodes over 3 tasks: 17 a task at each budget
    assert group["bootstrap"]["episodes_per_task"] == {"low": 17, "high": 17}
    low, high = tasks["sure"]["share_ci"]
    assert 0.5 < low <= tasks["sure"]["share"] <= high  # closes 95% of its gap: surely data
    low, high = tasks["edge"]["share_ci"]  # closes 52.5%: either side in another run
    assert low < 0.5 < high
    assert tasks["solved"]["share_ci"] is None  # no gap in most draws: no share to bound
    dl_low, dl_high = pool["data_limited_share_ci"]
    assert dl_low < pool["data_limited_share"] <= dl_high
    cl_low, cl_high = pool["closed_share_ci"]
    assert cl_low < pool["closed_share"] < cl_high
    assert "share 95%" in table(capacity(summary))
    # the same draws every time: a committed results file does not change on a rerun
    assert capacity(summary)["groups"]["all"]["pooled"] == pool


def test_without_episode_counts_there_are_no_intervals() -> None:
    summary = {
        "sweep": "cap",
        "split": "val",
        "axes": {"budget": ["suite.train.count"]},
        "points": [
            {
                "point": "a",
                "axes": {"budget": "b25"},
                "overrides": {"suite.train.count": 25},
                "per_task": {"t": 0.2},
            },
            {
                "point": "b",
                "axes": {"budget": "b100"},
                "overrides": {"suite.train.count": 100},
                "per_task": {"t": 0.8},
            },
        ],
    }
    group = capacity(summary)["groups"]["all"]
    assert "bootstrap" not in group and "share_ci" not in group["tasks"]["t"]
    assert "| t | 100.0 | 20.0 | 80.0 | 80.0 | 60.0 | 75.0 | - | data-limited |" in table(
        capacity(summary)
    )
