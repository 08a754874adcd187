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


def test_one_compile_settles_when_an_experiment_starts_sharing_a_stage(project: Path) -> None:
    # An arm with its own SFT (another learning rate) owns sft-s0_<arm>; set back to the
    # default job's value, its SFT becomes the default job's. One compile must then be
    # enough: the shared stage's sharers may not depend on who owned what before.
    runner = CliRunner()
    arm = project / "experiments" / "zz-a-long-arm-name.yaml"
    arm.write_text(
        "extends: miniwob-cpu.yaml\nname: zz-a-long-arm-name\nsft: {learning_rate: 5.0e-4}\n"
    )
    assert runner.invoke(app, ["compile", "--root", str(project)]).exit_code == 0
    assert "sft-s0_zz-a-long-arm-name" in (project / "dvc.yaml").read_text()
    arm.write_text("extends: miniwob-cpu.yaml\nname: zz-a-long-arm-name\n")
    assert runner.invoke(app, ["compile", "--root", str(project)]).exit_code == 0
    result = runner.invoke(app, ["compile", "--check", "--root", str(project)])
    assert result.exit_code == 0, result.output


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
    assert "sft-s0_miniwob-cpu" in proc.stdout.split()


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
    assert "rl-s0_miniwob-cpu-grpo" in dvc
    assert "sft-s0_miniwob-cpu-grpo" not in dvc
    assert dvc["rl-s0_miniwob-cpu-grpo"]["deps"][-1] == "runs/sft/miniwob-cpu/s0"


def test_stage_wiring(repo_root: Path) -> None:
    dvc = yaml.safe_load((repo_root / "dvc.yaml").read_text())["stages"]
    sft = dvc["sft-s0_miniwob-cpu"]
    assert sft["cmd"].startswith("rmsweb sft --exp miniwob-cpu --seed 0")
    assert "--in collect=runs/collect/miniwob-cpu" in sft["cmd"]
    # One hop from dvc.yaml to the code: the stage's module is named and is the first dep.
    assert sft["deps"][0] == "rmsweb/train/sft/stage.py"
    assert "code: rmsweb/train/sft/stage.py" in sft["desc"]
    # The stage's metrics and plot files are plain git-tracked outs, outside DVC's default
    # views (those read the report stages' summaries: dvc.yaml's top-level metrics).
    assert sft["outs"] == [
        "runs/sft/miniwob-cpu/s0",
        {"metrics/sft/miniwob-cpu-s0.json": {"cache": False}},
        {"metrics/sft/miniwob-cpu-s0.loss.csv": {"cache": False}},
        {"metrics/sft/miniwob-cpu-s0.dvclive": {"cache": False}},  # DVCLive's live curves
    ]
    assert "metrics" not in sft and "plots" not in sft
    assert not any(p.endswith((".seed", ".seeds")) for p in sft["params"])  # --seed, not params
    assert "miniwob-cpu.sft.learning_rate" in sft["params"]
    assert not any(p.startswith("miniwob-cpu.rl") for p in sft["params"])
    report = dvc["report_miniwob-cpu"]
    # The default job is the whole recipe: its report reads the RL run and its eval.
    assert "runs/rl/miniwob-cpu/s0" in report["deps"]
    assert "runs/eval/miniwob-cpu/rl/s0" in report["deps"]
    assert "runs/mine/miniwob-cpu/s0" in report["deps"]


def test_dvc_default_views_read_the_summaries_and_figures_only(repo_root: Path) -> None:
    dvc = yaml.safe_load(compile_project(repo_root)["dvc.yaml"])
    assert dvc["metrics"] == ["metrics/summary"] and dvc["plots"][0] == "metrics/figures"
    # Besides the figures, only curves (x and y named), each inside a stage's output.
    curves = {next(iter(p)): next(iter(p.values())) for p in dvc["plots"][1:]}
    assert curves["metrics/sft/miniwob-cpu-s0.dvclive/plots/metrics"] == {"x": "step"}
    assert curves["metrics/rl/miniwob-cpu-s0.dvclive/plots/metrics"] == {"x": "step"}
    assert curves["metrics/evalckpt/miniwob-cpu-paper-rl-s0.curve.csv"] == {
        "x": "step",
        "y": "success",
    }
    outs = {next(iter(o)) if isinstance(o, dict) else o for s in dvc["stages"].values()
            for o in s["outs"]}  # fmt: skip
    for path in curves:
        assert any(path == o or path.startswith(o + "/") for o in outs), path
    assert not any("metrics" in s or "plots" in s for s in dvc["stages"].values())
    report = dvc["stages"]["report_miniwob-cpu"]
    # The report reads what the stages wrote beside their outputs: wall times, the SFT
    # loss curve; and writes the experiment's summary and figures there.
    assert {"metrics/sft/miniwob-cpu-s0.json", "metrics/sft/miniwob-cpu-s0.loss.csv"} <= set(
        report["deps"]
    )
    assert report["outs"][-2:] == [
        {"metrics/summary/miniwob-cpu.json": {"cache": False}},
        {"metrics/figures/miniwob-cpu": {"cache": False}},
    ]


