"""The compiler: determinism, staleness check, DVC's and SkyPilot's own validators, sharing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from rmsweb.cli import app
from rmsweb.compile import compile_project, diff_generated, load_project


@pytest.fixture
def project(tmp_path: Path, repo_root: Path) -> Path:
    """A scratch copy of the experiments and generated files."""
    shutil.copytree(repo_root / "experiments", tmp_path / "experiments")
    shutil.copytree(repo_root / "schemas", tmp_path / "schemas")
    for rel, text in compile_project(repo_root).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def test_compile_is_deterministic(repo_root: Path) -> None:
    assert compile_project(repo_root) == compile_project(repo_root)


def test_committed_files_are_current(repo_root: Path) -> None:
    assert diff_generated(repo_root, compile_project(repo_root)) == ""


def test_check_exits_1_with_a_diff_when_stale(project: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["compile", "--check", "--root", str(project)]).exit_code == 0
    spec = project / "experiments" / "smoke.yaml"
    spec.write_text(spec.read_text().replace("max_steps: 60", "max_steps: 61"))
    result = runner.invoke(app, ["compile", "--check", "--root", str(project)])
    assert result.exit_code == 1
    assert "-    max_steps: 60" in result.output and "+    max_steps: 61" in result.output
    assert runner.invoke(app, ["compile", "--root", str(project)]).exit_code == 0
    assert runner.invoke(app, ["compile", "--check", "--root", str(project)]).exit_code == 0


def test_removed_experiment_removes_its_sky_file(project: Path) -> None:
    (project / "experiments" / "paper-32b.yaml").unlink()
    runner = CliRunner()
    assert runner.invoke(app, ["compile", "--check", "--root", str(project)]).exit_code == 1
    runner.invoke(app, ["compile", "--root", str(project)])
    assert not (project / "sky" / "paper-32b.yaml").exists()


def test_dvc_yaml_passes_dvcs_schema(repo_root: Path) -> None:
    import voluptuous
    from dvc.schema import COMPILED_MULTI_STAGE_SCHEMA
    from dvc.stage.utils import is_valid_name

    data = yaml.safe_load((repo_root / "dvc.yaml").read_text())
    COMPILED_MULTI_STAGE_SCHEMA(data)
    assert all(is_valid_name(name) for name in data["stages"])
    # ... and the schema does reject a malformed stage, so the check above means something.
    broken = {"stages": {"x": {"cmd": "true", "outz": ["a"]}}}
    with pytest.raises(voluptuous.MultipleInvalid):
        COMPILED_MULTI_STAGE_SCHEMA(broken)


def test_dvc_reads_the_pipeline(repo_root: Path) -> None:
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("dvc")), "stage", "list", "--name-only"],
        cwd=repo_root,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "sft_miniwob-cpu" in proc.stdout.split()


def test_params_keys_exist(repo_root: Path) -> None:
    params = yaml.safe_load((repo_root / "params.yaml").read_text())
    stages = yaml.safe_load((repo_root / "dvc.yaml").read_text())["stages"]
    for stage in stages.values():
        for key in stage["params"]:
            node = params
            for part in key.split("."):
                node = node[int(part)] if isinstance(node, list) else node[part]


def test_ablation_shares_upstream_stages(repo_root: Path) -> None:
    stages = {
        (s.kind, s.variant): s for s in load_project(repo_root).stages if s.owner == "miniwob-cpu"
    }
    for kind in ("collect", "model", "sft", "mine"):
        assert "miniwob-cpu-grpo" in stages[(kind, None)].sharers, kind
    assert "miniwob-cpu-grpo" not in stages[("rl", None)].sharers
    assert "miniwob-cpu-grpo" in stages[("eval", "sft")].sharers
    dvc = yaml.safe_load((repo_root / "dvc.yaml").read_text())["stages"]
    assert "rl_miniwob-cpu-grpo" in dvc
    assert "sft_miniwob-cpu-grpo" not in dvc
    assert dvc["rl_miniwob-cpu-grpo"]["deps"][-1] == "runs/sft/miniwob-cpu"


def test_stage_wiring(repo_root: Path) -> None:
    dvc = yaml.safe_load((repo_root / "dvc.yaml").read_text())["stages"]
    sft = dvc["sft_miniwob-cpu"]
    assert sft["cmd"].startswith("rmsweb sft --exp miniwob-cpu")
    assert "--in collect=runs/collect/miniwob-cpu" in sft["cmd"]
    # One hop from dvc.yaml to the code: the stage's module is named and is the first dep.
    assert sft["deps"][0] == "rmsweb/train/sft/stage.py"
    assert "code: rmsweb/train/sft/stage.py" in sft["desc"]
    assert sft["outs"] == ["runs/sft/miniwob-cpu"]
    assert sft["metrics"] == [{"metrics/sft/miniwob-cpu.json": {"cache": False}}]
    assert "miniwob-cpu.sft.learning_rate" in sft["params"]
    assert not any(p.startswith("miniwob-cpu.rl") for p in sft["params"])
    report = dvc["report_miniwob-cpu"]
    # The default report needs no RL: its evaluated policies are expert, random and sft.
    assert not any(d.startswith("runs/rl/") for d in report["deps"])


def test_sky_files_shape(repo_root: Path) -> None:
    task = yaml.safe_load((repo_root / "sky" / "paper-8b.yaml").read_text())
    assert task["resources"]["accelerators"] == "H100:8"
    assert task["resources"]["any_of"] == [{"use_spot": True}, {"use_spot": False}]
    assert set(task["secrets"]) == {"HF_TOKEN", "OPENAI_API_KEY", "WANDB_API_KEY"}
    assert all(v is None for v in task["secrets"].values())  # names only
    assert task["file_mounts"]["~/sky_workdir/.git"] == ".git"
    assert task["file_mounts"]["/checkpoints"]["mode"] == "MOUNT"
    assert "pip install -q -e '.[gpu]'" in task["setup"] and "dvc pull" in task["setup"]
    assert "dvc repro --pull report_paper-8b" in task["run"] and "dvc push" in task["run"]
    multi = yaml.safe_load((repo_root / "sky" / "paper-32b.yaml").read_text())
    assert multi["num_nodes"] == 2
    assert "SKYPILOT_NODE_RANK" in multi["run"] and "SKYPILOT_NODE_IPS" in multi["run"]
    assert "rmsweb worker --exp paper-32b" in multi["run"]


def test_sky_files_pass_skypilots_parser(repo_root: Path) -> None:
    sky_python = os.environ.get("RMSWEB_SKY_PYTHON")
    if not sky_python or not Path(sky_python).exists():
        pytest.skip("SkyPilot venv not built (make test builds .venv-sky)")
    files = sorted(str(p) for p in (repo_root / "sky").glob("*.yaml"))
    code = (
        "import sys, sky\n"
        "for f in sys.argv[1:]:\n"
        "    t = sky.Task.from_yaml(f)\n"
        "    print(f, t.num_nodes)\n"
    )
    home = repo_root / ".venv-sky" / "home"  # `import sky` writes ~/.sky; keep it local
    env = {**os.environ, "HOME": str(home), "SKYPILOT_DISABLE_USAGE_COLLECTION": "1"}
    proc = subprocess.run(
        [sky_python, "-c", code, *files], capture_output=True, text=True, env=env, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(proc.stdout.splitlines()) == len(files)


def test_skypilot_parser_rejects_a_broken_file(tmp_path: Path) -> None:
    """The check above can fail: a typo'd key is refused by SkyPilot's parser."""
    sky_python = os.environ.get("RMSWEB_SKY_PYTHON")
    if not sky_python or not Path(sky_python).exists():
        pytest.skip("SkyPilot venv not built (make test builds .venv-sky)")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nnumnodes: 2\nrun: echo hi\n")
    env = {**os.environ, "HOME": str(tmp_path), "SKYPILOT_DISABLE_USAGE_COLLECTION": "1"}
    proc = subprocess.run(
        [sky_python, "-c", "import sys, sky; sky.Task.from_yaml(sys.argv[1])", str(bad)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode != 0 and "num_nodes" in proc.stderr


def test_retry_ablations_share_what_does_not_depend_on_collect(repo_root: Path) -> None:
    stages = {s.name: s for s in load_project(repo_root).stages}
    assert "miniwob-cpu-retry-none" in stages["eval-expert_miniwob-cpu"].sharers
    assert "collect_miniwob-cpu-retry-none" in stages
    assert "sft_miniwob-cpu-retry-blind" in stages
    study = stages["report_miniwob-cpu-retry-study"]
    assert study.upstream["miniwob-cpu-retry-none-collect"].name == "collect_miniwob-cpu-retry-none"
    assert (
        study.upstream["miniwob-cpu-retry-blind-eval-sft"].name
        == "eval-sft_miniwob-cpu-retry-blind"
    )
    # The study changes only its report: every other stage is miniwob-cpu's.
    assert "miniwob-cpu-retry-study" in stages["sft_miniwob-cpu"].sharers
    # The adherence sweep adds collect stages only: its evals (the expert, and the teacher,
    # whose eval ignores adherence: no reflections in an eval episode) are shared.
    for arm in ("miniwob-cpu-retry-adherence-0", "miniwob-cpu-retry-adherence-05"):
        assert study.upstream[f"{arm}-collect"].name == f"collect_{arm}"
        assert study.upstream[f"{arm}-eval-teacher"].name == "eval-teacher_miniwob-cpu"
        assert arm in stages["eval-expert_miniwob-cpu"].sharers
    assert not [r for r in study.upstream if "adherence" in r and r.endswith("-sft")]


def test_report_compare_must_name_an_experiment(project: Path) -> None:
    spec = project / "experiments" / "miniwob-cpu-retry-study.yaml"
    spec.write_text(spec.read_text().replace("miniwob-cpu-retry-none,", "nope,"))
    result = CliRunner().invoke(app, ["compile", "--root", str(project)])
    assert result.exit_code == 2 and "'nope', which is not an experiment" in result.stderr
