"""A tiny random Qwen3-VL built offline sees images, trains, reloads, and works with TRL's SFT."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from PIL import Image

from rmsweb.models.config import TinySize
from rmsweb.models.processor import ImageOnlyQwen3VLProcessor, load_processor, register
from rmsweb.models.tiny import save_tiny_model

CORPUS = [
    f'Task: click the "{w}" button\n[{i}] button "{w}"\n[{i + 1}] textbox "name"'
    for i, w in enumerate(["submit", "cancel", "ok", "next", "login", "search"] * 10)
]


@pytest.fixture(scope="module")
def vl_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.set_num_threads(2)
    out = tmp_path_factory.mktemp("tiny_vl")
    # vocab 400: the corpus is small; the default TinySize is the one the pipeline builds.
    info = save_tiny_model(out, "qwen3_vl", CORPUS, 400, TinySize(), seed=0)
    assert info["arch"] == "qwen3_vl" and info["params"] < 500_000
    return out


@pytest.fixture(scope="module")
def loaded(vl_dir: Path) -> tuple[Any, Any]:
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(vl_dir, dtype=torch.float32)
    return model, load_processor(vl_dir)


def _messages(with_image: bool, text: str = 'click the "submit" button') -> list[dict]:
    content: list[dict] = [{"type": "text", "text": text}]
    if with_image:
        content.insert(0, {"type": "image"})
    return [{"role": "user", "content": content}]


def _inputs(processor: Any, image: Image.Image | None) -> dict[str, torch.Tensor]:
    text = processor.apply_chat_template(
        _messages(image is not None), tokenize=False, add_generation_prompt=True
    )
    images = [image] if image is not None else None
    return dict(processor(text=[text], images=images, return_tensors="pt"))


def _image(color: tuple[int, int, int], size: tuple[int, int] = (160, 120)) -> Image.Image:
    image = Image.new("RGB", size, color)
    image.paste((255, 255, 255), (20, 20, 80, 50))  # a "button", so patches differ
    return image


def test_folder_is_a_normal_hf_folder(vl_dir: Path) -> None:
    names = {p.name for p in vl_dir.iterdir()}
    assert {"config.json", "model.safetensors", "processor_config.json", "tokenizer.json"} <= names
    assert "video_preprocessor_config.json" not in names  # image-only: no torchvision needed


def test_processor_adds_image_tokens(loaded: tuple[Any, Any]) -> None:
    _, processor = loaded
    assert isinstance(processor, ImageOnlyQwen3VLProcessor)
    with_image = _inputs(processor, _image((200, 30, 30)))
    without = _inputs(processor, None)
    assert "pixel_values" in with_image and "image_grid_thw" in with_image
    grid = with_image["image_grid_thw"][0].tolist()
    # 160x120 px -> patches of 16 -> (t, h, w) = (1, 8, 10); 2x2 patches merge into one token.
    assert grid == [1, 8, 10]
    n_image_tokens = int((with_image["input_ids"] == processor.image_token_id).sum())
    assert n_image_tokens == 8 * 10 // 4
    # The image costs its placeholder tokens plus <|vision_start|>/<|vision_end|>.
    extra = with_image["input_ids"].shape[1] - without["input_ids"].shape[1]
    assert extra == n_image_tokens + 2


def test_autoprocessor_after_register_and_text_models(vl_dir: Path, tmp_path: Path) -> None:
    from transformers import AutoProcessor

    register()
    assert isinstance(AutoProcessor.from_pretrained(vl_dir), ImageOnlyQwen3VLProcessor)
    text_dir = tmp_path / "text"
    save_tiny_model(text_dir, "qwen3", CORPUS, 400, TinySize(), seed=0)
    tokenizer = load_processor(text_dir)
    assert not isinstance(tokenizer, ImageOnlyQwen3VLProcessor)
    assert tokenizer.apply_chat_template(_messages(False), tokenize=False).startswith(
        "<|im_start|>"
    )


def test_forward_sees_the_image_and_generate_runs(loaded: tuple[Any, Any]) -> None:
    model, processor = loaded
    red = _inputs(processor, _image((200, 30, 30)))
    blue = _inputs(processor, _image((30, 30, 200)))
    with torch.no_grad():
        logits_red = model(**red).logits[0, -1]
        logits_blue = model(**blue).logits[0, -1]
        assert logits_red.shape == (len(processor.tokenizer),)
        # Same text, different pixels: the prediction must depend on the image.
        assert not torch.allclose(logits_red, logits_blue)
        out = model.generate(**red, max_new_tokens=4, do_sample=False)
    n_prompt = red["input_ids"].shape[1]
    assert n_prompt < out.shape[1] <= n_prompt + 4  # fewer only if it stopped at <|im_end|>


def test_training_step_changes_every_parameter(vl_dir: Path) -> None:
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(vl_dir, dtype=torch.float32)
    processor = load_processor(vl_dir)
    model.train()
    batch = _inputs(processor, _image((200, 30, 30)))
    labels = batch["input_ids"].clone()
    labels[labels == processor.image_token_id] = -100
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    loss = model(**batch, labels=labels).loss
    loss.backward()
    optimizer.step()
    unchanged = [n for n, p in model.named_parameters() if torch.equal(before[n], p.detach())]
    assert unchanged == []  # vision tower, merger and deepstack mergers all get gradient


def test_reload_gives_the_same_logits(
    vl_dir: Path, loaded: tuple[Any, Any], tmp_path: Path
) -> None:
    from transformers import AutoModelForImageTextToText

    model, processor = loaded
    model.save_pretrained(tmp_path / "copy")
    processor.save_pretrained(tmp_path / "copy")
    again = AutoModelForImageTextToText.from_pretrained(tmp_path / "copy", dtype=torch.float32)
    processor_again = load_processor(tmp_path / "copy")
    batch = _inputs(processor, _image((200, 30, 30)))
    batch_again = _inputs(processor_again, _image((200, 30, 30)))
    assert torch.equal(batch["input_ids"], batch_again["input_ids"])
    with torch.no_grad():
        assert torch.allclose(model(**batch).logits, again(**batch_again).logits, atol=1e-6)


def test_trl_sft_trainer_steps_on_image_conversations(vl_dir: Path, tmp_path: Path) -> None:
    """The SFT stage's shape: prompt/completion chats plus an `images` column."""
    from datasets import Dataset
    from transformers import AutoModelForImageTextToText
    from trl import SFTConfig, SFTTrainer

    from rmsweb.train.sft.trainer import _checkpointing_field

    model = AutoModelForImageTextToText.from_pretrained(vl_dir, dtype=torch.float32)
    processor = load_processor(vl_dir)
    rows = [
        {
            "prompt": _messages(True, f'click the "{w}" button'),
            "completion": [{"role": "assistant", "content": f"Action: click({i + 2})"}],
            "images": [_image(color, size)],
        }
        for i, (w, color, size) in enumerate(
            [("submit", (200, 30, 30), (160, 120)), ("cancel", (30, 200, 30), (128, 96))]
        )
    ]
    config = SFTConfig(
        output_dir=str(tmp_path / "sft"),
        max_steps=1,  # shrunk: one step shows the pipeline runs end to end
        per_device_train_batch_size=2,
        learning_rate=1e-2,
        completion_only_loss=True,
        max_length=256,  # as the SFT stage sets it; these samples are ~50 tokens
        bf16=False,  # TRL's default bf16 refuses to run on a CPU
        # TRL's default is on; pointless for a tiny model. The field's name depends on
        # transformers (5.2x renamed it): the GPU pins' older one too (.ci/run).
        **{_checkpointing_field(SFTConfig): False},
        save_strategy="no",
        report_to=[],
        dataloader_pin_memory=False,
        logging_steps=1,
    )
    trainer = SFTTrainer(
        model=model, args=config, train_dataset=Dataset.from_list(rows), processing_class=processor
    )
    batch = trainer.data_collator([dict(r) for r in rows])
    assert batch["pixel_values"].shape[0] == 8 * 10 + 6 * 8  # both images' patches
    assert int((batch["input_ids"] == processor.image_token_id).sum()) == (80 + 48) // 4
    # Loss on the completion only: "Action: click(n)" and <|im_end|>, never on the image.
    assert not bool((batch["labels"] == processor.image_token_id).any())
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 1 and losses[0] > 0
    unchanged = [n for n, p in trainer.model.named_parameters() if torch.equal(before[n], p)]
    assert unchanged == []


