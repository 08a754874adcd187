"""Tiny random Qwen3 / Qwen3-VL models, built offline from a config (nothing downloaded).

They are normal Hugging Face folders (config.json, model.safetensors, tokenizer
files, and for VL a processor), so every loader that takes a hub id also takes
them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class TinySize:
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 16
    intermediate_size: int = 192
    max_position_embeddings: int = 2048
    vision_depth: int = 2
    vision_hidden_size: int = 32
    patch_size: int = 16


def _text_config(tokenizer: Any, size: TinySize) -> dict[str, Any]:
    return {
        "vocab_size": len(tokenizer),
        "hidden_size": size.hidden_size,
        "intermediate_size": size.intermediate_size,
        "num_hidden_layers": size.num_layers,
        "num_attention_heads": size.num_heads,
        "num_key_value_heads": size.num_kv_heads,
        "head_dim": size.head_dim,
        "max_position_embeddings": size.max_position_embeddings,
        "tie_word_embeddings": True,  # halves the parameters of a vocab-dominated tiny model
        "pad_token_id": tokenizer.pad_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "bos_token_id": None,
    }


def build_text_model(tokenizer: Any, size: TinySize, seed: int) -> Any:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(**_text_config(tokenizer, size))
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
        from .processor import make_processor
        from .vl import build_vl_model

        model = build_vl_model(tokenizer, size, seed)
        model.save_pretrained(out_dir)
        make_processor(tokenizer, patch_size=size.patch_size).save_pretrained(out_dir)
    else:
        raise ValueError(f"unknown tiny arch {arch!r}")
    model.generation_config.save_pretrained(out_dir)
    return {"params": count_parameters(model), "vocab_size": len(tokenizer), "arch": arch}