def test_sky_files_shape(repo_root: Path) -> None:
    task = yaml.safe_load((repo_root / "sky" / "paper-8b.yaml").read_text())
    assert task["resources"]["accelerators"] == "H100:8"
    assert task["resources"]["any_of"] == [{"use_spot": True}, {"use_spot": False}]
    assert task["resources"]["job_recovery"] == {"max_restarts_on_errors": 2}
    assert set(task["secrets"]) == {"HF_TOKEN", "OPENAI_API_KEY"}  # WANDB_API_KEY: unused
    assert all(v is None for v in task["secrets"].values())  # names only
    # The CPU MiniWoB tasks call no API and download nothing: no secret to ask for.
    for name in ("miniwob-cpu", "smoke", "paper-8b-rehearsal", "sweep-retry-persistence"):
        cpu = yaml.safe_load((repo_root / "sky" / f"{name}.yaml").read_text())
        assert "secrets" not in cpu, name
        assert "--secret" not in (repo_root / "sky" / f"{name}.yaml").read_text(), name
    assert task["file_mounts"]["~/sky_workdir/.git"] == ".git"
    # One bucket per user/project: the prefix is required at launch (--env).
    bucket = task["file_mounts"]["/rmsweb"]
    assert bucket == {"name": "${RMSWEB_BUCKET_PREFIX}-rmsweb-ckpt", "mode": "MOUNT"}
    assert task["envs"]["RMSWEB_BUCKET_PREFIX"] is None
    # Python >= 3.11 whatever the image ships; the spec's DVC remote on every node.
    assert "uv venv --allow-existing --python 3.11" in task["setup"]
    # The CUDA stack pinned (vLLM fixes torch/transformers): the file ships in the workdir.
    assert "uv pip install -c constraints-gpu.txt -e '.[gpu,cloud]'" in task["setup"]
    pins = (Path(__file__).parents[2] / "constraints-gpu.txt").read_text()
    assert all(f"\n{p}==" in pins for p in ("vllm", "torch", "transformers", "peft"))
    assert 'cloud "s3://${RMSWEB_BUCKET_PREFIX}-rmsweb-dvc"' in task["setup"]
    # Stage by stage, each pulled (restored) before and pushed after; vLLM only around
    # the stages that call it: the teacher in collect (the judge, o4-mini, is hosted;
    # a served judge's server runs around mine and eval too: test_sky_run.py).
    run = task["run"].splitlines()
    body = [ln for ln in run if ln.startswith(("stage ", "serve ", "unserve "))]
    assert [ln.split()[0] + " " + ln.split()[1] for ln in body] == [
        "stage preflight_paper-8b",  # minutes on the task's own GPUs before anything else
        "serve 8001",
        "stage collect_paper-8b",
        "unserve 8001",
        "stage sft-s0_paper-8b",
        "stage mine-s0_paper-8b",
        "stage rl-s0_paper-8b",
        # the three benchmarks (eval.suites), their judges hosted
        *(
            f"stage eval-{b}-{p}-s0_paper-8b"
            for b in ("om2w", "webtailbench", "webvoyager")
            for p in ("rl", "sft")
        ),
        "stage report_paper-8b",
    ]
    assert '  dvc repro --pull --single-item "$1"' in run
    assert '  dvc push --run-cache "$1"' in run
    assert "serve 8001 1800 Qwen/Qwen3-VL-32B-Instruct --tensor-parallel-size 8" in task["run"]
    # Alone first, if you like: sky/paper-8b-preflight.yaml runs only that stage.
    alone = yaml.safe_load((repo_root / "sky" / "paper-8b-preflight.yaml").read_text())
    assert "stage preflight_paper-8b" in alone["run"] and "stage collect" not in alone["run"]
    assert alone["resources"] == task["resources"]
    # SFT waits for it: a failed preflight stops the pipeline before the expensive stages.
    stages = yaml.safe_load((repo_root / "dvc.yaml").read_text())["stages"]
    assert "runs/preflight/paper-8b/PASSED" in stages["sft-s0_paper-8b"]["deps"]
    assert "runs/preflight/paper-32b/PASSED" in stages["sft-s0_paper-32b"]["deps"]
    assert not [n for n in stages if n.startswith("preflight") and "miniwob" in n]
    multi = yaml.safe_load((repo_root / "sky" / "paper-32b.yaml").read_text())
    assert multi["num_nodes"] == 2
    assert "SKYPILOT_NODE_RANK" in multi["run"] and "SKYPILOT_NODE_IPS" in multi["run"]
    assert "rmsweb worker --exp paper-32b" in multi["run"]
    assert multi["envs"]["RMSWEB_RENDEZVOUS_ROOT"] == "/rmsweb/rendezvous"
    assert "SKYPILOT_TASK_ID" not in multi["run"]  # the run id is per attempt (distributed.py)
    cpu = yaml.safe_load((repo_root / "sky" / "smoke.yaml").read_text())
    assert "RMSWEB_DVC_REMOTE:?no DVC remote" in cpu["setup"]  # refuses to start without one


