"""benchmarks/study_time.py and rmsweb/pipeline_time.py: a target's cold time from the
stages' recorded walls, scheduled as `rmsweb repro` schedules them."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "study_time.py"


def _module() -> Any:
    spec = importlib.util.spec_from_file_location("study_time", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stage(deps: list[str], out: str, metrics: str) -> dict:
    return {"cmd": "true", "deps": deps, "outs": [out], "metrics": [{metrics: {"cache": False}}]}


def _project(root: Path, walls: dict[str, float | None]) -> None:
    """collect -> sft-s0, sft-s1 -> mine-s0, mine-s1 -> report, all of experiment x;
    each stage's metrics JSON holds its wall, or no `wall_s` where the wall is None."""
    stages = {
        "collect_x": _stage([], "runs/collect/x", "metrics/collect/x.json"),
        "report_x": _stage(
            ["runs/mine/x/s0", "runs/mine/x/s1"], "runs/report/x", "metrics/summary/x.json"
        ),
    }
    for s in (0, 1):
        stages[f"sft-s{s}_x"] = _stage(
            ["runs/collect/x"], f"runs/sft/x/s{s}", f"metrics/sft/x-s{s}.json"
        )
        stages[f"mine-s{s}_x"] = _stage(
            [f"runs/sft/x/s{s}"], f"runs/mine/x/s{s}", f"metrics/mine/x-s{s}.json"
        )
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}), encoding="utf-8")
    for name, stage in stages.items():
        path = root / next(iter(stage["metrics"][0]))
        path.parent.mkdir(parents=True, exist_ok=True)
        wall = walls[name]
        path.write_text(json.dumps({} if wall is None else {"wall_s": wall}), encoding="utf-8")


def test_schedules_recorded_walls_as_repro_would(tmp_path: Path) -> None:
    walls = {
        "collect_x": 10.0,
        "sft-s0_x": 100.0,
        "sft-s1_x": 60.0,
        "mine-s0_x": 50.0,
        "mine-s1_x": 30.0,
        "report_x": 1.0,
    }
    _project(tmp_path, walls)
    result = _module().study_time("report_x", tmp_path, [1, 2, 3])
    assert result["measured"] == 6 and result["borrowed"] == 0
    assert result["serial_s"] == 251.0
    assert result["wall_s"]["1"] == 251.0  # one at a time: the sum
    # Two at a time: collect 0-10; both SFTs 10-110 and 10-70; mine-s1 70-100;
    # mine-s0 110-160; report 160-161. A third slot has nothing to run.
    assert result["wall_s"]["2"] == 161.0
    assert result["wall_s"]["3"] == 161.0
    assert result["critical_path_s"] == 161.0
    assert result["per_kind"]["sft"] == {"stages": 2, "serial_s": 160.0}
    # What-if: every mine at half its wall. Serial 251 - 40; two at a time: mine-s1
    # 70-85, mine-s0 110-135, report 135-136.
    halved = _module().study_time("report_x", tmp_path, [2], {"mine": 0.5})
    assert halved["serial_s"] == 211.0 and halved["wall_s"]["2"] == 136.0
    assert halved["scale"] == {"mine": 0.5}


def test_a_stage_not_run_borrows_its_kinds_median(tmp_path: Path) -> None:
    walls = {
        "collect_x": 10.0,
        "sft-s0_x": 100.0,
        "sft-s1_x": None,  # not run yet: borrows sft-s0's wall
        "mine-s0_x": 50.0,
        "mine-s1_x": None,
        "report_x": None,  # no report ever ran: counted as 0, and named
    }
    _project(tmp_path, walls)
    result = _module().study_time("report_x", tmp_path, [1])
    detail = result["stages_detail"]
    assert detail["sft-s1_x"] == {"wall_s": 100.0, "from": "borrowed:x"}
    assert detail["mine-s1_x"] == {"wall_s": 50.0, "from": "borrowed:x"}
    assert result["unknown"] == ["report_x"]
    assert result["serial_s"] == 310.0


def test_nearer_experiments_drop_one_trailing_part_at_a_time() -> None:
    from rmsweb import pipeline_time as module

    assert module.nearer_experiments("miniwob-cpu-budget-grpo-b200") == [
        "miniwob-cpu-budget-grpo-b200",
        "miniwob-cpu-budget-grpo",
        "miniwob-cpu-budget",
        "miniwob-cpu",
        "miniwob",
    ]
    assert module.stage_kind("eval-rl-s2_miniwob-cpu-budget-b25") == (
        "eval-rl",
        "miniwob-cpu-budget-b25",
    )


def test_cli_writes_the_estimate_and_refuses_an_unknown_target(tmp_path: Path) -> None:
    walls = dict.fromkeys(
        ["collect_x", "sft-s0_x", "sft-s1_x", "mine-s0_x", "mine-s1_x", "report_x"], 3600.0
    )
    _project(tmp_path, walls)
    out = tmp_path / "estimate.json"
    cmd = [sys.executable, str(SCRIPT), "--root", str(tmp_path), "--budget-h", "4"]
    done = subprocess.run(
        [*cmd, "report_x", "--jobs", "2", "--out", str(out)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "--jobs 2: 4.00 h (1.00x the 4 h budget)" in done.stdout
    assert json.loads(out.read_text())["wall_s"] == {"2": 14400.0}
    scaled = subprocess.run(
        [*cmd, "report_x", "--jobs", "1", "--scale", "sft=0.5", "mine=0"],
        capture_output=True,
        text=True,
    )
    assert "--jobs 1: 3.00 h (0.75x the 4 h budget)" in scaled.stdout, scaled.stdout
    wrong = subprocess.run([*cmd, "report_x", "--scale", "mine"], capture_output=True, text=True)
    assert wrong.returncode == 2 and "expected KIND=FACTOR" in wrong.stderr
    bad = subprocess.run([*cmd, "report_y"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert "unknown stage(s): report_y" in bad.stderr
