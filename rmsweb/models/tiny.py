"""Tiny random Qwen3 / Qwen3-VL models, built offline from a config (nothing downloaded).

They are normal Hugging Face folders (config.json, model.safetensors, tokenizer
files, and for VL a processor), so every loader that takes a hub id also takes
them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .config import TinySize, text_config
from .vl import build_vl_model


def build_text_model(tokenizer: Any, size: TinySize, seed: int) -> Any:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    if size.copy_head:
        from .copy_head import copy_classes

        config_cls, model_cls = copy_classes()
        return model_cls(config_cls(**text_config(tokenizer, size)))
    config = Qwen3Config(**text_config(tokenizer, size))
    return Qwen3ForCausalLM(config)


def count_parameters(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())


def save_tiny_model(
    out_dir: Path, arch: str, texts: list[str], vocab_size: int, size: TinySize, seed: int
) -> dict[str, Any]:
    """Train the tokenizer, build the model and save both as a Hugging Face folder."""
    from .tokenizer import train_tokenizer

    tokenizer = train_tokenizer(texts, vocab_size)
    out_dir.mkdir(parents=True, exist_ok=True)
    if arch == "qwen3":
        model = build_text_model(tokenizer, size, seed)
        model.save_pretrained(out_dir)
        tokenizer.save_pretrained(out_dir)
    elif arch == "qwen3_vl":
        if size.copy_head:
            raise ValueError("the copy head is built for arch qwen3 only")
        from .processor import make_processor  # imports transformers: only when needed

        model = build_vl_model(tokenizer, size, seed)
        model.save_pretrained(out_dir)
        make_processor(tokenizer, patch_size=size.patch_size).save_pretrained(out_dir)
    else:
        raise ValueError(f"unknown tiny arch {arch!r}")
    model.generation_config.save_pretrained(out_dir)
    return {"params": count_parameters(model), "vocab_size": len(tokenizer), "arch": arch}
