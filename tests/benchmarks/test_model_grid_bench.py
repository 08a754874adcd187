"""benchmarks/model_grid.py: one row per capacity sweep, from the files its stages wrote."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("model_grid", ROOT / "benchmarks/model_grid.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def _capacity(low: str, high: str) -> dict:
    task = {"expert": 1.0, "gap": 0.5, "closed": 0.3, "share": 0.6, "verdict": "data-limited"}
    return {
        "groups": {
            "all": {
                "low": {"point": low, "budget": 50},
                "high": {"point": high, "budget": 200},
                "tasks": {
                    "a": task | {"sft_low": 0.2, "sft_high": 0.6},
                    "b": task | {"sft_low": 0.4, "sft_high": 0.5},
                },
                "pooled": {
                    "data_limited_share": 0.75,
                    "closed_share": 0.6,
                    "capacity_limited": ["b"],
                },
            }
        }
    }


def test_rows_read_the_sweep_the_shared_pretraining_and_reach(tmp_path: Path) -> None:
    grid = _module()
    _write(tmp_path / "metrics/sweep/wide.capacity.json", _capacity("wide-b50", "wide-b200"))
    # the point's pretraining is a stage shared with another experiment, named after it
    _write(
        tmp_path / "metrics/pretrain/other.json",
        {"accuracy_after_mean": 0.33, "accuracy_after": {"copy": 0.54, "form": 0.12}},
    )
    _write(
        tmp_path / "benchmarks/results/val_reach_wide-b50-t0.5.json",
        {"pooled": {"reach_val": 0.03, "reach_val_states": 968}},
    )
    _write(
        tmp_path / "benchmarks/results/val_reach_wide-b50-t1.0.json",
        {"pooled": {"reach_val": 0.05, "reach_val_first": 0.138, "reach_val_first_states": 232}},
    )
    dvc_yaml = {
        "stages": {
            "pretrain_other": {
                "desc": "pretrain for other, wide-b50, wide-b200; code: x.py",
                "cmd": "rmsweb pretrain --exp other --metrics metrics/pretrain/other.json",
            }
        }
    }
    files = grid.pretrain_metrics_files(dvc_yaml)
    assert files["wide-b50"] == "metrics/pretrain/other.json"
    params = {
        "wide-b50": {
            "model": {
                "hidden_size": 128,
                "num_layers": 2,
                "copy_head": True,
                "pretrain": {"steps": 9, "skills": ["copy", "form"]},
            }
        }
    }
    row = grid.grid_row(tmp_path, params, files, "wide")
    assert row["missing"] == []
    assert (row["hidden_size"], row["pretrain_steps"], row["pretrain_exact"]) == (128, 9, 0.33)
    assert row["copy_head"] is True
    assert (row["pretrain_skills"], row["pretrain_copy"]) == (["copy", "form"], 0.54)
    assert (row["sft_low"], row["sft_high"], row["data_limited_share"]) == (0.3, 0.55, 0.75)
    assert row["closed_share"] == 0.6
    assert (row["reach_val_t0.5"], row["reach_val_t0.5_states"]) == (0.03, 968)
    assert row["reach_val_first_t0.5"] is None  # that file has no first-failure split
    assert (row["reach_val_first_t1.0"], row["reach_val_first_t1.0_states"]) == (0.138, 232)
    shown = grid.render([row]).splitlines()[1].split()
    # a copy head, 2 skills, copy 0.54
    assert shown[:8] == ["wide", "128", "2", "yes", "9", "2", "0.33", "0.54"]
    assert shown[-3:] == ["3.0%", "5.0%", "13.8%"]  # reach at 0.5, at 1.0, first failures at 1.0


def test_a_sweep_without_its_files_says_what_is_missing(tmp_path: Path) -> None:
    grid = _module()
    row = grid.grid_row(tmp_path, {}, {}, "never-run")
    assert row["missing"] == ["metrics/sweep/never-run.capacity.json"]
    assert "missing: metrics/sweep/never-run.capacity.json" in grid.render([row])
    _write(tmp_path / "metrics/sweep/ran.capacity.json", _capacity("ran-b50", "ran-b200"))
    params = {"ran-b50": {"model": {"hidden_size": 64, "pretrain": {"steps": 5}}}}
    row = grid.grid_row(tmp_path, params, {}, "ran")
    assert row["missing"] == ["metrics/pretrain/ran-b50.json"] and "pretrain_exact" not in row
    assert row["copy_head"] is False  # a spec without the field has none


def test_a_stopping_bar_shows_the_steps_trained_not_the_cap(tmp_path: Path) -> None:
    grid = _module()
    _write(tmp_path / "metrics/sweep/bar.capacity.json", _capacity("bar-b50", "bar-b200"))
    _write(
        tmp_path / "metrics/pretrain/bar-b50.json",
        {"accuracy_after": {"copy": 0.6}, "steps_trained": 1750},
    )
    until = {"accuracy": {"copy": 0.5}, "check_every": 250}
    params = {"bar-b50": {"model": {"pretrain": {"steps": 5000, "until": until}}}}
    row = grid.grid_row(tmp_path, params, {}, "bar")
    assert (row["pretrain_steps"], row["pretrain_until"]) == (1750, {"copy": 0.5})
