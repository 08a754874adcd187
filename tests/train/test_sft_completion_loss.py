"""The completion-positions loss is the model's own causal-LM loss, value and gradient
(with and without the copy head), and only bare causal LMs take it."""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from rmsweb.models.copy_head import copy_classes
from rmsweb.train.sft.completion_loss import completion_loss, supports_completion_loss


def _tiny(copy_head: bool = False) -> Qwen3ForCausalLM:
    torch.manual_seed(0)
    config_cls, model_cls = copy_classes() if copy_head else (Qwen3Config, Qwen3ForCausalLM)
    config = config_cls(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=128,
        tie_word_embeddings=True,
    )
    return model_cls(config)


def _batch() -> dict[str, torch.Tensor]:
    """Right-padded rows of different lengths, labels on each row's last few tokens."""
    torch.manual_seed(1)
    lengths, width = [20, 13, 17], 20
    ids = torch.randint(3, 97, (3, width))
    mask = (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).long()
    labels = torch.full_like(ids, -100)
    for row, (n, k) in enumerate(zip(lengths, [4, 6, 1], strict=True)):
        labels[row, n - k : n] = ids[row, n - k : n]
    ids = ids.masked_fill(mask == 0, 0)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def _grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("copy_head", [False, True], ids=["plain", "copy-head"])
@pytest.mark.parametrize("num_items", [None, 7])
def test_same_loss_and_gradients_as_the_models_own(num_items: int | None, copy_head: bool) -> None:
    model, batch = _tiny(copy_head), _batch()
    kwargs = {} if num_items is None else {"num_items_in_batch": torch.tensor(num_items)}
    reference = model(**batch, **kwargs).loss
    reference.backward()
    expected = _grads(model)
    model.zero_grad()
    loss = completion_loss(model, batch, kwargs.get("num_items_in_batch"))
    loss.backward()
    assert torch.allclose(loss, reference, atol=1e-6), (loss, reference)
    got = _grads(model)
    assert expected.keys() == got.keys()
    if copy_head:  # the copy head itself is trained, not only the decoder and vocabulary head
        assert {"copy_query.weight", "copy_key.weight", "copy_gate.weight"} <= got.keys()
    for name, grad in expected.items():
        assert torch.allclose(got[name], grad, atol=1e-6, rtol=1e-4), name


def test_a_wrong_label_changes_it() -> None:
    # The loss reads the labels it claims to: moving one label changes the value.
    model, batch = _tiny(), _batch()
    before = completion_loss(model, batch).item()
    batch["labels"][0, -1] = (batch["labels"][0, -1] + 1) % 97
    assert completion_loss(model, batch).item() != pytest.approx(before)


def test_only_bare_causal_lms_take_it(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _tiny()
    assert supports_completion_loss(model)
    assert not supports_completion_loss(torch.nn.Linear(2, 2))  # no decoder or head
    from peft import LoraConfig, get_peft_model

    lora = get_peft_model(_tiny(), LoraConfig(task_type="CAUSAL_LM", r=2))
    assert not supports_completion_loss(lora)
    model.config.final_logit_softcapping = 30.0
    assert not supports_completion_loss(model)
    # Under several ranks (DDP, FSDP2) the wrapper's own forward must run.
    import torch.distributed as dist

    bare = _tiny()
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 2)
    assert not supports_completion_loss(bare)
