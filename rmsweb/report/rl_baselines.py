"""How each RL arm's loss differs from Salvage-DS, generated from the arm's rl spec.

The report's RL section lists every RL arm with these lines, so the description is a
function of the config (kind and flags) and cannot drift from it. Each statement is
what the code does (train/salvage_ds: trainer.py, loss.py, gate.py, reward.py,
continued_sft.py), not what a paper says:

- Salvage-DS (trainer.py, `algorithm`): the gate's accepted groups feed the clipped
  surrogate with group-normalised advantages, its token normaliser counting only their
  completion tokens, and the KL term (beta, k3 x ratio) acts on those tokens only;
  each rejected group adds anchor_weight x the NLL of its state's first reference
  action's tokens (not "Action:", not end of turn; temperature 1); no resampling
  (max_resample 0), so every step updates.
- grpo: no gate, so every group is in the surrogate: a group whose rewards are all
  equal has advantage 0 and adds no gradient of its own, but its tokens count in the
  normaliser (the step's gradient shrinks) and the KL term acts on them.
- dapo_ds: rejected groups are dropped and the shortfall is drawn again from new states.
- salvage_ds_expert: a group with no right sample gets the reference as its last member.
- continued_sft: no sampling and no reward; the NLL of the whole reference completion.
- reward.kind / reward.invert: the reward the advantages are computed from; the gate
  reads the polarized verdict whatever the reward.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rmsweb.report.document import Para, Table

SALVAGE_DS = "salvage_ds"

# Settings compared with the report's own Salvage-DS arm, and the kinds that use them
# (None: every kind). continued_sft samples nothing, so it has no temperature, clip,
# KL or gate; grpo has no gate fields.
_SAMPLING = ("grpo", "dapo_ds", "salvage_ds", "salvage_ds_expert")
_GATED = ("dapo_ds", "salvage_ds", "salvage_ds_expert")
SETTINGS: tuple[tuple[str, tuple[str, ...] | None], ...] = (
    ("steps", None),
    ("group_size", None),
    ("batch_size", None),
    ("learning_rate", None),
    ("warmup_ratio", None),
    ("max_grad_norm", None),
    ("weight_decay", None),
    ("freeze_embeddings", None),
    ("temperature", _SAMPLING),
    ("epsilon", _SAMPLING),
    ("epsilon_high", _SAMPLING),
    ("beta", _SAMPLING),
    ("min_std", _GATED),
    ("competence_min", _GATED),
    ("competence_max", _GATED),
)


@dataclass(frozen=True)
class RLArm:
    """One RL arm of a report: its label, `<experiment>/<policy>`, kind and differences."""

    label: str
    arm: str
    kind: str
    differences: tuple[str, ...]


def _kind_differences(rl: Any) -> list[str]:
    """What the kind and its gate/anchor/resample flags change in the loss."""
    kind = rl.kind
    beta = getattr(rl, "beta", 0.0)
    kl_every = (
        f"the KL term (beta {beta:g}) acts on every group's tokens, not only on accepted groups'"
    )
    if kind == "grpo":
        out = [
            "no gate: every group is in the policy-gradient term; a group whose rewards are "
            "all equal has advantage 0 and adds no gradient of its own, but its completion "
            "tokens count in the token normaliser, so the step's gradient is smaller"
        ]
        if beta > 0:
            out.append(kl_every)
        out.append("no anchor: groups without contrast add no supervised term")
        return out
    if kind == "dapo_ds":
        rounds = rl.max_resample
        out = ["rejected groups are dropped (no anchor NLL)"]
        if rounds:
            out.append(
                f"resampling: up to {rounds} more round{'s' if rounds > 1 else ''} a step "
                "draw new states for the missing accepted groups (G samples each); the "
                "rejected groups of every round are dropped"
            )
        out.append(
            "a step with no accepted group makes no update (it still counts toward the "
            "steps and the learning-rate schedule)"
        )
        return out
    if kind == "continued_sft":
        return [
            "no sampling, reward, gate or policy-gradient term: each step draws the states "
            "RL's first round would draw (batch_size / group_size, same weights and seeds) "
            "and minimises the NLL of each state's first reference action as SFT does: "
            'every token of "Action: <reference>" and the end of turn, temperature 1, '
            "weight 1 on every drawn state (the anchor: action tokens only, anchor_weight, "
            "rejected groups only)",
            "no KL term (beta must be 0); an update every step",
        ]
    if kind not in (SALVAGE_DS, "salvage_ds_expert"):
        raise ValueError(f"unknown RL kind {kind!r}")
    out = []
    if kind == "salvage_ds_expert":
        out.append(
            "expert member: a group none of whose samples is right gets its state's first "
            'reference action ("Action: <reference>" and the end of turn, as the policy would '
            "emit it) in place of its last sample, before the gate, so it has 1 right of G "
            "and enters the policy-gradient term instead of the anchor: the reference is "
            "pushed up and the sampled wrong actions down (the reported reward is the "
            "samples' own)"
        )
    if not rl.gate:
        out.append(
            "gate off: every group is in the policy-gradient term, as in GRPO (zero-"
            "advantage groups count in the token normaliser"
            + (f"; {kl_every}" if beta > 0 else "")
            + "); no group is rejected, so the anchor never acts"
        )
    elif rl.anchor_weight <= 0:
        out.append(
            "no anchor (anchor_weight 0): rejected groups are dropped; a step with no "
            "accepted group makes no update"
        )
    if rl.gate and rl.max_resample:
        anchored = "anchored" if rl.anchor_weight > 0 else "dropped"
        out.append(
            f"resampling: up to {rl.max_resample} more round"
            f"{'s' if rl.max_resample > 1 else ''} a step draw new states for the missing "
            f"accepted groups; the rejected groups of every round are {anchored}"
        )
    return out


def _reward_differences(rl: Any) -> list[str]:
    """What the reward settings change (unused by continued_sft, which has no reward)."""
    reward = rl.reward
    out = []
    if rl.kind == "continued_sft":
        changed = reward.kind != "polarized" or reward.invert
        return ["its reward settings are unused (nothing is sampled)"] if changed else []
    if reward.kind == "partial":
        out.append(
            "partial reward: the share of matching components (type, target, argument) of "
            "the best-matching reference, in [0, 1], unparseable 0, instead of +1 right / "
            "-1 wrong: a wrong action sharing a reference's type or target outscores one "
            "sharing neither. "
            "The gate still counts right answers by the polarized verdict (a group with "
            "none is all_wrong however its partial rewards differ), and min_std "
            f"{getattr(rl, 'min_std', 0.0):g} applies to the [0, 1] rewards"
        )
    elif reward.kind == "format_plus_match":
        out.append(
            f"format_plus_match reward: {reward.format_bonus:g} for a parseable action plus "
            "1 for a right one, instead of +1 right / -1 wrong"
        )
    if reward.similarity_tau < 1:
        out.append(
            f"text arguments count as matching at similarity >= {reward.similarity_tau:g} "
            "(Salvage-DS: exact after normalisation)"
        )
    if reward.invert:
        kept = []
        if getattr(rl, "gate", True) and getattr(rl, "anchor_weight", 0.0) > 0:
            kept.append("the anchor NLL (toward the reference action)")
        if getattr(rl, "beta", 0.0) > 0:
            kept.append("the KL term")
        out.append(
            "canary: every reward is multiplied by -1, so the advantages flip and the policy "
            "gradient pushes away from right actions; the right/wrong verdict is kept, so the "
            "gate accepts and rejects the same groups"
            + (
                f"; {' and '.join(kept)} {'are' if len(kept) > 1 else 'is'} not inverted"
                if kept
                else ""
            )
        )
    return out


def _setting_differences(rl: Any, reference: Any) -> list[str]:
    """Settings the arm has with other values than the report's Salvage-DS arm."""
    out = []
    for name, kinds in SETTINGS:
        if kinds is not None and rl.kind not in kinds:
            continue
        if not hasattr(rl, name) or not hasattr(reference, name):
            continue
        mine, theirs = getattr(rl, name), getattr(reference, name)
        if rl.kind == "continued_sft" and name == "beta":
            continue
        if mine != theirs:
            out.append(f"{name} {_value(mine)} (Salvage-DS arm: {_value(theirs)})")
    return out


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    return f"{v:g}" if isinstance(v, float) else str(v)


