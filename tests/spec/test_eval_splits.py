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


# What each RL arm of the paper study may change; every other shared RL setting must
# equal the full recipe's (a kind change replaces the rl section whole, so the arms that
# change kind restate every setting: forgetting one would change two things at once).
RL_ARM_ABLATES = {
    "grpo": {"kind"},
    "dapo": {"kind"},
    "partial": {"reward"},
    "noanchor": set(),  # a SalvageDS-only field (anchor_weight), outside the shared ones
    # its learning rate is chosen on val, as SFT's; the SFT loss has no KL term, so the
    # control leaves beta at 0 (continued_sft.py never reads it)
    "sftctl": {"kind", "learning_rate", "beta"},
    "canary": {"reward"},  # only reward.invert, checked below
}


def test_paper_rl_arms_change_one_thing() -> None:
    """Each RL arm of the paper study differs from the full recipe only in what it
    ablates: every field the RL kinds share is compared, not a chosen few."""
    from rmsweb.spec.rl import _RLBase

    full = load_experiment(EXPERIMENTS / "miniwob-cpu-paper.yaml")
    shared = set(_RLBase.model_fields)
    for arm, ablates in RL_ARM_ABLATES.items():
        spec = load_experiment(EXPERIMENTS / f"miniwob-cpu-paper-{arm}.yaml")
        keep = sorted(shared - ablates)
        got = {k: getattr(spec.rl, k) for k in keep}
        assert got == {k: getattr(full.rl, k) for k in keep}, arm
        assert spec.mine == full.mine and spec.sft == full.sft, arm  # same states, same SFT
    canary = load_experiment(EXPERIMENTS / "miniwob-cpu-paper-canary.yaml").rl
    assert canary.reward.invert and not full.rl.reward.invert
    assert canary.reward.model_copy(update={"invert": False}) == full.rl.reward
    assert canary.model_dump(exclude={"reward"}) == full.rl.model_dump(exclude={"reward"})


def test_paper_study_reports_both_controls() -> None:
    """The study's table holds the continued-SFT control and the canary, and compares the
    full recipe with continued SFT and uniform states, and the canary with SFT."""
    report = load_experiment(EXPERIMENTS / "miniwob-cpu-paper.yaml").report
    arms = {a.label: a.arm for a in report.arms}
    assert "miniwob-cpu-paper-sftctl/rl" in arms.values()
    assert "miniwob-cpu-paper-canary/rl" in arms.values()
    assert {"miniwob-cpu-paper-sftctl", "miniwob-cpu-paper-canary"} <= set(report.compare)
    label = {v: k for k, v in arms.items()}
    pairs = {(c.a, c.b) for c in report.comparisons}
    full, sft = label["miniwob-cpu-paper/rl"], label["miniwob-cpu-paper/sft"]
    assert (full, label["miniwob-cpu-paper-sftctl/rl"]) in pairs
    assert (full, label["miniwob-cpu-paper-uniform/rl"]) in pairs
    assert (label["miniwob-cpu-paper-canary/rl"], sft) in pairs