def test_rl_sampling_never_emits_a_vision_token(loaded: tuple[Any, Any]) -> None:
    """A sampled <|image_pad|> in a completion breaks the next forward pass ("Image
    features and image tokens do not match"): the RL trainer and its KL probe suppress
    the vision tokens. Control: a head that prefers <|image_pad|> emits it unsuppressed."""
    import copy

    from rmsweb.train.salvage_ds.trainer import vision_token_ids

    model, processor = loaded
    ids = vision_token_ids(processor.tokenizer)
    vocab = processor.tokenizer.get_vocab()
    assert vocab["<|image_pad|>"] in ids and vocab["<|vision_start|>"] in ids
    rigged = copy.deepcopy(model)
    head = torch.nn.Linear(rigged.lm_head.in_features, rigged.lm_head.out_features)
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()
        head.bias[vocab["<|image_pad|>"]] = 10.0  # every step prefers the image token
    rigged.lm_head = head
    text = _inputs(processor, None)
    n = text["input_ids"].shape[1]
    with torch.no_grad():
        plain = rigged.generate(**text, max_new_tokens=3, do_sample=False)
        safe = rigged.generate(**text, max_new_tokens=3, do_sample=False, suppress_tokens=ids)
    assert set(plain[0, n:].tolist()) == {vocab["<|image_pad|>"]}
    assert not set(safe[0, n:].tolist()) & set(ids)