def differences(rl: Any, reference: Any | None = None) -> list[str]:
    """How an rl spec's loss differs from Salvage-DS (gate on, anchor, no resampling,
    polarized reward); with `reference` (the report's Salvage-DS rl spec), also the
    settings whose values differ from it. An empty list: the same loss as Salvage-DS."""
    out = _kind_differences(rl) + _reward_differences(rl)
    if reference is not None:
        out += _setting_differences(rl, reference)
    return out


def rl_arms(spec: Any, others: Mapping[str, Any] | None = None) -> tuple[RLArm, ...]:
    """The report's RL arms with their differences from its Salvage-DS arm.

    spec: the report's experiment; others: the `report.compare` experiments by name. An
    arm is RL when its policy is a checkpoint policy with source rl. The arms are the
    spec's report.arms rows (their labels); without any, its own rl policies. The
    settings are compared with the report's own rl section when it is Salvage-DS.
    """
    specs = {spec.name: spec, **(others or {})}
    reference = spec.rl if spec.rl.kind == SALVAGE_DS else None
    rows: Sequence[tuple[str, str]] = [(r.label, r.arm) for r in spec.report.arms] or [
        (f"{spec.name}/{p.name}", f"{spec.name}/{p.name}") for p in spec.eval.policies
    ]
    out = []
    for label, arm in rows:
        experiment, _, policy = arm.partition("/")
        owner = specs.get(experiment)
        if owner is None:
            continue  # an arm of an experiment the caller did not pass: not described
        p = next((p for p in owner.eval.policies if p.name == policy), None)
        if getattr(p, "source", None) != "rl":
            continue
        diffs = differences(owner.rl, reference)
        out.append(RLArm(label, arm, owner.rl.kind, tuple(diffs)))
    return tuple(out)


BASELINES_TITLE = "How each RL arm's loss differs from Salvage-DS"
BASELINES_NOTE = (
    "Generated from each arm's rl section (kind, gate, anchor_weight, max_resample, "
    "reward, and the settings whose values differ from this report's Salvage-DS arm). "
    "Salvage-DS: the gate's accepted groups feed the clipped policy-gradient term (its "
    "token normaliser counts only their completion tokens, and the KL term acts on those "
    "tokens only); each rejected group adds anchor_weight x the NLL of its state's "
    "reference action tokens; no resampling. An arm with the same loss differs elsewhere "
    "(its states or its SFT)."
)


def baselines_table_rows(arms: Sequence[RLArm]) -> list[list[str]]:
    """One row per arm: label, kind, its differences ("none" when it is Salvage-DS)."""
    return [[a.label, a.kind, "; ".join(a.differences) or "none: Salvage-DS's loss"] for a in arms]


def baselines_blocks(arms: Sequence[RLArm]) -> list[Table | Para]:
    """The RL section's note and table of the arms' differences (no arms: nothing)."""
    if not arms:
        return []
    return [
        Para(f"{BASELINES_TITLE}. {BASELINES_NOTE}"),
        Table(
            ["RL arm", "Kind", "Loss: differences from Salvage-DS"],
            baselines_table_rows(arms),
            ["left", "left", "left"],
        ),
    ]
