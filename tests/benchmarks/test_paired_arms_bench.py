"""benchmarks/paired_arms.py: the report's paired arithmetic on eval run folders."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_pairs_seed_by_seed_on_the_split_asked(tmp_path: Path, write_eval_run: Any) -> None:
    # Seed 0: A solves 8 of 10 on task a where B solves 4, both 5 of 10 on task b (+0.2);
    # seed 1: A and B solve the same (0.0). Another split is never read.
    a0 = {("a", s): s < 8 for s in range(10)} | {("b", s): s < 5 for s in range(10)}
    b0 = {("a", s): s < 4 for s in range(10)} | {("b", s): s < 5 for s in range(10)}
    runs = {
        "a": [
            write_eval_run(tmp_path / "a" / "s0", a0, "test"),
            write_eval_run(tmp_path / "a" / "s1", b0, "test"),
        ],
        "b": [
            write_eval_run(tmp_path / "b" / "s0", b0, "test"),
            write_eval_run(tmp_path / "b" / "s1", b0, "test"),
        ],
    }
    write_eval_run(tmp_path / "a-val" / "s0", {("a", 0): False}, "val")
    out = tmp_path / "result.json"
    argv = [f"{name}={','.join(map(str, folders))}" for name, folders in runs.items()]
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "paired_arms.py"),
            *argv,
            "--pair",
            "a:b",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    (pair,) = result["pairs"]
    assert (pair["a"], pair["b"], pair["units"]) == ("a", "b", 20)
    assert pair["diff"] == pytest.approx(0.1)  # the units averaged over both seeds
    assert pair["per_seed"] == [[0, pytest.approx(0.2)], [1, 0.0]]
    assert pair["seed_ci_low"] < 0 < 0.2 < pair["seed_ci_high"]  # two seeds: a wide t
    assert pair["per_task"] == {"a": pytest.approx(0.2), "b": 0.0}
    assert result["arms"]["a"]["training_seeds"] == [0, 1]
    assert "| a − b | +10.0 |" in done.stdout


def test_a_folder_without_episodes_is_a_clear_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "paired_arms.py"),
            f"x={tmp_path}",
            f"y={tmp_path}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0 and "has no episodes/ folder" in done.stderr
    assert "Traceback" not in done.stderr
