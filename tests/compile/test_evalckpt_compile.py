"""`every_checkpoint` on an rl policy adds one evalckpt stage per training seed it names
(true: every seed), and nothing else moves: the paper study and its canary opt in, the default job and the other
arms do not, and every stage that existed before keeps its name, cmd, deps, params and
outs (only the opted-in reports gain the new inputs)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from rmsweb.cli import app
from rmsweb.compile import compile_project, load_project
from rmsweb.spec import SpecErrors, load_experiment

OPT_IN = ", every_checkpoint: [0, 1, 2]}"
OPTED = ("miniwob-cpu-paper", "miniwob-cpu-paper-canary")
NEW = {f"evalckpt-rl-s{seed}_{exp}" for exp in OPTED for seed in (0, 1, 2)}


@pytest.fixture
def project(tmp_path: Path, repo_root: Path) -> Path:
    """A scratch copy of the experiments and generated files."""
    shutil.copytree(repo_root / "experiments", tmp_path / "experiments")
    shutil.copytree(repo_root / "schemas", tmp_path / "schemas")
    for rel, text in compile_project(repo_root).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def _compile(project: Path) -> dict[str, dict]:
    result = CliRunner().invoke(app, ["compile", "--root", str(project)])
    assert result.exit_code == 0, result.output
    return yaml.safe_load((project / "dvc.yaml").read_text())["stages"]


def _set_opt_in(project: Path, on: bool) -> None:
    for exp in OPTED:
        spec = project / "experiments" / f"{exp}.yaml"
        text = spec.read_text()
        assert (OPT_IN in text) != on, f"{spec} does not opt in as the test expects"
        spec.write_text(
            text.replace("source: rl}", "source: rl" + OPT_IN) if on else text.replace(OPT_IN, "}")
        )


def test_only_the_opted_in_experiments_get_checkpoint_evals(repo_root: Path) -> None:
    stages = load_project(repo_root).stages
    found = {s.name: s for s in stages if s.kind == "evalckpt"}
    assert set(found) == NEW
    for s in found.values():
        rl = s.upstream["rl"]
        assert rl.kind == "rl" and rl.seed == s.seed
        assert s.upstream["sft"] is rl.upstream["sft"] and s.upstream["mine"] is rl.upstream["mine"]
        assert s.out == f"runs/evalckpt/{s.owner}/rl/s{s.seed}"
    report = {s.owner: s for s in stages if s.kind == "report"}
    paper = report["miniwob-cpu-paper"].upstream
    assert {"evalckpt-rl-s0", "miniwob-cpu-paper-canary.evalckpt-rl-s2"} <= set(paper)
    for other in ("miniwob-cpu", "miniwob-cpu-paper-grpo", "smoke"):  # they do not opt in
        assert not any("evalckpt" in role for role in report[other].upstream), other


def test_opting_in_changes_no_existing_stage(project: Path) -> None:
    _set_opt_in(project, on=False)
    before = _compile(project)
    assert not NEW & set(before)  # the control: without the opt-in, no such stage
    _set_opt_in(project, on=True)
    after = _compile(project)
    assert set(after) - set(before) == NEW
    for name, old in before.items():
        new = after[name]
        assert (new["outs"], new["params"]) == (old["outs"], old["params"]), name
        if name in {f"report_{exp}" for exp in OPTED}:
            # The reports gain the new stages as inputs, and nothing else.
            assert set(old["deps"]) < set(new["deps"]), name
            assert set(old["cmd"].split()) < set(new["cmd"].split()), name
            continue
        assert (new["cmd"], new["deps"]) == (old["cmd"], old["deps"]), name


def test_a_copy_of_the_paper_spec_does_not_take_its_checkpoint_evals(project: Path) -> None:
    """Stable ownership covers the new stages: `a` (shorter, so it would own a new
    stage) shares them, and the paper study keeps them."""
    (project / "experiments" / "a.yaml").write_text(
        "extends: miniwob-cpu-paper.yaml\nname: a\n"
        "report: {title: null, compare: [], arms: [], comparisons: []}\n"
    )
    after = _compile(project)
    assert set(after) >= NEW
    assert not any(n.startswith("evalckpt-") and n.endswith("_a") for n in after)
    assert "runs/evalckpt/miniwob-cpu-paper/rl/s1" in after["report_a"]["deps"]


def test_every_checkpoint_is_for_rl_policies_only(tmp_path: Path) -> None:
    spec = tmp_path / "x.yaml"
    spec.write_text(
        "name: x\neval:\n  policies:\n"
        "    - {kind: checkpoint, name: sft, source: sft, every_checkpoint: true}\n"
    )
    with pytest.raises(SpecErrors) as exc:
        load_experiment(spec)
    err = exc.value.errors[0]
    assert err.key == "eval.policies.0.every_checkpoint" and "rl policy" in err.message
    assert err.pos.line == 4
    spec.write_text(spec.read_text().replace("sft, source: sft", "rl, source: rl"))
    assert load_experiment(spec).eval.policies[0].every_checkpoint  # the control


def test_a_seed_list_limits_the_curves_to_those_seeds(repo_root: Path) -> None:
    """The paper study trains SFT, the full recipe and the controls on 5 seeds, and pays
    for the RL curve on the first 3 only: seeds 3 and 4 get rl and eval stages, no
    evalckpt."""
    names = {s.name for s in load_project(repo_root).stages}
    for exp in OPTED:
        for seed in (3, 4):
            assert {f"rl-s{seed}_{exp}", f"eval-rl-s{seed}_{exp}"} <= names
            assert f"evalckpt-rl-s{seed}_{exp}" not in names


@pytest.mark.parametrize(
    ("listed", "expected"),
    [
        ("[0, 5]", "seeds [5] are not training seeds"),
        ("[]", "at least one"),
        ("[1, 1]", "each once"),
    ],
)
def test_a_seed_list_names_training_seeds(tmp_path: Path, listed: str, expected: str) -> None:
    spec = tmp_path / "x.yaml"
    spec.write_text(
        "name: x\nseeds: [0, 1]\neval:\n  policies:\n"
        f"    - {{kind: checkpoint, name: rl, source: rl, every_checkpoint: {listed}}}\n"
    )
    with pytest.raises(SpecErrors) as exc:
        load_experiment(spec)
    err = exc.value.errors[0]
    assert err.key == "eval.policies.0.every_checkpoint" and expected in err.message
    spec.write_text(spec.read_text().replace(listed, "[1]"))  # the control
    policy = load_experiment(spec).eval.policies[0]
    assert policy.checkpoint_seeds([0, 1]) == [1]