def _sky(sky_python: str, code: str, *args: str, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": str(home), "SKYPILOT_DISABLE_USAGE_COLLECTION": "1"}
    return subprocess.run(
        [sky_python, "-c", code, *args], capture_output=True, text=True, env=env, check=False
    )


@pytest.mark.slow  # needs .venv-sky, which the slow tier builds
def test_sky_files_pass_skypilots_parser(repo_root: Path) -> None:
    sky_python = os.environ.get("RMSWEB_SKY_PYTHON")
    if not sky_python or not Path(sky_python).exists():
        pytest.skip("SkyPilot venv not built (make sky, or make slow, builds .venv-sky)")
    files = sorted(str(p) for p in (repo_root / "sky").glob("*.yaml"))
    # What `sky launch --env RMSWEB_BUCKET_PREFIX=...` does: from_yaml with an env override.
    code = (
        "import sys, sky\n"
        "from sky.utils import yaml_utils\n"
        "for f in sys.argv[1:]:\n"
        "    config = yaml_utils.read_yaml(f)\n"
        "    t = sky.Task.from_yaml_config(config, env_overrides=[('RMSWEB_BUCKET_PREFIX', 'ci')])\n"
        "    print(f, t.num_nodes, *(s.name for s in t.storage_mounts.values()))\n"
    )
    home = repo_root / ".venv-sky" / "home"  # `import sky` writes ~/.sky; keep it local
    proc = _sky(sky_python, code, *files, home=home)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == len(files)
    assert all(line.endswith(" ci-rmsweb-ckpt") for line in lines)  # the prefix reached the bucket
    # Without the prefix SkyPilot refuses the file and names the variable.
    plain = _sky(
        sky_python, "import sys, sky; sky.Task.from_yaml(sys.argv[1])", files[0], home=home
    )
    assert plain.returncode != 0 and "RMSWEB_BUCKET_PREFIX" in plain.stderr


@pytest.mark.slow  # needs .venv-sky, which the slow tier builds
def test_skypilot_parser_rejects_a_broken_file(tmp_path: Path) -> None:
    """The check above can fail: a typo'd key is refused by SkyPilot's parser."""
    sky_python = os.environ.get("RMSWEB_SKY_PYTHON")
    if not sky_python or not Path(sky_python).exists():
        pytest.skip("SkyPilot venv not built (make sky, or make slow, builds .venv-sky)")
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
    # The paper table's plain arm stays on the default job's tasks.
    assert "miniwob-cpu-retry-none" in stages["eval-expert_miniwob-cpu"].sharers
    assert "collect_miniwob-cpu-retry-none" in stages
    # The retry study runs on the steps experiment's multi-step suite: its none arm is
    # that experiment's plain arm, and the blind arm keeps its stage names.
    assert "sft-s0_miniwob-cpu-retry-blind" in stages
    # The model does not depend on the arm's data: every arm starts from the same one
    # (pretrained, as the default job's: one model stage for every seed).
    assert "miniwob-cpu-retry-blind" in stages["model_miniwob-cpu-steps"].sharers
    assert "miniwob-cpu-steps-plain" in stages["pretrain_miniwob-cpu-steps"].sharers
    study = stages["report_miniwob-cpu-retry-study"]
    assert (
        study.upstream["miniwob-cpu-steps-plain.collect"].name == "collect_miniwob-cpu-steps-plain"
    )
    assert (
        study.upstream["miniwob-cpu-retry-blind.eval-sft-s0"].name
        == "eval-sft-s0_miniwob-cpu-retry-blind"
    )
    # The study adds only its report and a teacher eval: every other stage is
    # miniwob-cpu-steps's, and none of the default job's.
    assert "miniwob-cpu-retry-study" in stages["sft-s2_miniwob-cpu-steps"].sharers
    assert "miniwob-cpu-retry-study" not in stages["collect_miniwob-cpu"].sharers
    # The sweeps' points add collect stages only (their metric is the collection's yield).
    for arm in ("retry-adherence-a0", "retry-persistence-p05-blind"):
        assert study.upstream[f"{arm}.collect"].name == f"collect_{arm}"
        assert [s.kind for s in stages.values() if arm in s.sharers] == ["collect"]
    assert not [r for r in study.upstream if "adherence" in r and "-sft" in r]
    sweep = stages["sweep-retry-persistence_miniwob-cpu-retry-study"]
    assert sorted(sweep.upstream) == sorted(
        f"retry-persistence-p{p}-{r}.collect"
        for p in ("0", "05", "1")
        for r in ("reflect", "blind")
    )


def test_report_compare_must_name_an_experiment(project: Path) -> None:
    spec = project / "experiments" / "miniwob-cpu-retry-study.yaml"
    spec.write_text(spec.read_text().replace("miniwob-cpu-steps-plain,", "nope,"))
    result = CliRunner().invoke(app, ["compile", "--root", str(project)])
    assert result.exit_code == 2 and "'nope', which is not an experiment" in result.stderr


def test_training_seeds_give_one_stage_each_and_share_the_rest(tmp_path: Path) -> None:
    from rmsweb.compile.graph import plan_project
    from rmsweb.spec import load_experiment

    spec_file = tmp_path / "three.yaml"
    spec_file.write_text("name: three\nseeds: [0, 1, 2]\n")
    one_file = tmp_path / "one.yaml"
    one_file.write_text("name: one\nseeds: [1]\n")
    stages = {
        s.name: s for s in plan_project([load_experiment(spec_file), load_experiment(one_file)])
    }
    for kind in ("model", "sft", "mine", "rl", "eval-sft", "eval-rl"):
        assert {f"{kind}-s{i}_one" if i == 1 else f"{kind}-s{i}_three" for i in range(3)} <= set(
            stages
        ), kind
    # Seed 1 is the same stage in both experiments (owner: the shorter name).
    assert stages["sft-s1_one"].sharers == ["one", "three"]
    assert stages["sft-s1_one"].out == "runs/sft/one/s1"
    # What does not train is shared across seeds: one collect, one expert eval.
    assert [n for n in stages if n.startswith("collect_")] == ["collect_one"]
    assert "eval-expert_one" in stages and "eval-expert-s0_three" not in stages
    report = stages["report_three"]
    assert {"eval-sft-s0", "eval-sft-s1", "eval-sft-s2", "sft-s2", "eval-expert"} <= set(
        report.upstream
    )


def test_check_covers_the_json_schema(project: Path) -> None:
    runner = CliRunner()
    schema = project / "schemas" / "experiment.schema.json"
    schema.write_text(schema.read_text().replace('"title"', '"titel"', 1))
    stale = runner.invoke(app, ["compile", "--check", "--root", str(project)])
    assert stale.exit_code == 1
    assert "a/schemas/experiment.schema.json" in stale.output
    schema.unlink()
    assert runner.invoke(app, ["compile", "--root", str(project)]).exit_code == 0
    assert schema.is_file()
    assert runner.invoke(app, ["compile", "--check", "--root", str(project)]).exit_code == 0


@pytest.mark.parametrize("command", ["validate", "compile"])
def test_a_folder_without_specs_is_an_error(tmp_path: Path, command: str) -> None:
    (tmp_path / "experiments" / "drafts").mkdir(parents=True)
    (tmp_path / "experiments" / "notes.txt").write_text("not a spec")
    args = (
        ["validate", str(tmp_path / "experiments")]
        if command == "validate"
        else ["compile", "--root", str(tmp_path)]
    )
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "experiments:1:1 <root>: no spec files" in result.stderr


def _copy_default_spec(project: Path, name: str, rl_lr: str | None = None) -> None:
    text = (project / "experiments" / "miniwob-cpu.yaml").read_text()
    assert "\nname: miniwob-cpu\n" in text
    text = text.replace("\nname: miniwob-cpu\n", f"\nname: {name}\n")
    # A copy keeps the stages but not the sweeps: sweep names are unique in the project
    # (README: "Your own experiment").
    assert "\nsweep:\n" in text
    text = text.split("\nsweep:\n")[0] + "\n"
    (project / "experiments" / f"{name}.yaml").write_text(text)


def _stages(project: Path) -> dict[str, dict]:
    return yaml.safe_load((project / "dvc.yaml").read_text())["stages"]


def test_new_specs_never_take_over_existing_stages(project: Path) -> None:
    """Copies of the default spec named to win the shortest-name rule (`a`, `aa`) and
    to lose it (`zz`) leave every existing stage's name, outputs and params as they are."""
    before = _stages(project)
    for name in ("a", "aa", "zz"):
        _copy_default_spec(project, name)
    result = CliRunner().invoke(app, ["compile", "--root", str(project)])
    assert result.exit_code == 0, result.output
    after = _stages(project)
    missing = sorted(set(before) - set(after))
    assert not missing, f"renamed or removed: {missing[:5]}"
    for name, stage in before.items():
        assert after[name]["outs"] == stage["outs"], name
        assert after[name]["cmd"] == stage["cmd"], name
        assert after[name]["params"] == stage["params"], name
    # The copies share everything but their reports, which are their own.
    assert set(after) - set(before) == {"report_a", "report_aa", "report_zz"}
    assert "a" in after["sft-s0_miniwob-cpu"]["desc"].split(";")[0]


def test_without_a_previous_dvc_yaml_the_shortest_name_owns(project: Path) -> None:
    """The control for the test above: the previous names are what keeps the owner."""
    _copy_default_spec(project, "a")
    (project / "dvc.yaml").unlink()
    assert CliRunner().invoke(app, ["compile", "--root", str(project)]).exit_code == 0
    after = _stages(project)
    assert "sft-s0_a" in after and "sft-s0_miniwob-cpu" not in after


def test_an_owner_that_changes_keeps_its_stage_and_the_copy_gets_its_own(
    project: Path,
) -> None:
    _copy_default_spec(project, "a")
    assert CliRunner().invoke(app, ["compile", "--root", str(project)]).exit_code == 0
    spec = project / "experiments" / "miniwob-cpu.yaml"
    text = spec.read_text()
    assert "\n  max_steps: 3000" in text  # sft.max_steps of the default job
    spec.write_text(text.replace("\n  max_steps: 3000", "\n  max_steps: 3100", 1))
    assert CliRunner().invoke(app, ["compile", "--root", str(project)]).exit_code == 0
    after = _stages(project)
    assert after["sft-s0_miniwob-cpu"]["outs"][0] == "runs/sft/miniwob-cpu/s0"
    assert "miniwob-cpu.sft.max_steps" in after["sft-s0_miniwob-cpu"]["params"]
    assert after["sft-s0_a"]["outs"][0] == "runs/sft/a/s0"  # the unchanged copy's own stage
    assert after["collect_miniwob-cpu"]["outs"][0] == "runs/collect/miniwob-cpu"  # still shared


def test_stage_names_reads_a_file_with_conflict_markers(tmp_path: Path) -> None:
    from rmsweb.compile.dvcfile import stage_names

    path = tmp_path / "dvc.yaml"
    path.write_text(
        "stages:\n  a_x:\n    cmd: true\n<<<<<<< HEAD\n  b_x:\n    cmd: true\n=======\n"
        "  c_y:\n    cmd: true\n>>>>>>> other\nplots:\n  d_z:\n    x: 1\n"
    )
    assert stage_names(path) == ["a_x", "b_x", "c_y"]
    assert stage_names(tmp_path / "none.yaml") == []


def test_out_writes_the_generated_files_elsewhere(project: Path, tmp_path: Path) -> None:
    spec = project / "experiments" / "smoke.yaml"
    spec.write_text(spec.read_text().replace("max_steps: 60", "max_steps: 61"))
    before = (project / "params.yaml").read_text()
    elsewhere = tmp_path / "preview"
    result = CliRunner().invoke(app, ["compile", "--root", str(project), "--out", str(elsewhere)])
    assert result.exit_code == 0, result.output
    assert (project / "params.yaml").read_text() == before  # the project is left as it was
    assert "max_steps: 61" in (elsewhere / "params.yaml").read_text()
    assert {"dvc.yaml", "params.yaml", "sky/smoke.yaml"} <= {
        p.relative_to(elsewhere).as_posix() for p in elsewhere.rglob("*") if p.is_file()
    }
    result = CliRunner().invoke(app, ["compile", "--check", "--out", str(elsewhere)])
    assert result.exit_code == 2 and "takes no --out" in result.stderr
