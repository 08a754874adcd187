"""VL LoRA SFT and RL on CUDA: the tiny Qwen3-VL with screenshots, trained on the GPU.

GPU only (`-m gpu`; benchmarks/gpu_smoke.sh runs them). They look for device-specific
bugs (a tensor left on the CPU, an image that never reaches the vision tower on CUDA),
so they fail here rather than at scale:
- SFT: LoRA SFT in bf16 with gradient checkpointing runs on the GPU, its loss depends
  on the screenshot's pixels (two samples differing only there differ), and the
  adapters move;
- RL: a Salvage-DS step on scripted completions gives the CPU's losses and weights;
  real sampling with images runs on the GPU and is reproducible; the merged model
  saves and loads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.gpu

LORA = {"r": 8, "lora_alpha": 16, "lora_dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
CORPUS = [
    f'Task: click the "{w}" button\n[{i}] button "{w}"\nAction: click({i})'
    for i, w in enumerate(["submit", "cancel", "ok", "next"] * 10)
]


@pytest.fixture(scope="module")
def cuda() -> Any:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    return torch


@pytest.fixture(scope="module")
def vl_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rmsweb.models.config import TinySize
    from rmsweb.models.tiny import save_tiny_model

    out = tmp_path_factory.mktemp("tiny_vl_gpu")
    save_tiny_model(out, "qwen3_vl", CORPUS, 400, TinySize(), seed=0)  # the pipeline's size
    return out


def _image(color: tuple[int, int, int]) -> Any:
    from PIL import Image

    image = Image.new("RGB", (96, 64), color)
    image.paste((255, 255, 255), (10, 10, 50, 30))
    return image


def _png(color: tuple[int, int, int]) -> bytes:
    import io

    buf = io.BytesIO()
    _image(color).save(buf, format="PNG")
    return buf.getvalue()


# --------------------------------------------------------------------------- SFT


def _sft(vl_dir: Path, work: Path, color: tuple[int, int, int]) -> tuple[float, float]:
    """First-step loss and how far the adapters moved: LoRA SFT (HF's Trainer, which takes
    the GPU when there is one) on one sample whose screenshot is `color`."""
    import torch
    from transformers import AutoModelForImageTextToText

    from rmsweb.agents.prompt import PromptConfig, build_messages
    from rmsweb.models.processor import load_processor
    from rmsweb.train.sft.samples import Sample
    from rmsweb.train.sft.trainer import SFTHyper, train_sft

    hyper = SFTHyper(
        max_steps=2, batch_size=1, grad_accum=1, learning_rate=1e-2, lr_scheduler="constant",
        warmup_ratio=0.0, min_lr_ratio=0.1, weight_decay=0.0, adam_beta1=0.9, adam_beta2=0.95,
        max_grad_norm=1.0, max_seq_len=512, save_steps=100, logging_steps=1, val_fraction=0.0,
        precision="bf16", gradient_checkpointing=True, seed=0,
    )  # fmt: skip
    messages = build_messages(
        'Click the "ok" button.', '[2] button "ok"', [], PromptConfig(system="none"),
        with_image=True,
    )  # fmt: skip
    sample = Sample("t", 0, 0, messages, "Action: click(2)", str(color), _png(color))
    torch.manual_seed(0)
    model = AutoModelForImageTextToText.from_pretrained(vl_dir, dtype=torch.float32)
    processor = load_processor(vl_dir)
    trained, history = train_sft(
        model, processor.tokenizer, [sample], hyper, work, lora=dict(LORA), processor=processor
    )
    params = dict(trained.named_parameters())
    assert {p.device.type for p in params.values()} == {"cuda"}  # the Trainer took the GPU
    moved = sum(float(p.detach().abs().sum()) for n, p in params.items() if "lora_B" in n)
    return next(h["loss"] for h in history if "loss" in h), moved


def test_vl_lora_sft_on_cuda_sees_the_screenshot(cuda: Any, vl_dir: Path, tmp_path: Path) -> None:
    red, moved = _sft(vl_dir, tmp_path / "red", (220, 20, 20))
    red_again, _ = _sft(vl_dir, tmp_path / "red2", (220, 20, 20))
    blue, _ = _sft(vl_dir, tmp_path / "blue", (20, 20, 220))
    assert red == pytest.approx(red_again, rel=1e-3)  # the same sample, the same loss
    assert abs(red - blue) > 1e-4  # only the pixels differ: the image reached the model
    assert moved > 0  # lora_B starts at zero: the GPU steps trained the adapters


# --------------------------------------------------------------------------- RL


def _states() -> list[Any]:
    from rmsweb.agents.prompt import PromptConfig, build_messages
    from rmsweb.train.salvage_ds.states import RLState

    cfg = PromptConfig(system="none", screenshot=True)
    out = []
    for i, (word, color) in enumerate([("submit", (200, 30, 30)), ("ok", (30, 30, 200))]):
        messages = build_messages(
            f'Click the "{word}" button.', f'[{i + 2}] button "{word}"', [], cfg, with_image=True
        )
        out.append(RLState(f"vl{i}", messages, [f"click({i + 2})"], image=_image(color)))
    return out


def _rl_trainer(vl_dir: Path, work: Path, device: str, steps: int = 1) -> Any:
    from rmsweb.models.load import load_model
    from rmsweb.train.salvage_ds.trainer import RLHyper, SalvageDSTrainer, algorithm

    loaded = load_model(vl_dir, dtype="float32", device=device)
    hyper = RLHyper(
        steps=steps,
        group_size=2,
        batch_size=4,
        learning_rate=5e-2,
        algorithm=algorithm("salvage_ds", anchor_weight=0.5),
        beta=0.05,  # the KL reference: the same network with the adapters off
        max_new_tokens=6,
        micro_batch_size=2,
        gradient_checkpointing=True,
        kl_probe_states=2,
    )
    return SalvageDSTrainer(
        loaded.model,
        loaded.tokenizer,
        _states(),
        hyper,
        work,
        processor=loaded.processor,
        is_vl=True,
        lora=dict(LORA),
    )


def test_vl_lora_rl_step_on_cuda_matches_cpu(
    cuda: Any, vl_dir: Path, tmp_path: Path, script_generation: Any
) -> None:
    rows, weights = {}, {}
    for device in ("cuda", "cpu"):
        trainer = _rl_trainer(vl_dir, tmp_path / device, device)
        assert trainer._device().type == device
        script_generation(trainer, [0.5, 0.5], exact=True)  # the same groups on both devices
        rows[device] = trainer.train_step(1)
        weights[device] = {
            n: p.detach().cpu() for n, p in trainer.model.named_parameters() if p.requires_grad
        }
    for key in ("pg_loss", "anchor_loss", "loss", "kl", "grad_norm"):
        assert rows["cuda"][key] == pytest.approx(rows["cpu"][key], rel=1e-3, abs=1e-5), key
    for name, w in weights["cpu"].items():
        assert cuda.allclose(weights["cuda"][name], w, atol=1e-4), name


def test_vl_lora_rl_samples_with_images_on_cuda(cuda: Any, vl_dir: Path, tmp_path: Path) -> None:
    trainer = _rl_trainer(vl_dir, tmp_path / "work", "cuda", steps=2)
    sampled = trainer.generate([0, 1], 1, 0)
    assert len(sampled) == 4 and all(1 <= len(c) <= 6 for c in sampled)
    assert trainer.generate([0, 1], 1, 0) == sampled  # seeded per (seed, step, round)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_B" in n}
    result = trainer.train()  # real sampling, update, KL probe and checkpoint on the GPU
    assert len(result.curve) == 2
    assert all(r["kl_to_sft"] == r["kl_to_sft"] for r in result.curve[-1:])  # not NaN
    moved = [
        n for n, p in trainer.model.named_parameters() if n in before and not p.equal(before[n])
    ]
    assert moved or not any(r["updated"] for r in result.curve)
    out = tmp_path / "model"
    trainer.final_model().save_pretrained(out)
    from rmsweb.models.load import load_model

    assert load_model(out, dtype="float32", device="cuda").is_vl
