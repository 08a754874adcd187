"""`rmsweb validate` warns (exit 0) when a live suite's judge is the teacher's or the
policy's model (rmsweb.spec.judge_check); the shipped paper specs judge with o4-mini."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from rmsweb.cli import app
from rmsweb.spec import load_experiment
from rmsweb.spec.judge_check import same_model, self_judging

TEACHER = "Qwen/Qwen3-VL-32B-Instruct"


def live_spec(tmp_path: Path, judge: str, *, policy: str = "Qwen/Qwen3-VL-8B-Instruct") -> Path:
    spec = {
        "name": "judged",
        "suite": {
            "kind": "webvoyager",
            "judge": {"base_url": "http://127.0.0.1:8001/v1", "model": judge},
        },
        "model": {"kind": "pretrained", "name_or_path": policy},
        "collect": {
            "teacher": {"kind": "openai", "base_url": "http://127.0.0.1:8001/v1", "model": TEACHER}
        },
        "mine": {"mode": "judge"},
        "eval": {
            "policies": [
                {"kind": "openai", "name": "hosted", "base_url": "https://x.test/v1",
                 "model": "gpt-4o"},
            ]
        },
    }  # fmt: skip
    path = tmp_path / "judged.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_a_judge_that_is_the_teachers_model_is_a_warning(tmp_path: Path) -> None:
    path = live_spec(tmp_path, "qwen3-vl-32b-instruct")  # another spelling, the same model
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output  # a warning, not an error
    assert "judged.yaml suite.judge.model: the judge 'qwen3-vl-32b-instruct' is the " in (
        result.stderr
    )
    assert "teacher's model (collect.teacher.model)" in result.stderr
    assert "Fix: judge with another model, e.g. o4-mini" in result.stderr
    assert "ok  judged" in result.stdout


def test_the_policys_model_and_an_evaluated_endpoint_are_warned_about_too(tmp_path) -> None:
    base = load_experiment(live_spec(tmp_path, "/models/Qwen3-VL-8B-Instruct/"))
    (warning,) = self_judging(base)
    assert "is the policy's model (model.name_or_path)" in warning
    hosted = load_experiment(live_spec(tmp_path, "gpt-4o"))
    (warning,) = self_judging(hosted)
    assert "policy hosted's model (eval.policies.0.model)" in warning
    independent = load_experiment(live_spec(tmp_path, "o4-mini"))
    assert self_judging(independent) == []


def test_offline_suites_have_no_judge_to_warn_about(repo_root: Path) -> None:
    assert self_judging(load_experiment(repo_root / "experiments" / "smoke.yaml")) == []


def test_the_paper_specs_judge_with_o4_mini_and_validate_without_the_warning(
    repo_root: Path,
) -> None:
    for name in ("paper-8b", "paper-32b"):
        spec = load_experiment(repo_root / "experiments" / f"{name}.yaml")
        judge = spec.suite.judge
        assert (judge.model, judge.base_url, judge.serve) == (
            "o4-mini", "https://api.openai.com/v1", None,
        )  # fmt: skip
        assert not same_model(judge.model, spec.collect.teacher.model)
        assert self_judging(spec) == []
    files = [str(repo_root / "experiments" / f"{n}.yaml") for n in ("paper-8b", "paper-32b")]
    result = CliRunner().invoke(app, ["validate", *files])
    assert result.exit_code == 0 and "warning" not in result.stderr, result.output


def test_same_model_by_last_path_component() -> None:
    assert same_model("Qwen/Qwen3-VL-32B-Instruct", "/ckpt/qwen3-vl-32b-instruct")
    assert not same_model("Qwen/Qwen3-VL-32B-Instruct", "Qwen/Qwen3-VL-8B-Instruct")
