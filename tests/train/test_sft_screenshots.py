"""SFT trains on the screenshot the policy sees: samples carry it, the VL processor encodes it."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from PIL import Image

from rmsweb.agents.prompt import PromptConfig, build_messages
from rmsweb.env.actions import ActionRow
from rmsweb.models.config import TinySize
from rmsweb.store.rows import EpisodeRecord, EpisodeRow, ScreenshotRow, StepRow
from rmsweb.train.sft.samples import Sample, build_samples
from rmsweb.train.sft.trainer import SFTHyper, train_sft

HYPER = SFTHyper(
    max_steps=1,
    batch_size=1,
    grad_accum=1,
    learning_rate=1e-3,
    lr_scheduler="constant",
    warmup_ratio=0.0,
    min_lr_ratio=0.1,
    weight_decay=0.0,
    adam_beta1=0.9,
    adam_beta2=0.95,
    max_grad_norm=1.0,
    max_seq_len=512,
    save_steps=100,
    logging_steps=1,
    val_fraction=0.0,
    precision="fp32",
    gradient_checkpointing=False,
    seed=0,
)
CORPUS = [f'Task: click the "{w}" button\n[{i}] button "{w}"' for i, w in enumerate(["ok"] * 20)]


def _png(color: tuple[int, int, int]) -> bytes:
    image = Image.new("RGB", (64, 64), color)
    image.paste((255, 255, 255), (8, 8, 40, 24))
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def vl_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rmsweb.models.tiny import save_tiny_model

    out = tmp_path_factory.mktemp("tiny_vl_sft")
    save_tiny_model(out, "qwen3_vl", CORPUS, 400, TinySize(), seed=0)
    return out


def _first_loss(vl_dir: Path, sample: Sample, work: Path) -> float:
    from transformers import AutoModelForImageTextToText

    from rmsweb.models.processor import load_processor

    torch.manual_seed(0)
    model = AutoModelForImageTextToText.from_pretrained(vl_dir, dtype=torch.float32)
    processor = load_processor(vl_dir)
    _, history = train_sft(
        model, processor.tokenizer, [sample], HYPER, work, plain_loss=True, processor=processor
    )
    return next(h["loss"] for h in history if "loss" in h)


def test_two_samples_differing_only_in_the_screenshot_give_different_losses(
    vl_dir: Path, tmp_path: Path
) -> None:
    torch.set_num_threads(1)
    messages = build_messages(
        'Click the "ok" button.', '[2] button "ok"', [], PromptConfig(system="none"),
        with_image=True,
    )  # fmt: skip
    red = Sample("t", 0, 0, messages, "Action: click(2)", "red", _png((220, 20, 20)))
    blue = replace(red, screenshot="blue", screenshot_png=_png((20, 20, 220)))
    loss_red = _first_loss(vl_dir, red, tmp_path / "red")
    loss_red_again = _first_loss(vl_dir, red, tmp_path / "red2")
    loss_blue = _first_loss(vl_dir, blue, tmp_path / "blue")
    assert loss_red == pytest.approx(loss_red_again, abs=1e-6)  # deterministic: same sample
    assert abs(loss_red - loss_blue) > 1e-5  # only the pixels differ


def test_screenshot_samples_need_the_processor(tmp_path: Path) -> None:
    sample = Sample("t", 0, 0, [{"role": "user", "content": "x"}], "Action: noop()", "a", b"png")
    tok: Any = object()
    with pytest.raises(ValueError, match="VL processor"):
        train_sft(None, tok, [sample], HYPER, tmp_path)


def test_samples_carry_the_step_screenshot_when_the_prompt_shows_it() -> None:
    ep = EpisodeRow("e", "r", "collect", "miniwob", "t", 0, "train", "expert", 0, True)
    ep.n_steps, ep.instruction = 1, "Click ok"
    step = StepRow(
        "e", 0, "u", '[2] button "ok"', "sha-a", "click(2)", ActionRow("click", "2"),
        True, None, 0.0, True, 0.0,
    )  # fmt: skip
    rec = EpisodeRecord(ep, [step], [ScreenshotRow("sha-a", b"PNG-A", 64, 64)])
    shown = build_samples([rec], PromptConfig(system="none", screenshot=True), len)
    assert (shown[0].screenshot, shown[0].screenshot_png) == ("sha-a", b"PNG-A")
    assert shown[0].messages[-1]["content"][0] == {"type": "image"}
    hidden = build_samples([rec], PromptConfig(system="none"), len)
    assert hidden[0].screenshot_png is None and isinstance(hidden[0].messages[-1]["content"], str)
