"""The RL section describes each RL arm's loss from its rl spec (report/rl_baselines.py):
the paper study's variants as the experiments files configure them, and the text
follows the flags when they change."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmsweb.report.build import Report, rl_section
from rmsweb.report.document import Document, Para, Table
from rmsweb.report.rl_baselines import RLArm, differences, rl_arms
from rmsweb.spec import load_experiment

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


@pytest.fixture(scope="module")
def paper() -> dict[str, RLArm]:
    spec = load_experiment(EXPERIMENTS / "miniwob-cpu-paper.yaml")
    others = {name: load_experiment(EXPERIMENTS / f"{name}.yaml") for name in spec.report.compare}
    return {a.arm.split("/")[0]: a for a in rl_arms(spec, others)}


def _text(arm: RLArm) -> str:
    return " | ".join(arm.differences)


def test_every_rl_arm_of_the_paper_study_is_described(paper: dict[str, RLArm]) -> None:
    # Every paper-* experiment the report compares, whose arm is its rl policy.
    expected = {
        p.stem
        for p in EXPERIMENTS.glob("miniwob-cpu-paper-*.yaml")
        if p.stem != "miniwob-cpu-paper-plain"  # its arm is the SFT policy
    } | {"miniwob-cpu-paper"}
    assert set(paper) == expected
    kinds = {name: arm.kind for name, arm in paper.items()}
    assert kinds["miniwob-cpu-paper-grpo"] == "grpo"
    assert kinds["miniwob-cpu-paper-dapo"] == "dapo_ds"
    assert kinds["miniwob-cpu-paper-sftctl"] == "continued_sft"


def test_the_full_recipe_and_the_uniform_arm_share_salvage_ds_loss(
    paper: dict[str, RLArm],
) -> None:
    assert paper["miniwob-cpu-paper"].differences == ()
    assert paper["miniwob-cpu-paper-uniform"].differences == ()  # it differs in its states


def test_grpo_keeps_zero_advantage_groups_in_the_normaliser_and_kl_on_every_group(
    paper: dict[str, RLArm],
) -> None:
    text = _text(paper["miniwob-cpu-paper-grpo"])
    assert "no gate" in text and "token normaliser" in text
    assert "KL term (beta 0.04) acts on every group's tokens" in text
    assert "no anchor" in text
    assert "Salvage-DS arm" not in text  # same steps, lr, beta, temperature as the recipe


def test_dapo_drops_rejected_groups_and_resamples(paper: dict[str, RLArm]) -> None:
    text = _text(paper["miniwob-cpu-paper-dapo"])
    assert "rejected groups are dropped (no anchor NLL)" in text
    assert "up to 3 more rounds" in text
    assert "no accepted group makes no update" in text


def test_no_anchor_partial_canary_and_continued_sft(paper: dict[str, RLArm]) -> None:
    assert _text(paper["miniwob-cpu-paper-noanchor"]).startswith("no anchor (anchor_weight 0)")
    partial = _text(paper["miniwob-cpu-paper-partial"])
    assert partial.startswith("partial reward") and "polarized verdict" in partial
    canary = _text(paper["miniwob-cpu-paper-canary"])
    assert "multiplied by -1" in canary
    assert "the anchor NLL (toward the reference action) and the KL term are not inverted" in canary
    sftctl = paper["miniwob-cpu-paper-sftctl"].differences
    assert sftctl[0].startswith("no sampling, reward, gate or policy-gradient term")
    assert "no KL term" in sftctl[1]
    # its learning rate is the one setting apart from the recipe's (1e-5 vs 1e-4)
    assert sftctl[2:] == ("learning_rate 1e-05 (Salvage-DS arm: 0.0001)",)


def test_the_text_follows_the_flags() -> None:
    spec = load_experiment(EXPERIMENTS / "miniwob-cpu-paper-grpo.yaml")
    no_kl = spec.rl.model_copy(update={"beta": 0.0})
    assert not any("KL term" in d for d in differences(no_kl))
    dapo = load_experiment(EXPERIMENTS / "miniwob-cpu-paper-dapo.yaml").rl
    assert not any(
        "resampling" in d for d in differences(dapo.model_copy(update={"max_resample": 0}))
    )
    full = load_experiment(EXPERIMENTS / "miniwob-cpu-paper.yaml").rl
    resampling = differences(full.model_copy(update={"max_resample": 2}))
    assert resampling == [
        "resampling: up to 2 more rounds a step draw new states for the missing accepted "
        "groups; the rejected groups of every round are anchored"
    ]
    gate_off = differences(full.model_copy(update={"gate": False}))
    assert gate_off[0].startswith("gate off") and "anchor never acts" in gate_off[0]
    assert differences(full.model_copy(update={"learning_rate": 3e-4}), full) == [
        "learning_rate 0.0003 (Salvage-DS arm: 0.0001)"
    ]


def test_an_arm_without_its_experiment_or_an_sft_arm_is_left_out() -> None:
    spec = load_experiment(EXPERIMENTS / "miniwob-cpu-paper.yaml")
    arms = rl_arms(spec)  # no compare experiments passed
    assert [a.arm for a in arms] == ["miniwob-cpu-paper/rl"]
    default = load_experiment(EXPERIMENTS / "miniwob-cpu.yaml")  # no report.arms: its rl policy
    assert [(a.label, a.kind) for a in rl_arms(default)] == [("miniwob-cpu/rl", "salvage_ds")]


def test_rl_section_shows_the_arms_table_with_and_without_curves() -> None:
    arms = (
        RLArm("recipe", "x/rl", "salvage_ds", ()),
        RLArm("GRPO", "y/rl", "grpo", ("no gate", "no anchor")),
    )
    curve = [
        {
            "run": "rl/x/s0",
            "step": 1,
            "groups": 2,
            "reward_mean": 0.0,
            "reward_std": 1.0,
            "accepted": 1,
            "rejected": 1,
            "pg_loss": 0.1,
            "anchor_loss": 0.2,
        }
    ]
    for rows in (curve, []):
        sec = rl_section(Report(Document("t", "", [])), rows, [], {}, None, arms)
        table = [b for b in sec.blocks if isinstance(b, Table)][-1]
        assert table.rows == [
            ["recipe", "salvage_ds", "none: Salvage-DS's loss"],
            ["GRPO", "grpo", "no gate; no anchor"],
        ]
        assert any(isinstance(b, Para) and "differs from Salvage-DS" in b.text for b in sec.blocks)
    plain = rl_section(Report(Document("t", "", [])), curve, [], {}, None)
    assert not any(isinstance(b, Table) and b.headers[0] == "RL arm" for b in plain.blocks)


def test_the_expert_member_arm_says_what_it_adds() -> None:
    spec = load_experiment(EXPERIMENTS / "miniwob-cpu-budget-expert.yaml")
    full = load_experiment(EXPERIMENTS / "miniwob-cpu-budget.yaml").rl
    assert spec.rl.kind == "salvage_ds_expert"
    text = differences(spec.rl, full)
    assert len(text) == 1 and text[0].startswith("expert member: a group none of whose")
    assert differences(full, full) == []  # the plain recipe: no such line
