"""Sizes of the tiny random models and their text config (shared by the text and VL builders)."""

from __future__ import annotations

from dataclasses import dataclass, fields
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
    copy_head: bool = False  # qwen3 only: see copy_head.py

    @classmethod
    def of(cls, model: Any) -> TinySize:
        """The size fields of a tiny model's spec section (same names as here)."""
        return cls(**{f.name: getattr(model, f.name) for f in fields(cls)})


def text_config(tokenizer: Any, size: TinySize) -> dict[str, Any]:
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


def lora_kwargs(lora: Any) -> dict[str, Any] | None:
    """PEFT LoraConfig arguments from the spec's model.lora section (None: LoRA off)."""
    if not lora.enabled:
        return None
    return {
        "r": lora.rank,
        "lora_alpha": lora.alpha,
        "lora_dropout": lora.dropout,
        "target_modules": list(lora.targets),
    }
