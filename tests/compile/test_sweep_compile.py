"""A sweep compiles into its points' stages (sharing what they do not change, only what
the metric needs) and one sweep stage; adding it renames nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from rmsweb.cli import app
from rmsweb.compile import compile_project, write_generated

SWEEP = """
sweep:
  my-lr:
    split: val
    metric: eval.rl.success
    base: {seeds: [0]}
    axes:
      lr: {rl.learning_rate: [1.0e-5, 2.0e-5]}
"""


@pytest.fixture
def project(tmp_path: Path, repo_root: Path) -> Path:
    shutil.copytree(repo_root / "experiments", tmp_path / "experiments")
    shutil.copytree(repo_root / "schemas", tmp_path / "schemas")
    shutil.copy(repo_root / "dvc.yaml", tmp_path / "dvc.yaml")  # the committed owners
    return tmp_path


def _stages(root: Path) -> dict:
    return yaml.safe_load((root / "dvc.yaml").read_text())["stages"]


def _add(root: Path, text: str, name: str = "my-exp") -> None:
    spec = f"extends: miniwob-cpu.yaml\nname: {name}\n{text}"
    (root / "experiments" / f"{name}.yaml").write_text(spec)


def test_adding_a_sweep_renames_nothing_and_shares_upstream(project: Path) -> None:
    write_generated(project, compile_project(project))
    before = _stages(project)
    _add(project, SWEEP)
    write_generated(project, compile_project(project))
    after = _stages(project)
    # Every stage keeps its name, command, deps and outs; only its sharers (desc) grow.
    for name, entry in before.items():
        assert name in after, name
        for key in ("cmd", "deps", "outs", "params"):
            assert after[name][key] == entry[key], (name, key)
    new = sorted(set(after) - set(before))
    assert new == [
        "eval-rl-s0_my-lr-lr1e-05",
        "eval-rl-s0_my-lr-lr2e-05",
        "report_my-exp",
        "rl-s0_my-lr-lr1e-05",
        "rl-s0_my-lr-lr2e-05",
        "sweep-my-lr_my-exp",
    ]
    rl = after["rl-s0_my-lr-lr2e-05"]
    # The point trains on the default job's SFT and mined states: shared, not copied.
    assert "--in mine=runs/mine/miniwob-cpu/s0 --in sft=runs/sft/miniwob-cpu/s0" in rl["cmd"]
    assert "my-lr-lr2e-05.rl.learning_rate" in rl["params"]
    params = yaml.safe_load((project / "params.yaml").read_text())
    assert params["my-lr-lr2e-05"]["rl"]["learning_rate"] == 2e-5
    assert params["my-lr-lr2e-05"]["eval"]["policies"][-1]["splits"] == ["val"]
    sweep = after["sweep-my-lr_my-exp"]
    assert sweep["cmd"].startswith("rmsweb sweep report --exp my-exp --sweep my-lr ")
    assert "metrics/eval/my-lr-lr1e-05-rl-s0.json" in sweep["deps"]
    assert [next(iter(o)) for o in sweep["outs"][1:]] == [
        "metrics/sweep/my-lr.json",
        "metrics/sweep/my-lr.csv",
        "metrics/sweep/my-lr.png",
    ]
    # The point evaluates the metric's policy on val only: no test eval, no report.
    assert not [n for n in after if n.endswith("_my-lr-lr1e-05") and n.startswith("report")]
    assert not [n for n in after if "my-lr" in n and "expert" in n]


def test_sweep_names_are_unique_and_points_take_no_experiments_name(project: Path) -> None:
    _add(project, SWEEP, "my-exp")
    _add(project, SWEEP, "my-other")
    result = CliRunner().invoke(app, ["compile", "--root", str(project)])
    assert result.exit_code == 2 and "sweep name 'my-lr' is used by" in result.stderr
    (project / "experiments" / "my-other.yaml").unlink()
    _add(project, "", "my-lr-lr1e-05")
    result = CliRunner().invoke(app, ["compile", "--root", str(project)])
    assert result.exit_code == 2 and "has the name of another experiment" in result.stderr


def test_separate_jobs_write_a_task_per_point_named_by_its_run_key(project: Path) -> None:
    _add(project, SWEEP.replace("split: val", "split: val\n    jobs: separate"))
    files = compile_project(project)
    assert {"sky/sweep-my-lr.yaml", "sky/my-lr-lr1e-05.yaml", "sky/my-lr-lr2e-05.yaml"} <= set(
        files
    )
    task = yaml.safe_load(files["sky/my-lr-lr2e-05.yaml"])
    assert task["name"].startswith("rmsweb-my-lr-lr2e-05-") and len(task["name"]) > 25
    assert "stage rl-s0_my-lr-lr2e-05" in task["run"]
    assert "stage eval-rl-s0_my-lr-lr2e-05" in task["run"]
    assert "sweep-my-lr" not in task["run"] and "lr1e-05" not in task["run"]
    # Another learning rate is another job name (another run key).
    other = yaml.safe_load(files["sky/my-lr-lr1e-05.yaml"])["name"]
    assert other.split("-")[-1] != task["name"].split("-")[-1]
    whole = yaml.safe_load(files["sky/sweep-my-lr.yaml"])["run"]
    assert "stage sweep-my-lr_my-exp" in whole and "stage rl-s0_my-lr-lr1e-05" in whole


def test_against_pairs_each_point_with_the_shared_baseline_eval(project: Path) -> None:
    before = _stages(project)  # the committed dvc.yaml: compile's own output
    paired = SWEEP.replace("metric: eval.rl.success", "metric: eval.rl.success\n    against: sft")
    _add(project, paired)
    write_generated(project, compile_project(project))
    after = _stages(project)
    for name, entry in before.items():  # the field left out while unset: nothing else moves
        assert after[name]["params"] == entry["params"], name
    sweep = after["sweep-my-lr_my-exp"]
    # Both points pair with the one SFT eval on val they share, read once.
    baseline = [d for d in sweep["deps"] if d.startswith("runs/eval/") and "/sft/" in d]
    assert len(baseline) == 1, sweep["deps"]
    for point in ("my-lr-lr1e-05", "my-lr-lr2e-05"):
        assert f"--in {point}.against-eval-sft-s0={baseline[0]}" in sweep["cmd"]
    assert "miniwob-cpu.sweep.my-lr.against" not in sweep["params"]
    assert "my-exp.sweep.my-lr.against" in sweep["params"]
    # The baseline is evaluated on the sweep's split only, as the metric's policy is.
    params = yaml.safe_load((project / "params.yaml").read_text())
    policies = {p["name"]: p for p in params["my-lr-lr1e-05"]["eval"]["policies"]}
    assert policies["sft"]["splits"] == ["val"] and policies["rl"]["splits"] == ["val"]
