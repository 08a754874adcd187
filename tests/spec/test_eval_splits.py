"""Per-policy eval splits: a policy's own list wins over eval.splits, and it is part of
that policy's eval stage identity (so only that stage reruns when it changes)."""

from __future__ import annotations

from pathlib import Path

from rmsweb.compile.graph import plan_experiment
from rmsweb.spec import load_experiment

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def test_policy_splits_override_eval_splits() -> None:
    spec = load_experiment(EXPERIMENTS / "miniwob-cpu.yaml")
    by_name = {p.name: p for p in spec.eval.policies}
    assert spec.eval.splits == ["val", "test"]
    assert spec.eval.splits_of(by_name["expert"]) == ["test"]
    assert spec.eval.splits_of(by_name["random"]) == ["test"]
    assert spec.eval.splits_of(by_name["sft"]) == ["val", "test"]


def test_policy_splits_change_only_that_policys_stage() -> None:
    base = load_experiment(EXPERIMENTS / "miniwob-cpu.yaml")
    changed = load_experiment(
        EXPERIMENTS / "miniwob-cpu.yaml", ["eval.policies.0.splits=[val, test]"]
    )

    def ids(spec) -> dict[str, str]:
        return {s.role: s.identity for s in plan_experiment(spec)}

    before, after = ids(base), ids(changed)
    differ = sorted(name for name in before if before[name] != after.get(name))
    assert differ == ["eval-expert", "report"], differ


def test_a_policy_with_its_own_splits_ignores_eval_splits() -> None:
    base = load_experiment(EXPERIMENTS / "miniwob-cpu.yaml")
    test_only = load_experiment(EXPERIMENTS / "miniwob-cpu.yaml", ["eval.splits=[test]"])
    before = {s.role: s.identity for s in plan_experiment(base)}
    after = {s.role: s.identity for s in plan_experiment(test_only)}
    for role in ("eval-expert", "eval-teacher", "eval-random"):  # splits: [test] of their own
        assert before[role] == after[role]
    assert before["eval-sft-s0"] != after["eval-sft-s0"]  # reads eval.splits


def test_paper_rl_arms_change_one_thing() -> None:
    """Each RL arm of the paper study differs from the full recipe only in what it
    ablates (a kind change replaces the rl section whole, so the arms restate the rest)."""
    full = load_experiment(EXPERIMENTS / "miniwob-cpu-paper.yaml").rl
    shared = ("steps", "group_size", "batch_size", "learning_rate", "temperature", "save_steps")
    for arm in ("grpo", "dapo", "partial", "noanchor"):
        rl = load_experiment(EXPERIMENTS / f"miniwob-cpu-paper-{arm}.yaml").rl
        assert {k: getattr(rl, k) for k in shared} == {k: getattr(full, k) for k in shared}, arm
