"""A spec's grid compiles into one experiment per cell beside the spec (the cell equal to
the spec's own values is the spec), inherited by the arms that extend it, sharing what a
cell does not change; the report takes every arm's cells."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from rmsweb.compile import compile_project, write_generated
from rmsweb.spec import SpecErrors, load_experiment

STUDY = """
extends: miniwob-cpu.yaml
name: bud
seeds: [0]
sft: {demos_per_task: 200}
grid:
  axes:
    budget: {sft.demos_per_task: [30, 200], labels: [b30, b200]}
report:
  compare: [bud-ctl, bud-canary]
  arms:
    - {label: SFT, arm: bud/sft}
    - {label: Full, arm: bud/rl}
    - {label: Ctl, arm: bud-ctl/rl}
    - {label: Canary, arm: bud-canary/rl}
  comparisons:
    - {a: Full, b: SFT}
    - {a: Full, b: Ctl}
    - {a: Canary, b: SFT}
"""
CTL = "extends: bud.yaml\nname: bud-ctl\nrl: {learning_rate: 3.0e-5}\nreport: {compare: []}\n"
CANARY = "extends: bud.yaml\nname: bud-canary\nrl: {beta: 0.1}\ngrid: null\nreport: {compare: []}\n"


@pytest.fixture
def project(tmp_path: Path, repo_root: Path) -> Path:
    shutil.copytree(repo_root / "experiments", tmp_path / "experiments")
    shutil.copytree(repo_root / "schemas", tmp_path / "schemas")
    shutil.copy(repo_root / "dvc.yaml", tmp_path / "dvc.yaml")
    for name, text in (("bud", STUDY), ("bud-ctl", CTL), ("bud-canary", CANARY)):
        (tmp_path / "experiments" / f"{name}.yaml").write_text(text)
    return tmp_path


def test_cells_are_experiments_sharing_the_collection(project: Path) -> None:
    write_generated(project, compile_project(project))
    stages = yaml.safe_load((project / "dvc.yaml").read_text())["stages"]
    names = set(stages)
    # The own cell (200) is the spec itself; the other is an experiment beside it, for
    # the spec and for the arm that inherits the grid, not for the canary (grid: null).
    assert "sft-s0_bud-b30" in names and "eval-rl-s0_bud-b30" in names
    assert "rl-s0_bud-ctl-b30" in names
    assert not [n for n in names if n.endswith("_bud-b200") or "canary-b30" in n]
    assert not [n for n in names if n.startswith("report_") and n.endswith("-b30")]  # no cell's
    # One collection for every budget: demos_per_task is SFT's.
    sft = stages["sft-s0_bud-b30"]["cmd"]
    assert "--in collect=runs/collect/miniwob-cpu " in sft + " "
    params = yaml.safe_load((project / "params.yaml").read_text())
    assert params["bud-b30"]["sft"]["demos_per_task"] == 30
    assert params["bud-ctl-b30"]["rl"]["learning_rate"] == 3e-5
    # The report reads every arm's cells.
    report = stages["report_bud"]["cmd"]
    for role in ("bud-b30.eval-rl-s0", "bud-ctl-b30.eval-rl-s0", "bud-ctl.eval-rl-s0"):
        assert f"--in {role}=" in report, role
    assert "bud-canary.eval-rl-s0" in report and "bud-canary-b30" not in report


def test_a_bad_grid_value_fails_validation_at_the_grid_line(project: Path) -> None:
    path = project / "experiments" / "bud.yaml"
    path.write_text(STUDY.replace("[30, 200]", "[30, 900]"))  # above suite.train.count
    with pytest.raises(SpecErrors) as exc:
        load_experiment(path)
    (err,) = exc.value.errors
    assert err.key == "grid.axes.budget.sft.demos_per_task"
    assert "exceeds the train seeds" in err.message and "(variant bud-b200)" in err.message
    budget_line = STUDY.splitlines().index(
        "    budget: {sft.demos_per_task: [30, 200], labels: [b30, b200]}"
    )
    assert err.pos.line == budget_line + 1  # 1-based


def test_a_grid_may_not_move_the_evals(project: Path) -> None:
    path = project / "experiments" / "bud.yaml"
    path.write_text(STUDY.replace("sft.demos_per_task: [30, 200]", "eval.splits: [[val], [test]]"))
    with pytest.raises(SpecErrors, match=r"a grid cannot set eval\.splits"):
        load_experiment(path)
