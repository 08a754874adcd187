"""Invariant: Salvage-DS with the gate off and anchor_weight 0 is TRL's GRPO loss.

Same fixed batch (two states x G=3 completions of different lengths, one truncated
without an end-of-turn token), same loss type (TRL's "dapo": token-level aggregation
over the batch), same temperature and clip range: the loss and every parameter's
gradient agree within 1e-6. TRL's side is GRPOTrainer._compute_loss itself (TRL pinned
in constraints.txt), fed the tensors its own generation step would build: left-padded
prompts, right-padded completions, advantages by its formula (utils.nanstd).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from rmsweb.train.salvage_ds.reward import Scored
from rmsweb.train.salvage_ds.trainer import RLHyper, SalvageDSTrainer, algorithm

OUTPUTS = [
    (["click(2)", 'fill(3, "Bob")', "click(5)"], [1.0, -1.0, -1.0]),
    (["stop()", "click(4)", 'answer("no")'], [-1.0, 1.0, 1.0]),
]
TEMPERATURE = 0.7  # not 1, so the temperature scaling of the logits is compared too


def _fixed_groups(trainer: SalvageDSTrainer, tok: Any) -> list:
    groups = []
    for index, (outputs, rewards) in enumerate(OUTPUTS):
        comps = [
            tok(f"Action: {o}<|im_end|>", add_special_tokens=False)["input_ids"] for o in outputs
        ]
        comps[2] = comps[2][:-3]  # truncated by max_new_tokens: no end-of-turn token
        scored = [Scored(r, r > 0, True) for r in rewards]
        groups.append(trainer.make_group(index, comps, outputs, scored))
    return groups


def _trl_inputs(groups: list, pad: int, ref_logps: Any = None) -> dict[str, Any]:
    from trl.trainer.utils import nanstd
    from trl.trainer.utils import pad as trl_pad

    prompts = [g.prompt.input_ids for g in groups for _ in g.completions]
    comps = [torch.tensor(c) for g in groups for c in g.completions]
    prompt_ids = trl_pad(prompts, padding_value=pad, padding_side="left")
    prompt_mask = trl_pad(
        [torch.ones_like(p) for p in prompts], padding_value=0, padding_side="left"
    )
    completion_ids = trl_pad(comps, padding_value=pad, padding_side="right")
    completion_mask = trl_pad(
        [torch.ones_like(c) for c in comps], padding_value=0, padding_side="right"
    )
    # GRPOTrainer._generate_and_score_completions, scale_rewards="group".
    rewards = torch.tensor([r for g in groups for r in g.rewards])
    grouped = rewards.view(-1, 3)
    mean = grouped.mean(dim=1).repeat_interleave(3)
    std = nanstd(grouped, dim=1).repeat_interleave(3)
    inputs = {
        "prompt_ids": prompt_ids,
        "prompt_mask": prompt_mask,
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "advantages": (rewards - mean) / (std + 1e-4),
        "num_items_in_batch": completion_mask.sum(),
    }
    if ref_logps is not None:
        inputs["ref_per_token_logps"] = ref_logps
    return inputs


def _ref_logps(ref_model: Any, inputs: dict[str, Any]) -> Any:
    ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
    attn = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
    n = inputs["completion_ids"].shape[1]
    with torch.no_grad():
        logits = ref_model(input_ids=ids, attention_mask=attn).logits[:, -n - 1 : -1]
    logp = torch.log_softmax(logits / TEMPERATURE, -1)
    return logp.gather(-1, inputs["completion_ids"][..., None])[..., 0]


@pytest.mark.parametrize("beta", [0.0, 0.05])
def test_gate_off_and_no_anchor_equals_trl_grpo(
    tiny_model: Any, tiny_tokenizer: Any, make_states: Any, tmp_path: Path, beta: float
) -> None:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    tok = tiny_tokenizer
    hyper = RLHyper(
        steps=1,
        group_size=3,
        batch_size=6,
        learning_rate=1e-3,
        algorithm=algorithm("salvage_ds", gate=False, anchor_weight=0.0),
        epsilon=0.2,
        epsilon_high=0.28,
        beta=beta,
        temperature=TEMPERATURE,
    )
    ours = SalvageDSTrainer(tiny_model, tok, make_states(2), hyper, tmp_path / "ours")
    if beta:
        # Move the policy off its frozen reference, so the KL and its gradient are not 0.
        torch.manual_seed(1)
        with torch.no_grad():
            for p in tiny_model.parameters():
                p.add_(0.05 * torch.randn_like(p))
    groups = _fixed_groups(ours, tok)
    assert all(g.decision.reason == "ungated" for g in groups)

    tiny_model.zero_grad()
    losses = ours.loss_and_backward(groups, [])
    ours_grads = {n: p.grad.clone() for n, p in tiny_model.named_parameters()}

    config = GRPOConfig(
        output_dir=str(tmp_path / "trl"),
        loss_type="dapo",  # token-level aggregation, as Salvage-DS
        # beta is set on the trainer below: with beta > 0 at construction TRL would load
        # its own reference by hub id; the reference log-probabilities go in through the
        # inputs instead, as TRL's own generation step computes them.
        beta=0.0,
        epsilon=0.2,
        epsilon_high=0.28,
        temperature=TEMPERATURE,
        num_generations=3,
        per_device_train_batch_size=6,
        use_cpu=True,
        bf16=False,
        report_to=[],
        save_strategy="no",
        activation_checkpointing=False,  # TRL's default is on; same numbers, slower
    )
    trl = GRPOTrainer(
        model=tiny_model,
        reward_funcs=lambda completions, **_: [0.0] * len(completions),
        args=config,
        train_dataset=Dataset.from_list([{"prompt": "x"}] * 6),
        processing_class=tok,
    )
    trl.beta = beta
    trl.current_gradient_accumulation_steps = 1
    inputs = _trl_inputs(groups, tok.pad_token_id)
    if beta:
        inputs["ref_per_token_logps"] = _ref_logps(ours.ref_model, inputs)
    tiny_model.train()
    tiny_model.zero_grad()
    trl_loss = trl._compute_loss(tiny_model, inputs)
    trl_loss.backward()

    assert losses.loss == pytest.approx(trl_loss.item(), abs=1e-6)
    assert losses.pg_tokens == float(inputs["completion_mask"].sum())
    worst = max(
        float((ours_grads[n] - p.grad).abs().max()) for n, p in tiny_model.named_parameters()
    )
    assert worst < 1e-6, f"largest gradient difference {worst:.2e}"
    assert any(float(g.abs().max()) > 1e-4 for g in ours_grads.values())  # not all zero
