"""Tiny random Qwen3-VL models (text + image), built offline from a config."""

from __future__ import annotations

from typing import Any

from .config import TinySize, text_config


def _mrope_section(head_dim: int) -> list[int]:
    """Qwen3-VL splits half the head dim over (time, height, width): e.g. 8 -> [2, 3, 3]."""
    half = head_dim // 2
    t = half // 4
    h = (half - t) // 2
    return [t, h, half - t - h]


def build_vl_model(tokenizer: Any, size: TinySize, seed: int) -> Any:
    import torch
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    torch.manual_seed(seed)
    text = text_config(tokenizer, size)
    text["rope_parameters"] = {
        "rope_type": "default",
        "rope_theta": 10000.0,
        "mrope_section": _mrope_section(size.head_dim),
        "mrope_interleaved": True,
    }
    vision_heads = max(1, size.vision_hidden_size // 16)
    # DeepStack adds features of intermediate vision layers to the hidden states of the
    # first text layers, at image positions only. Injected after the last text layer they
    # reach only the logits of image tokens, which carry no loss: dead weights. So at most
    # num_layers - 1 of them, from vision layers before the last (as the real models do).
    n_deepstack = max(0, min(size.vision_depth - 1, size.num_layers - 1, 3))
    config = Qwen3VLConfig(
        text_config=text,
        vision_config={
            "depth": size.vision_depth,
            "hidden_size": size.vision_hidden_size,
            "intermediate_size": size.vision_hidden_size * 2,
            "num_heads": vision_heads,
            "patch_size": size.patch_size,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "out_hidden_size": size.hidden_size,
            "num_position_embeddings": 256,
            "deepstack_visual_indexes": list(range(n_deepstack)),
        },
        image_token_id=tokenizer.convert_tokens_to_ids("<|image_pad|>"),
        video_token_id=tokenizer.convert_tokens_to_ids("<|video_pad|>"),
        vision_start_token_id=tokenizer.convert_tokens_to_ids("<|vision_start|>"),
        vision_end_token_id=tokenizer.convert_tokens_to_ids("<|vision_end|>"),
        tie_word_embeddings=True,
    )
    return Qwen3VLForConditionalGeneration(config)
