"""The RL stage's controls and knobs (issue: RL that moves the policy):
the canary's inverted reward, continued SFT on the same draws, frozen embeddings, the
optimizer settings, the anchor at temperature 1, and the KL probe to SFT."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from rmsweb.train.salvage_ds.continued_sft import ContinuedSFTTrainer
from rmsweb.train.salvage_ds.kl_probe import exact_kl, kl_to_sft
from rmsweb.train.salvage_ds.trainer import RLHyper, SalvageDSTrainer, algorithm


def hyper(kind: str = "salvage_ds", **kw: Any) -> RLHyper:
    base: dict[str, Any] = dict(
        steps=2,
        group_size=4,
        batch_size=8,  # 2 states a step: the mechanics, not learning
        learning_rate=1e-2,
        algorithm=algorithm(kind, anchor_weight=1.0),
        min_std=0.1,
        competence_min=0.25,
        competence_max=0.75,
        save_steps=10,
        temperature=0.5,
    )
    base.update(kw)
    return RLHyper(**base)


def test_canary_inverts_every_reward_and_keeps_the_gate(
    tiny_model: Any, tiny_tokenizer: Any, make_states: Any, tmp_path: Path, script_generation: Any
) -> None:
    states = make_states(4)
    groups = {}
    for sign in (1.0, -1.0):
        trainer = SalvageDSTrainer(
            tiny_model, tiny_tokenizer, states, hyper(reward_sign=sign), tmp_path / str(sign)
        )
        script_generation(trainer, [0.5, 0.0, 1.0, 0.5], exact=True)
        groups[sign] = trainer.rollout([0, 1, 2, 3], 1, 0)
    for real, canary in zip(groups[1.0], groups[-1.0], strict=True):
        assert canary.rewards == [-r for r in real.rewards]
        assert [s.correct for s in canary.scored] == [s.correct for s in real.scored]
        assert canary.decision == real.decision  # same groups accepted and anchored
    assert [g.decision.reason for g in groups[-1.0]] == [
        "accepted", "all_wrong", "all_right", "accepted"
    ]  # fmt: skip


def test_anchor_nll_is_taken_at_temperature_1(
    tiny_model: Any, tiny_tokenizer: Any, make_states: Any, tmp_path: Path, script_generation: Any
) -> None:
    trainer = SalvageDSTrainer(tiny_model, tiny_tokenizer, make_states(2), hyper(), tmp_path)
    script_generation(trainer, [0.0, 0.0], exact=True)  # all wrong: both anchored
    groups = trainer.rollout([0, 1], 1, 0)
    losses = trainer.loss_and_backward([], groups)
    batch = trainer.collate(
        [g.prompt for g in groups], [g.anchor_ids for g in groups], [g.anchor_mask for g in groups]
    )
    with torch.no_grad():
        for t, expect_equal in ((1.0, True), (0.5, False)):
            logps = trainer._logps(trainer.model, batch, temperature=t)
            nll = float(-(logps * batch["loss_mask"]).sum() / batch["loss_mask"].sum())
            assert math.isclose(nll, losses.anchor_loss, rel_tol=1e-5) == expect_equal, t


def test_freeze_embeddings_keeps_them_and_trains_the_rest(
    tiny_model: Any, tiny_tokenizer: Any, make_states: Any, tmp_path: Path, script_generation: Any
) -> None:
    emb = tiny_model.get_input_embeddings().weight.detach().clone()
    block = next(p for n, p in tiny_model.named_parameters() if "mlp" in n).detach().clone()
    h = hyper(freeze_embeddings=True, weight_decay=0.1, adam_beta2=0.95, adam_eps=1e-6)
    trainer = SalvageDSTrainer(tiny_model, tiny_tokenizer, make_states(4), h, tmp_path)
    assert trainer.optimizer.param_groups[0]["betas"] == (0.9, 0.95)
    assert trainer.optimizer.param_groups[0]["weight_decay"] == 0.1
    assert trainer.optimizer.param_groups[0]["eps"] == 1e-6
    script_generation(trainer, [0.5] * 4, exact=True)
    trainer.train_step(1)
    assert torch.equal(tiny_model.get_input_embeddings().weight, emb)
    assert torch.equal(tiny_model.get_output_embeddings().weight, emb)  # tied
    moved = next(p for n, p in tiny_model.named_parameters() if "mlp" in n)
    assert not torch.equal(moved, block)


def test_exact_kl_by_hand() -> None:
    # p = softmax([0, ln 3]) = (1/4, 3/4); q = (1/2, 1/2):
    # KL = 1/4 ln(1/2) + 3/4 ln(3/2) = 0.130812...
    logits = torch.tensor([[[0.0, math.log(3.0)], [0.0, 0.0]]])
    ref = torch.zeros(1, 2, 2)
    mask = torch.tensor([[1.0, 0.0]])  # the second position (KL 0) is masked out
    kl = 0.25 * math.log(0.5) + 0.75 * math.log(1.5)
    assert math.isclose(exact_kl(logits, ref, mask), kl, rel_tol=1e-5)
    assert math.isclose(exact_kl(logits, ref, torch.ones(1, 2)), 0.130812 / 2, rel_tol=1e-4)


def test_kl_probe_is_zero_at_the_start_and_grows_with_training(
    tiny_model: Any, tiny_tokenizer: Any, make_states: Any, tmp_path: Path, script_generation: Any
) -> None:
    trainer = SalvageDSTrainer(
        tiny_model, tiny_tokenizer, make_states(6), hyper(kl_probe_states=4), tmp_path
    )
    assert kl_to_sft(trainer) == pytest.approx(0.0, abs=1e-7)
    script_generation(trainer, [0.5] * 6, exact=True)
    for step in (1, 2, 3):
        trainer.train_step(step)
    assert kl_to_sft(trainer) > 1e-4
    off = SalvageDSTrainer(tiny_model, tiny_tokenizer, make_states(2), hyper(), tmp_path / "o")
    assert off.ref_model is None and math.isnan(kl_to_sft(off))


def test_continued_sft_trains_on_the_rl_arms_draws(
    tiny_model: Any, tiny_tokenizer: Any, make_states: Any, tmp_path: Path
) -> None:
    import copy

    states = make_states(8)
    rl = SalvageDSTrainer(copy.deepcopy(tiny_model), tiny_tokenizer, states, hyper(), tmp_path)
    h = hyper("continued_sft", steps=6, learning_rate=3e-3)
    sft = ContinuedSFTTrainer(tiny_model, tiny_tokenizer, states, h, tmp_path / "c")
    for step in (1, 2):
        assert sft.draw_states(step, 0, 2, set()) == rl.draw_states(step, 0, 2, set())
    with torch.no_grad():
        before, _ = sft.sft_backward(list(range(8)), backward=False)
    result = sft.train()
    assert [r["samples_generated"] for r in result.curve] == [0] * 6
    assert all(r["updated"] == 1 and r["loss"] > 0 for r in result.curve)
    with torch.no_grad():
        after, _ = sft.sft_backward(list(range(8)), backward=False)
    assert after < before  # supervised steps on the references lower their NLL


def test_expert_member_gives_an_all_wrong_group_contrast(
    tiny_model: Any, tiny_tokenizer: Any, make_states: Any, tmp_path: Path, script_generation: Any
) -> None:
    from rmsweb.env.actions import format_action, parse_action
    from rmsweb.train.salvage_ds.batch import anchor_completion

    states = make_states(3)
    p = [0.0, 0.5, 1.0]  # all wrong, contrast, all right
    groups = {}
    for kind in ("salvage_ds", "salvage_ds_expert"):
        trainer = SalvageDSTrainer(tiny_model, tiny_tokenizer, states, hyper(kind), tmp_path / kind)
        script_generation(trainer, p, exact=True)
        groups[kind] = trainer.rollout([0, 1, 2], 1, 0)
    plain, expert = groups["salvage_ds"], groups["salvage_ds_expert"]
    assert [g.decision.reason for g in plain] == ["all_wrong", "accepted", "all_right"]
    # only the all-wrong group changes: its last sample becomes the reference
    assert [g.decision.reason for g in expert] == ["accepted", "accepted", "all_right"]
    assert [g.expert_member for g in expert] == [True, False, False]
    member = expert[0]
    reference = format_action(parse_action(states[0].references[0]))
    assert member.completions[-1] == anchor_completion(tiny_tokenizer, reference)[0]
    assert member.completions[:-1] == plain[0].completions[:-1]
    assert [s.correct for s in member.scored] == [False, False, False, True]
    assert member.rewards == [-1.0, -1.0, -1.0, 1.0]
    assert member.sampled_rewards == plain[0].rewards == [-1.0] * 4
    assert member.anchor_ids is None  # in the policy gradient, not anchored
    for a, b in zip(plain[1:], expert[1:], strict=True):
        assert (a.completions, a.rewards, a.decision) == (b.completions, b.rewards, b.decision)


def test_expert_member_enters_the_gradient_and_not_the_logged_reward(
    tiny_model: Any, tiny_tokenizer: Any, make_states: Any, tmp_path: Path, script_generation: Any
) -> None:
    trainer = SalvageDSTrainer(
        tiny_model, tiny_tokenizer, make_states(2), hyper("salvage_ds_expert"), tmp_path
    )
    script_generation(trainer, [0.0, 0.0], exact=True)  # nothing right: both get a member
    row = trainer.train_step(1)
    assert (row["expert_members"], row["accepted"], row["rejected"]) == (2, 2, 0)
    assert row["updated"] == 1 and math.isfinite(row["pg_loss"])
    assert math.isnan(row["anchor_loss"])  # no group was left to anchor
    assert row["reward_mean"] == -1.0  # the policy's own samples, all wrong
    assert [g["expert_member"] for g in trainer.group_log] == [True, True]


def test_expert_member_spec_refuses_a_gate_that_rejects_it() -> None:
    from rmsweb.spec.rl import SalvageDSExpert

    assert SalvageDSExpert(group_size=8, batch_size=64).competence_min == 0.125
    with pytest.raises(ValueError, match=r"below competence_min 0\.25"):  # pydantic's wrap
        SalvageDSExpert(group_size=8, batch_size=64, competence_min=0.25)
    assert SalvageDSExpert(group_size=8, batch_size=64, competence_min=0.25, gate=False)


def test_the_kl_term_skips_the_expert_member(
    tiny_model: Any, tiny_tokenizer: Any, make_states: Any, tmp_path: Path, script_generation: Any
) -> None:
    from rmsweb.train.salvage_ds.loss import clipped_surrogate

    # k3 on a row the policy did not sample: the loss of row 1 is its beta-0 loss
    logps = torch.tensor([[-1.0, -2.0], [-30.0, -1.0]])
    ref = torch.tensor([[-0.5, -2.5], [-0.1, -1.0]])  # exp(29.9): 1e13 on row 1 with k3
    args = dict(epsilon=0.2, epsilon_high=0.28, normalizer=4.0)
    adv, mask = torch.tensor([1.0, 1.0]), torch.ones(2, 2)
    _, plain = clipped_surrogate(logps, logps, adv, mask, **args)
    _, both = clipped_surrogate(logps, logps, adv, mask, beta=0.04, ref_logps=ref, **args)
    _, one = clipped_surrogate(
        logps, logps, adv, mask, beta=0.04, ref_logps=ref, kl_rows=torch.tensor([1, 0]), **args
    )
    assert float(both.per_sequence_loss[1]) > 1e10
    assert torch.equal(one.per_sequence_loss[1], plain.per_sequence_loss[1])
    assert torch.equal(one.per_sequence_loss[0], both.per_sequence_loss[0])

    # the trainer marks the member: with a reference that differs from the policy, the
    # member's tokens add to the KL only when the group is not flagged
    trainer = SalvageDSTrainer(
        tiny_model,
        tiny_tokenizer,
        make_states(1),
        hyper("salvage_ds_expert", beta=0.04),
        tmp_path,
    )
    with torch.no_grad():
        for p in trainer.ref_model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    script_generation(trainer, [0.0], exact=True)
    (group,) = trainer.rollout([0], 1, 0)
    assert group.expert_member
    flagged = trainer.loss_and_backward([group], [])
    group.expert_member = False
    unflagged = trainer.loss_and_backward([group], [])
    assert 0 < flagged.kl < unflagged.kl
