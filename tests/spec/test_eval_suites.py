"""Evaluation suites apart from the training suite (`eval.suites`, issue 43): the spec,
the eval stages they plan, and what existing specs keep."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmsweb.compile.graph import plan_experiment
from rmsweb.spec import SpecErrors, load_experiment

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = ROOT / "experiments"


def test_paper_specs_train_on_a_pool_and_evaluate_on_the_three_benchmarks() -> None:
    for name in ("paper-8b", "paper-32b"):
        spec = load_experiment(EXPERIMENTS / f"{name}.yaml")
        assert spec.suite.kind == "task_pool"
        suites = spec.eval.suites or []
        assert [(s.name, s.suite.kind, s.split) for s in suites] == [
            ("webvoyager", "webvoyager", "all"),
            ("om2w", "online_mind2web", "all"),
            ("webtailbench", "webtailbench", "all"),
        ]
        assert all(s.suite.judge.protocol == "suite" for s in suites)  # each its own judge
        assert suites[0].suite.max_steps == 15 and suites[0].suite.judge.last_k_screenshots == 15
        roles = [s.role for s in plan_experiment(spec) if s.kind == "eval"]
        assert sorted(roles) == sorted(
            f"eval-{b}-{p}-s0"
            for b in ("webvoyager", "om2w", "webtailbench")
            for p in ("sft", "rl")
        )


def test_an_eval_suite_stage_reads_its_suite_not_the_training_suite() -> None:
    spec = load_experiment(EXPERIMENTS / "paper-8b.yaml")
    stage = next(s for s in plan_experiment(spec) if s.role == "eval-om2w-rl-s0")
    assert "eval.suites.1.max_steps" not in stage.params  # key granularity: one level down
    assert "eval.suites.1.name" in stage.params and "eval.suites.1.suite" in stage.params
    assert not any(p.startswith("suite.") for p in stage.params)
    assert stage.upstream["policy"].kind == "rl"


def test_changing_one_benchmark_reruns_only_its_stages() -> None:
    before = {
        s.role: s.identity for s in plan_experiment(load_experiment(EXPERIMENTS / "paper-8b.yaml"))
    }
    changed = load_experiment(EXPERIMENTS / "paper-8b.yaml", ["eval.suites.0.suite.max_steps=20"])
    again = {s.role: s.identity for s in plan_experiment(changed)}
    differ = sorted(r for r in before if before[r] != again[r])
    assert differ == ["eval-webvoyager-rl-s0", "eval-webvoyager-sft-s0", "report"], differ


def test_without_eval_suites_the_training_suite_is_evaluated() -> None:
    spec = load_experiment(EXPERIMENTS / "miniwob-cpu.yaml")
    assert spec.eval.suites is None
    stage = next(s for s in plan_experiment(spec) if s.role == "eval-sft-s0")
    assert not any(p.startswith("eval.suites") for p in stage.params)  # params as before
    assert spec.eval.variants() == [p.name for p in spec.eval.policies]


def test_variant_resolves_to_suite_and_policy() -> None:
    spec = load_experiment(EXPERIMENTS / "paper-8b.yaml")
    ev, policy = spec.eval.resolve("webtailbench-sft")
    assert ev is not None and ev.name == "webtailbench" and policy.name == "sft"
    with pytest.raises(KeyError):
        spec.eval.resolve("sft")  # with eval.suites, a bare policy is no eval stage


@pytest.mark.parametrize(
    ("override", "key", "words"),
    [
        ("eval.suites.1.name=webvoyager", "eval.suites.1.name", "used twice"),
        ("eval.suites.0.name=web-voyager", "eval.suites.0.name", "pattern"),
        ("eval.suites.0.suite.kind=miniwob", "eval.suites.0.suite", "kind"),
        ("eval.policies=[{kind: expert}]", "eval.policies.0.kind", "offline"),
        ("suite.judge.protocol=suite", "suite.judge.protocol", "no judge of its own"),
        (
            "eval.suites.0.suite.judge={base_url: 'http://127.0.0.1:8009/v1', serve: {}}",
            "eval.suites.0.suite.judge.serve",
            "not started",
        ),
    ],
)
def test_bad_eval_suites_are_refused_at_the_key(override: str, key: str, words: str) -> None:
    with pytest.raises(SpecErrors) as exc:
        load_experiment(EXPERIMENTS / "paper-8b.yaml", [override])
    text = str(exc.value)
    assert key in text and words in text, text


def test_a_task_pool_judges_with_webvoyager_unless_told() -> None:
    spec = load_experiment(EXPERIMENTS / "paper-8b.yaml", ["suite.judge={model: m}"])
    assert spec.suite.judge.protocol == "webvoyager"


def test_report_compare_joins_8b_and_32b_evaluations() -> None:
    """The headline table of several specs: 8B's report takes 32B's eval runs as inputs."""
    from rmsweb.compile.graph import plan_project

    eight = load_experiment(EXPERIMENTS / "paper-8b.yaml", ["report.compare=[paper-32b]"])
    big = load_experiment(EXPERIMENTS / "paper-32b.yaml", ["report.compare=[]"])
    stages = plan_project([eight, big])
    report = next(s for s in stages if s.kind == "report" and s.owner == "paper-8b")
    evals = sorted(r for r in report.upstream if "eval-" in r)
    assert "paper-32b.eval-webtailbench-rl-s0" in evals and "eval-webvoyager-sft-s0" in evals
    assert len(evals) == 12  # 3 benchmarks x (sft, rl) x (8B, 32B)


def test_eval_stage_runs_its_benchmark_whole_or_the_training_suites_splits() -> None:
    from rmsweb.evaluate.stage import _target

    spec = load_experiment(EXPERIMENTS / "paper-8b.yaml")
    suite, policy, splits = _target(spec, "om2w-rl")
    assert (suite.kind, suite.max_steps, policy.name, splits) == (
        "online_mind2web",
        30,
        "rl",
        ["test"],
    )
    val = load_experiment(EXPERIMENTS / "paper-8b.yaml", ["eval.suites.0.split=val"])
    assert _target(val, "webvoyager-sft")[2] == ["val"]
    plain = load_experiment(EXPERIMENTS / "miniwob-cpu.yaml")
    suite, policy, splits = _target(plain, "sft")
    assert suite is plain.suite and splits == ["val", "test"]
