"""LoRA (PEFT) RL on the tiny Qwen3-VL with screenshots in the prompt; the merged result loads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from PIL import Image

from rmsweb.agents.prompt import PromptConfig, build_messages
from rmsweb.models.load import load_model
from rmsweb.train.salvage_ds.states import RLState
from rmsweb.train.salvage_ds.trainer import RLHyper, SalvageDSTrainer, algorithm

CORPUS = [
    f'Task: click the "{w}" button\n[{i}] button "{w}"\nAction: click({i})'
    for i, w in enumerate(["submit", "cancel", "ok", "next"] * 10)
]


@pytest.fixture(scope="module")
def vl_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rmsweb.models.config import TinySize
    from rmsweb.models.tiny import save_tiny_model

    out = tmp_path_factory.mktemp("tiny_vl_rl")
    # vocab 400: the corpus is small; the default TinySize is what the pipeline builds.
    save_tiny_model(out, "qwen3_vl", CORPUS, 400, TinySize(), seed=0)
    return out


def _states() -> list[RLState]:
    cfg = PromptConfig(system="none", screenshot=True)
    states = []
    for i, (word, color) in enumerate([("submit", (200, 30, 30)), ("ok", (30, 30, 200))]):
        image = Image.new("RGB", (96, 64), color)
        image.paste((255, 255, 255), (10, 10, 50, 30))
        messages = build_messages(
            f'Click the "{word}" button.', f'[{i + 2}] button "{word}"', [], cfg, with_image=True
        )
        states.append(RLState(f"vl{i}", messages, [f"click({i + 2})"], image=image))
    return states


def test_lora_on_tiny_vl(vl_dir: Path, tmp_path: Path, script_generation: Any) -> None:
    loaded = load_model(vl_dir)
    assert loaded.is_vl
    original = {n: p.detach().clone() for n, p in loaded.model.named_parameters()}
    hyper = RLHyper(
        steps=2,
        group_size=2,
        batch_size=4,
        learning_rate=5e-2,
        algorithm=algorithm("salvage_ds", anchor_weight=0.5),
        beta=0.05,  # the reference is the same network with adapters off
        max_new_tokens=4,  # shrunk: a random model; 4 tokens show generation runs
    )
    lora = {"r": 4, "lora_alpha": 8, "lora_dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
    trainer = SalvageDSTrainer(
        loaded.model,
        loaded.tokenizer,
        _states(),
        hyper,
        tmp_path / "work",
        processor=loaded.processor,
        is_vl=True,
        lora=lora,
    )
    # The prompt carries the screenshot: patches and the image placeholder tokens.
    prompt = trainer.encode(0)
    assert prompt.pixel_values is not None and prompt.image_grid_thw.tolist() == [[1, 4, 6]]
    image_token = loaded.processor.image_token_id
    assert int((prompt.input_ids == image_token).sum()) == 4 * 6 // 4
    # Real sampling with images works and is reproducible per (seed, step, round).
    sampled = trainer.generate([0, 1], 1, 0)
    assert len(sampled) == 4 and all(1 <= len(c) <= 4 for c in sampled)
    assert trainer.generate([0, 1], 1, 0) == sampled

    assert all("lora_" in n for n, p in trainer.model.named_parameters() if p.requires_grad)
    # State 0 has contrast (PG + KL), state 1 is always wrong (anchored, with its image).
    script_generation(trainer, [0.5, 0.0], exact=True)
    result = trainer.train()
    assert [r["accepted"] for r in result.curve] == [1, 1]
    assert all(r["anchor_loss"] > 0 and r["pg_loss"] == r["pg_loss"] for r in result.curve)
    assert result.curve[1]["kl"] > 0  # adapters moved the policy off its reference

    merged = trainer.final_model()
    assert not any("lora_" in n for n, _ in merged.named_parameters())
    changed = [n for n, p in merged.named_parameters() if not torch.equal(p, original[n])]
    assert changed and all("q_proj" in n or "v_proj" in n for n in changed)
    out = tmp_path / "model"
    merged.save_pretrained(out)
    loaded.processor.save_pretrained(out)
    again = load_model(out)  # what eval's checkpoint policy does
    assert again.is_vl
    for n, p in again.model.named_parameters():
        assert torch.equal(p, dict(merged.named_parameters())[n])
