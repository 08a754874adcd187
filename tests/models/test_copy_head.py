"""The copy head: a proper distribution, pointing at successors, the same under cached
generation as in one forward, saved and loaded like any model, and it learns to copy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from rmsweb.models.config import TinySize
from rmsweb.models.copy_head import MODEL_TYPE, copy_classes
from rmsweb.models.load import load_model
from rmsweb.models.tiny import save_tiny_model

VOCAB = 40
PAD = 0


def _model(seed: int = 0, copy: bool = True) -> Any:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config_cls, model_cls = copy_classes() if copy else (Qwen3Config, Qwen3ForCausalLM)
    # The shape of TinySize at width 32 (text_config needs a tokenizer; this needs none).
    size = TinySize(hidden_size=32, intermediate_size=64, head_dim=8)
    shape = {"hidden_size": size.hidden_size, "intermediate_size": size.intermediate_size}
    shape |= {"num_hidden_layers": size.num_layers, "head_dim": size.head_dim}
    shape |= {"num_attention_heads": size.num_heads, "num_key_value_heads": size.num_kv_heads}
    ids = {"pad_token_id": PAD, "eos_token_id": 1, "bos_token_id": None}
    config = config_cls(
        vocab_size=VOCAB, max_position_embeddings=128, tie_word_embeddings=True, **shape, **ids
    )
    return model_cls(config)


def _left_padded() -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(2, VOCAB, (2, 10), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    ids[0, :3], mask[0, :3] = PAD, 0
    return ids, mask


def test_log_probs_are_a_distribution() -> None:
    ids, mask = _left_padded()
    with torch.no_grad():
        log_probs = _model()(input_ids=ids, attention_mask=mask).logits
    assert log_probs.shape == (2, 10, VOCAB)
    assert torch.allclose(log_probs.exp().sum(-1)[mask.bool()], torch.ones(17), atol=1e-5)
    # log_softmax of the returned logits is themselves: losses and samplers see p unchanged
    assert torch.allclose(torch.log_softmax(log_probs, -1), log_probs, atol=1e-5)


def test_pointer_emits_the_successor_of_real_earlier_positions() -> None:
    model = _model().eval()
    with torch.no_grad():  # all copy, uniform pointer: p(v) = share of sources followed by v
        model.copy_gate.weight.zero_()
        model.copy_gate.bias.fill_(-60.0)
        model.copy_query.weight.zero_()
    ids = torch.tensor([[PAD, PAD, 5, 7, 5, 9, 5]])
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1]])
    with torch.no_grad():
        p = model(input_ids=ids, attention_mask=mask).logits.exp()[0]
    # at the last position the sources are 2..5 (pads and the last have no known successor):
    # 5->7, 7->5, 5->9, 9->5
    assert p[-1, 7] == pytest.approx(0.25, abs=1e-4)
    assert p[-1, 9] == pytest.approx(0.25, abs=1e-4)
    assert p[-1, 5] == pytest.approx(0.5, abs=1e-4)
    # at position 3 only source 2 (5->7) is earlier: the pointer cannot see ahead
    assert p[3, 7] == pytest.approx(1.0, abs=1e-4)
    # the first real position has nothing to copy: the vocabulary alone
    assert p[2].sum() == pytest.approx(1.0, abs=1e-4) and p[2].max() < 0.9


def test_cached_generation_scores_equal_one_forward() -> None:
    model = _model().eval()
    ids, mask = _left_padded()
    out = model.generate(
        input_ids=ids,
        attention_mask=mask,
        max_new_tokens=5,
        do_sample=False,
        output_scores=True,
        return_dict_in_generate=True,
        pad_token_id=PAD,
    )
    full_mask = torch.cat([mask, torch.ones(2, 5, dtype=mask.dtype)], dim=1)
    positions = (full_mask.cumsum(-1) - 1).clamp_min(0)
    with torch.no_grad():
        ref = model(input_ids=out.sequences, attention_mask=full_mask, position_ids=positions)
    for k, scores in enumerate(out.scores):
        assert torch.allclose(scores, ref.logits[:, ids.shape[1] + k - 1], atol=1e-4)


def test_saved_and_loaded_like_any_tiny_model(tmp_path: Path) -> None:
    corpus = [f'fill(1, "{w}") Task: enter "{w}"' for w in ["alpha", "beta", "gamma"] * 20]
    info = save_tiny_model(tmp_path, "qwen3", corpus, 300, TinySize(copy_head=True), seed=0)
    loaded = load_model(tmp_path, device="cpu")
    assert loaded.model.config.model_type == MODEL_TYPE
    assert sum(p.numel() for p in loaded.model.parameters()) == info["params"]
    enc = loaded.tokenizer(['Task: enter "gamma" fill(1, "'], return_tensors="pt")
    again = load_model(tmp_path, device="cpu").model
    with torch.no_grad():
        assert torch.equal(loaded.model(**enc).logits, again(**enc).logits)
    with pytest.raises(ValueError, match="qwen3 only"):
        save_tiny_model(tmp_path / "vl", "qwen3_vl", corpus, 300, TinySize(copy_head=True), 0)


def _copy_batch(gen: torch.Generator, n: int = 32, length: int = 5) -> tuple[Any, Any, Any]:
    """Noise of random length, a quote, a random value, a quote, the value again.

    Only copying by content predicts the second value: its offset varies, so a fixed
    position does not find it. The opening quote gives the value's first token a position
    to be the successor of. Returns the ids, the labels and where the copied value starts.
    """
    max_noise = 8
    rows, starts = [], []
    for _ in range(n):
        noise = int(torch.randint(0, max_noise + 1, (1,), generator=gen))
        value = torch.randint(3, VOCAB, (length,), generator=gen).tolist()
        filler = torch.randint(3, VOCAB, (noise,), generator=gen).tolist()
        rows.append(filler + [2] + value + [2] + value + [PAD] * (max_noise - noise))
        starts.append(noise + length + 2)
    ids = torch.tensor(rows)
    return ids, ids.masked_fill(ids == PAD, -100), torch.tensor(starts)


def _copy_accuracy(model: Any, steps: int, length: int = 5) -> float:
    gen = torch.Generator().manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        ids, labels, _ = _copy_batch(gen)
        loss = model(input_ids=ids, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    ids, _, starts = _copy_batch(torch.Generator().manual_seed(99), n=64)
    with torch.no_grad():
        guess = model(input_ids=ids).logits.argmax(-1)
    # the position before each copied token predicts it
    at = starts[:, None] + torch.arange(length)[None, :]
    predicted = guess.gather(1, at - 1)
    return (predicted == ids.gather(1, at)).float().mean().item()


@pytest.mark.slow  # 2 x 150 training steps: a learning test, about 40 s
def test_copy_head_learns_to_copy_where_the_plain_model_has_not_yet() -> None:
    torch.set_num_threads(2)
    with_head = _copy_accuracy(_model(copy=True), steps=150)
    plain = _copy_accuracy(_model(copy=False), steps=150)
    print(f"copy accuracy after 150 steps: {with_head:.2f} with the head, {plain:.2f} without")
    assert with_head > 0.9
    assert plain < with_head - 0.3
