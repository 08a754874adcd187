"""The sweep stage's arithmetic: each point's value from its stages' metrics files,
intervals over units and over seeds, the best point and those it cannot be told from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rmsweb.sweep.results import csv_rows, read_point, summarize, table


def _write(tmp_path: Path, name: str, data: dict) -> Path:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


def test_a_rate_gets_a_units_interval_and_seeds_a_t_interval(tmp_path: Path) -> None:
    files = {
        "eval-rl-s0": _write(tmp_path, "s0", {"success": 0.8, "n": 100}),
        "eval-rl-s1": _write(tmp_path, "s1", {"success": 0.6, "n": 100}),
    }
    r = read_point("p", {"lr": "1e-05"}, {"rl.learning_rate": 1e-5}, files, "success")
    assert r.value == pytest.approx(0.7)
    assert r.n == 200
    # Wilson on 140 of 200 pooled episodes.
    assert r.ci_low == pytest.approx(0.6333, abs=1e-3) and r.ci_high == pytest.approx(
        0.7594, abs=1e-3
    )
    # Two seeds: mean +- 12.706 * sd / sqrt(2) = 0.7 +- 1.2706.
    assert r.seed_ci_low == pytest.approx(0.7 - 1.2706, abs=1e-3)
    assert r.missing == []


def test_a_missing_metrics_file_is_named_not_counted(tmp_path: Path) -> None:
    files = {"eval-rl-s0": tmp_path / "absent.json"}
    r = read_point("p", {}, {}, files, "success")
    assert r.value is None and r.missing == ["eval-rl-s0"]


def test_a_number_without_a_denominator_has_no_units_interval(tmp_path: Path) -> None:
    r = read_point("p", {}, {}, {"rl-s0": _write(tmp_path, "rl", {"kl": 0.3})}, "kl")
    assert r.value == 0.3 and r.ci_low is None and r.n is None


def test_best_and_ties_and_the_table(tmp_path: Path) -> None:
    points = []
    for name, hits in (("a", 50), ("b", 90), ("c", 85)):
        f = _write(tmp_path, name, {"success": hits / 100, "n": 100})
        points.append(
            read_point(f"s-{name}", {"x": name}, {"k": name}, {"eval-rl-s0": f}, "success")
        )
    definition = {"metric": "eval.rl.success", "split": "val", "axes": {"x": {"k": []}}}
    summary = summarize("s", "exp", definition, points)
    assert summary["best"] == "s-b"
    assert summary["ties_best"] == ["s-c"]  # 85/100's interval overlaps 90/100's; 50 does not
    text = table(summary)
    assert "| s-b **best** | b | 0.9000 |" in text and "overlaps s-c" in text
    header, rows = csv_rows(summary)
    assert header[:3] == ["point", "x", "value"] and rows[0][:3] == ["s-a", "a", 0.5]
    summary_min = summarize("s", "exp", {**definition, "goal": "min"}, points)
    assert summary_min["best"] == "s-a"


def test_a_stage_s_own_interval_is_the_units_interval(tmp_path: Path) -> None:
    f = _write(
        tmp_path,
        "c",
        {"steps_saved": 0.3, "steps_saved_ci_low": 0.2, "steps_saved_ci_high": 0.38},
    )
    r = read_point("p", {}, {}, {"collect": f}, "steps_saved")
    assert (r.value, r.ci_low, r.ci_high, r.n) == (0.3, 0.2, 0.38, None)


def test_against_pairs_the_point_with_its_baseline_on_shared_units(
    tmp_path: Path, write_eval_run: Any
) -> None:
    from rmsweb.sweep.results import PointResult, pair_with_baseline

    # Task a: the point solves 8 of 10 seeds, the baseline 4 (the same 4 plus 4 more);
    # task b: both solve the same 5. Task-weighted: (0.4 + 0.0) / 2 = +0.2.
    point = {("a", s): s < 8 for s in range(10)} | {("b", s): s < 5 for s in range(10)}
    base = {("a", s): s < 4 for s in range(10)} | {("b", s): s < 5 for s in range(10)}
    base[("c", 0)] = True  # a unit the point did not run: left out
    test_split = {("a", s): False for s in range(10)}  # another split: never read
    runs = {"eval-rl-s0": write_eval_run(tmp_path / "rl", point, "val")}
    baseline = {"eval-sft-s0": write_eval_run(tmp_path / "sft", base, "val")}
    write_eval_run(tmp_path / "rl-test", test_split, "test")
    r = pair_with_baseline(PointResult("p", {}, {}), runs, baseline, "sft", "val")
    assert r.against is not None
    assert r.against["diff"] == pytest.approx(0.2)
    assert r.against["units"] == 20
    assert r.against["per_task"] == {"a": pytest.approx(0.4), "b": 0.0}
    assert 0 < r.against["ci_low"] < 0.2 < r.against["ci_high"]
    assert r.against["seed_ci_low"] is None  # one seed: no interval over seeds
    summary = summarize(
        "s",
        "exp",
        {"metric": "eval.rl.success", "split": "val", "axes": {"x": {}}, "against": "sft"},
        [r],
    )
    assert "− sft (paired)" in table(summary) and "+0.2000" in table(summary)
    header, rows = csv_rows(summary)
    assert rows[0][header.index("minus_sft_diff")] == pytest.approx(0.2)
