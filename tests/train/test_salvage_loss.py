"""Salvage-DS loss terms on hand-computed tensors, and the anchor's token mask."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from rmsweb.train.salvage_ds.batch import anchor_completion
from rmsweb.train.salvage_ds.loss import action_anchor, clipped_surrogate, group_advantages
from rmsweb.train.salvage_ds.reward import Scored
from rmsweb.train.salvage_ds.trainer import RLHyper, SalvageDSTrainer, algorithm


def test_group_advantages_by_hand() -> None:
    # Group 1: rewards [1, -1, -1, -1]: mean -0.5, deviations [1.5, -0.5, -0.5, -0.5],
    #   unbiased variance (2.25 + 3 * 0.25) / 3 = 1, std 1 -> A = dev / (1 + 1e-4).
    # Group 2: all -1: std 0 -> A = 0 / (0 + 1e-4) = 0 (no gradient, as in GRPO).
    adv = group_advantages(torch.tensor([[1.0, -1, -1, -1], [-1.0, -1, -1, -1]]))
    expected = torch.tensor([[1.5, -0.5, -0.5, -0.5], [0.0, 0, 0, 0]]) / (1 + 1e-4)
    assert torch.allclose(adv, expected, atol=1e-7)


def test_clipped_surrogate_on_a_two_group_batch_by_hand() -> None:
    """Two groups of G=2, two completion tokens each, one token masked.

    Group 1 rewards [1, -1]: mean 0, unbiased std sqrt(2) -> A = +-a, a = 1/(sqrt(2)+1e-4).
    Group 2 rewards [-1, -1]: A = 0, so its tokens add to the normaliser only.
    Ratios r = exp(logp - old): seq0 [1, 1.5], seq1 [0.5, (2.0 masked)], seq2/3 anything.
    epsilon 0.2, epsilon_high 0.28; loss_t = -min(r A, clip(r, 0.8, 1.28) A):
      seq0 t0: r = 1 inside the range      -> -a
      seq0 t1: r = 1.5, A > 0, clip 1.28    -> -1.28 a (clipped: no gradient)
      seq1 t0: r = 0.5, A < 0, clip 0.8     -> -min(-0.5 a, -0.8 a) = 0.8 a (clipped)
      group 2: A = 0                        -> 0
    Token-level mean over the 7 unmasked tokens: (-a - 1.28 a + 0.8 a) / 7 = -1.48 a / 7.
    Gradient w.r.t. logp: only seq0 t0 is unclipped: d(-r a)/dlogp = -r a = -a, / 7.
    Clipped tokens: seq0 t1 and seq1 t0 -> 2 / 7.
    """
    a = 1 / (math.sqrt(2) + 1e-4)
    adv = group_advantages(torch.tensor([[1.0, -1.0], [-1.0, -1.0]])).reshape(-1)
    assert torch.allclose(adv, torch.tensor([a, -a, 0.0, 0.0]), atol=1e-7)
    ratios = torch.tensor([[1.0, 1.5], [0.5, 2.0], [1.0, 1.0], [1.3, 0.7]])
    logps = torch.full((4, 2), -1.0, requires_grad=True)
    old = logps.detach() - torch.log(ratios)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0], [1.0, 1.0], [1.0, 1.0]])
    loss, stats = clipped_surrogate(
        logps, old, adv, mask, epsilon=0.2, epsilon_high=0.28, normalizer=7.0
    )
    assert loss.item() == pytest.approx(-1.48 * a / 7, abs=1e-7)
    assert stats.clipped_tokens == 2 and stats.tokens == 7
    assert stats.kl_sum == 0.0
    loss.backward()
    expected = torch.zeros(4, 2)
    expected[0, 0] = -a / 7
    assert torch.allclose(logps.grad, expected, atol=1e-7)
    # Per-sequence sums (the rl_groups table's per-group PG loss comes from these).
    assert torch.allclose(stats.per_sequence_loss, torch.tensor([-2.28 * a, 0.8 * a, 0, 0]))


def test_kl_term_by_hand() -> None:
    """beta 0.1, on-policy (r = 1), A = 0; ref - logp = ln 2 on token 0, 0 on token 1.

    kl_0 = e^ln2 - ln2 - 1 = 1 - ln 2 = 0.30685..., kl_1 = 0; loss = 0.1 * kl_0 / 2 tokens.
    Gradient of r * kl at r = 1: d kl/d logp + kl * d r/d logp = (1 - e^ln2) + kl_0
      = -1 + 0.30685 = -ln 2, times 0.1 / 2.
    """
    logps = torch.zeros(1, 2, requires_grad=True)
    ref = torch.tensor([[math.log(2.0), 0.0]])
    loss, stats = clipped_surrogate(
        logps,
        logps.detach(),
        torch.zeros(1),
        torch.ones(1, 2),
        epsilon=0.2,
        epsilon_high=0.28,
        normalizer=2.0,
        beta=0.1,
        ref_logps=ref,
    )
    kl0 = 1 - math.log(2.0)
    assert loss.item() == pytest.approx(0.1 * kl0 / 2, abs=1e-7)
    assert stats.kl_sum == pytest.approx(kl0, abs=1e-7)
    loss.backward()
    assert torch.allclose(logps.grad, torch.tensor([[-0.1 * math.log(2.0) / 2, 0.0]]), atol=1e-7)


def test_action_anchor_by_hand() -> None:
    # Action tokens are positions 1 and 2: NLL = (2.0 + 0.5) / 2 = 1.25; the gradient
    # w.r.t. logp is -1/2 on those two tokens and 0 on the marker and end of turn.
    logps = torch.tensor([[-0.1, -2.0, -0.5, -3.0]], requires_grad=True)
    mask = torch.tensor([[0.0, 1.0, 1.0, 0.0]])
    nll, stats = action_anchor(logps, mask, normalizer=2.0)
    assert nll.item() == pytest.approx(1.25)
    nll.backward()
    assert torch.equal(logps.grad, torch.tensor([[0.0, -0.5, -0.5, 0.0]]))
    assert stats.tokens == 2


@pytest.mark.parametrize(
    "action", ["click(3)", 'fill(12, "Bob Smith")', 'press("Enter")', "click_xy(40, 96.5)"]
)
def test_anchor_mask_covers_exactly_the_action_tokens(tiny_tokenizer: Any, action: str) -> None:
    ids, mask = anchor_completion(tiny_tokenizer, action)
    assert len(ids) == len(mask)
    masked = [t for t, m in zip(ids, mask, strict=True) if m]
    unmasked = [t for t, m in zip(ids, mask, strict=True) if not m]
    # The masked tokens spell the action (a leading space may ride on its first token).
    assert tiny_tokenizer.decode(masked).strip() == action
    # Everything else is the "Action:" marker and the end-of-turn token, nothing of the action.
    assert tiny_tokenizer.decode(unmasked).replace(" ", "") == "Action:<|im_end|>"
    assert ids[-1] == tiny_tokenizer.eos_token_id and mask[-1] == 0
    # The mask is one contiguous run.
    first, last = mask.index(1), len(mask) - 1 - mask[::-1].index(1)
    assert all(mask[first : last + 1])


def _trainer(model: Any, tok: Any, states: list, tmp: Path, **kw: Any) -> SalvageDSTrainer:
    hyper = RLHyper(
        steps=1,
        group_size=2,
        batch_size=4,
        learning_rate=1e-3,
        algorithm=algorithm("salvage_ds", gate=kw.pop("gate", True), anchor_weight=0.5),
        **kw,
    )
    return SalvageDSTrainer(model, tok, states, hyper, tmp)


def _group(trainer: SalvageDSTrainer, index: int, outputs: list[str], rewards: list[float]):
    tok = trainer.tokenizer
    comps = [tok(f"Action: {o}<|im_end|>", add_special_tokens=False)["input_ids"] for o in outputs]
    scored = [Scored(r, r > 0, True) for r in rewards]
    return trainer.make_group(index, comps, [f"Action: {o}" for o in outputs], scored)


def test_anchor_loss_is_the_nll_of_the_action_tokens_only(
    tiny_model: Any, tiny_tokenizer: Any, make_states: Any, tmp_path: Path
) -> None:
    states = make_states(2)
    trainer = _trainer(tiny_model, tiny_tokenizer, states, tmp_path)
    group = _group(trainer, 0, ["click(9)", "click(8)"], [-1.0, -1.0])
    assert group.decision.reason == "all_wrong" and group.anchor_ids is not None
    losses = trainer.loss_and_backward([], [group])
    # The same number from a plain forward over prompt + "Action: <ref><|im_end|>".
    ids = torch.tensor([group.prompt.input_ids.tolist() + group.anchor_ids])
    with torch.no_grad():
        logits = tiny_model(input_ids=ids).logits[0, :-1]
    logp = torch.log_softmax(logits, -1).gather(-1, ids[0, 1:, None])[:, 0]
    n = len(group.anchor_ids)
    action_logp = logp[-n:][torch.tensor(group.anchor_mask, dtype=torch.bool)]
    assert losses.anchor_loss == pytest.approx(float(-action_logp.mean()), abs=1e-6)
    assert losses.loss == pytest.approx(0.5 * losses.anchor_loss, abs=1e-7)
    assert math.isnan(losses.pg_loss)


def test_micro_batches_accumulate_the_same_gradient(
    tiny_tokenizer: Any, make_states: Any, tmp_path: Path
) -> None:
    """Gradient accumulation 1 x 6 sequences equals 3 x 2 (token-level normaliser)."""
    from rmsweb.models.config import TinySize
    from rmsweb.models.tiny import build_text_model

    grads = []
    for micro in (None, 2):
        model = build_text_model(tiny_tokenizer, TinySize(hidden_size=32, intermediate_size=64), 0)
        trainer = _trainer(
            model, tiny_tokenizer, make_states(3), tmp_path / str(micro), micro_batch_size=micro
        )
        pg = [
            _group(trainer, 0, ["click(2)", 'fill(3, "x y")'], [1.0, -1.0]),
            _group(trainer, 1, ["click(4)", "stop()"], [-1.0, 1.0]),
        ]
        anchored = [_group(trainer, 2, ["click(9)", 'scroll("down")'], [-1.0, -1.0])]
        losses = trainer.loss_and_backward(pg, anchored)
        grads.append((losses.loss, [p.grad.clone() for p in model.parameters()]))
    (loss_a, grads_a), (loss_b, grads_b) = grads
    assert loss_a == pytest.approx(loss_b, abs=1e-6)
    assert all(torch.allclose(x, y, atol=1e-7) for x, y in zip(grads_a, grads_b, strict=True))
