"""Model FLOPs of a Qwen3-VL LoRA step: the count behind gpu_step.py's MFU and `rmsweb plan`.

Per token of a sequence of length s (derivation):
- a linear layer with N weights costs 2N forward. Backward costs 2N for the input
  gradient and 2N for the weight gradient, but a frozen LoRA base computes only the
  input gradient: 4N per token in training, not full fine-tuning's 6N. The adapters
  (N_lora weights, trainable) cost the full 6 N_lora. The LM head is frozen too: 4N.
- causal attention: QK^T and AV are 2 * s * H * d each per token, half the positions
  masked on average; backward needs the gradients of Q, K, V and the scores (two
  matmuls per forward one): 3x forward, weights or not.
- the vision tower gets no gradient (no adapters, pixels need none): forward only,
  full (not causal) attention over the patches.
- the LM head runs on every token in SFT and only on the completion tokens in RL.
Gradient checkpointing recomputes the forward: hardware work, not model FLOPs, so it
lowers MFU, as it should. `prompt` in the RL count is the whole prompt, its image
tokens included (they are positions of the prompt: counted once).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Qwen3-VL-8B-Instruct's config.json (the shape only; gpu_step builds it with random weights).
TEXT_8B = {
    "vocab_size": 151936,
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 262144,
    "rope_parameters": {
        "rope_type": "default",
        "rope_theta": 5_000_000.0,
        "mrope_section": [24, 20, 20],
        "mrope_interleaved": True,
    },
}
VISION_8B = {
    "depth": 27,
    "hidden_size": 1152,
    "intermediate_size": 4304,
    "num_heads": 16,
    "patch_size": 16,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "out_hidden_size": 4096,
    "num_position_embeddings": 2304,
    "deepstack_visual_indexes": [8, 16, 24],
}
# Qwen3-VL-32B-Instruct: 64 layers of 5120, 64 query / 8 KV heads of 128, FFN 25600; the
# same vision tower projecting to 5120.
TEXT_32B = {
    **TEXT_8B,
    "hidden_size": 5120,
    "intermediate_size": 25600,
    "num_hidden_layers": 64,
    "num_attention_heads": 64,
}
VISION_32B = {**VISION_8B, "out_hidden_size": 5120}
KNOWN_MODELS = {
    "Qwen/Qwen3-VL-8B-Instruct": (TEXT_8B, VISION_8B),
    "Qwen/Qwen3-VL-32B-Instruct": (TEXT_32B, VISION_32B),
}
# Dense bf16 datasheet peaks (TFLOP/s, no sparsity), matched against the device name.
DATASHEET_TFLOPS = {"H200": 989.4, "H100": 989.4, "A100": 312.0, "L40S": 362.1, "A10G": 70.0}


@dataclass
class Shape:
    """FLOP-relevant sizes of a model."""

    text_linear: int  # weights of the decoder layers' linear maps
    head: int  # LM head weights
    vision_linear: int  # vision tower + merger linear weights
    lora: int
    layers: int
    attn_width: int  # query heads x head dim
    vision_layers: int
    vision_width: int


def shape_from_config(
    text: dict[str, Any], vision: dict[str, Any] | None, lora_rank: int, targets: list[str]
) -> Shape:
    """The Shape of a Qwen3(-VL) config without building it (LoRA on `targets`)."""
    h, ffn, n_layers = text["hidden_size"], text["intermediate_size"], text["num_hidden_layers"]
    d = text.get("head_dim") or h // text["num_attention_heads"]
    q, kv = text["num_attention_heads"] * d, text["num_key_value_heads"] * d
    proj = {  # (in, out) of each linear map of a decoder layer
        "q_proj": (h, q),
        "k_proj": (h, kv),
        "v_proj": (h, kv),
        "o_proj": (q, h),
        "gate_proj": (h, ffn),
        "up_proj": (h, ffn),
        "down_proj": (ffn, h),
    }
    text_linear = n_layers * sum(i * o for i, o in proj.values())
    lora = n_layers * sum(lora_rank * (proj[t][0] + proj[t][1]) for t in targets)
    vision_linear, v_layers, v_width = 0, 0, 0
    if vision:
        v_width, v_ffn, v_layers = (
            vision["hidden_size"],
            vision["intermediate_size"],
            vision["depth"],
        )
        block = 3 * v_width * v_width + v_width * v_width + 2 * v_width * v_ffn
        merged = v_width * vision["spatial_merge_size"] ** 2
        merger = merged * merged + merged * vision["out_hidden_size"]
        n_mergers = 1 + len(vision.get("deepstack_visual_indexes") or [])
        vision_linear = v_layers * block + n_mergers * merger
    return Shape(
        text_linear=text_linear,
        head=text["vocab_size"] * h,
        vision_linear=vision_linear,
        lora=lora,
        layers=n_layers,
        attn_width=q,
        vision_layers=v_layers,
        vision_width=v_width,
    )


def attn_flops(layers: int, width: int, ctx_tokens: float, tokens: int, causal: bool) -> float:
    """Forward attention FLOPs: QK^T and AV, 2 * ctx * width each per token and layer."""
    ctx = ctx_tokens / 2 if causal else ctx_tokens
    return layers * tokens * 4 * ctx * width


def vision_forward(shape: Shape, patches: int) -> float:
    return 2 * shape.vision_linear * patches + attn_flops(
        shape.vision_layers, shape.vision_width, patches, patches, causal=False
    )


def train_flops(shape: Shape, tokens: int, head_tokens: int, patches: int) -> float:
    """One sequence's forward + backward with a frozen base and trainable adapters."""
    linear = 4 * (shape.text_linear * tokens + shape.head * head_tokens)  # 2N fwd + 2N input grad
    attention = 3 * attn_flops(shape.layers, shape.attn_width, tokens, tokens, causal=True)
    return linear + attention + 6 * shape.lora * tokens + vision_forward(shape, patches)


def sft_flops(shape: Shape, n: int, seq: int, patches: int) -> float:
    """n samples of seq tokens (image tokens among them), LM head on every token."""
    return n * train_flops(shape, seq, seq, patches)


def rollout_flops(shape: Shape, prompt: int, new: int, patches: int) -> float:
    """Sampling `new` tokens after a `prompt`-token prompt with a KV cache."""
    # Prefill (LM head on the last position only), then one token at a time attending to
    # everything before it (not causal-halved: a decode step sees its whole context).
    prefill = 2 * shape.text_linear * prompt + 2 * shape.head
    prefill += attn_flops(shape.layers, shape.attn_width, prompt, prompt, causal=True)
    decode = 2 * (shape.text_linear + shape.head) * new
    decode += attn_flops(shape.layers, shape.attn_width, prompt + new / 2, new, causal=False)
    return prefill + decode + vision_forward(shape, patches)


def rl_flops(shape: Shape, sequences: int, prompt: int, new: int, patches: int) -> float:
    """Rollout and update of `sequences` completions; `prompt` includes its image tokens."""
    update = train_flops(shape, prompt + new, new, patches)  # LM head on the completion only
    return sequences * (rollout_flops(shape, prompt, new, patches) + update)
