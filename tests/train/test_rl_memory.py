"""RL memory: micro-batched generate and update, checkpointing in the update, same gradients."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from rmsweb.train.salvage_ds.reward import Scored
from rmsweb.train.salvage_ds.trainer import RLHyper, SalvageDSTrainer, algorithm


def _model(tok: Any, lora: bool) -> Any:
    from rmsweb.models.config import TinySize
    from rmsweb.models.tiny import build_text_model

    model = build_text_model(tok, TinySize(hidden_size=32, intermediate_size=64), 0)
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(
            model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
        )
        for n, p in model.named_parameters():  # non-zero B: the adapters' gradient is not 0
            if "lora_B" in n:
                torch.nn.init.normal_(p, std=0.1, generator=torch.Generator().manual_seed(1))
    return model


def _grads(tok: Any, states: list, tmp: Path, lora: bool, **kw: Any) -> tuple[float, dict]:
    model = _model(tok, lora)
    hyper = RLHyper(
        steps=1,
        group_size=2,
        batch_size=4,
        learning_rate=1e-3,
        algorithm=algorithm("salvage_ds", anchor_weight=0.5),
        **kw,
    )
    trainer = SalvageDSTrainer(model, tok, states, hyper, tmp)
    layer_calls = []
    layer = next(m for n, m in model.named_modules() if n.endswith("layers.0.self_attn"))
    layer.register_forward_pre_hook(lambda *_: layer_calls.append(1))

    def group(index: int, outputs: list[str], rewards: list[float]) -> Any:
        comps = [
            tok(f"Action: {o}<|im_end|>", add_special_tokens=False)["input_ids"] for o in outputs
        ]
        scored = [Scored(r, r > 0, True) for r in rewards]
        return trainer.make_group(index, comps, [f"Action: {o}" for o in outputs], scored)

    pg = [
        group(0, ["click(2)", 'fill(3, "x y")'], [1.0, -1.0]),
        group(1, ["click(4)", "stop()"], [-1.0, 1.0]),
        group(3, ["click(5)", "click(2)"], [1.0, -1.0]),
    ]
    anchored = [group(2, ["click(9)", 'scroll("down")'], [-1.0, -1.0])]
    losses = trainer.loss_and_backward(pg, anchored)
    # Passes through layer 0 (its attention; transformers checkpoints the layer's forward): one per micro-batch, twice with checkpointing (recompute).
    chunk = kw.get("micro_batch_size") or 6
    passes = -(-6 // chunk) + 1  # the PG sequences' micro-batches + the anchor's one
    assert len(layer_calls) == passes * (2 if kw.get("gradient_checkpointing") else 1)
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    assert not model.is_activation_checkpointing  # left as found: sampling keeps its cache
    return losses.loss, grads


@pytest.mark.parametrize("lora", [False, True])
def test_micro_batched_checkpointed_update_gives_the_full_batch_gradient(
    tiny_tokenizer: Any, make_states: Any, tmp_path: Path, lora: bool
) -> None:
    states = make_states(4)
    full_loss, full = _grads(tiny_tokenizer, states, tmp_path / "a", lora)
    micro_loss, micro = _grads(
        tiny_tokenizer,
        states,
        tmp_path / "b",
        lora,
        micro_batch_size=2,
        gradient_checkpointing=True,
    )
    assert full and set(full) == set(micro)
    assert micro_loss == pytest.approx(full_loss, abs=1e-6)
    for name, g in full.items():
        assert torch.allclose(g, micro[name], atol=1e-6), name


def test_generation_is_split_into_micro_batches(
    tiny_tokenizer: Any, make_states: Any, tmp_path: Path
) -> None:
    model = _model(tiny_tokenizer, lora=False)
    hyper = RLHyper(
        steps=1, group_size=2, batch_size=8, learning_rate=1e-3,
        algorithm=algorithm("salvage_ds", anchor_weight=0.5), max_new_tokens=3,
        micro_batch_size=3, gradient_checkpointing=True,
    )  # fmt: skip
    trainer = SalvageDSTrainer(model, tiny_tokenizer, make_states(4), hyper, tmp_path)
    sizes = []
    real = model.generate

    def spy(**kw: Any) -> Any:
        sizes.append(kw["input_ids"].shape[0])
        return real(**kw)

    model.generate = spy
    out = trainer.generate([0, 1, 2, 3], step=0, round_=0)
    assert len(out) == 8 and sizes == [3, 3, 2]
