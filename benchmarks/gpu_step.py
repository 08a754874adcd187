"""GPU step time of the paper's 8B setting: SFT and RL steps of a Qwen3-VL-8B-shaped model.

    python benchmarks/gpu_step.py                       # on a GPU (about 5 min on an H100/H200)
    python benchmarks/gpu_step.py --tiny --device cpu   # smoke run of the same code path

1. Builds a random model with Qwen3-VL-8B-Instruct's published shape (no download):
   text 36 layers, hidden 4096, 32 query / 8 KV heads of 128, FFN 12288, vocab
   151936; vision 27 blocks of 1152, patch 16, 2x2 merge, DeepStack at 8/16/24.
   bf16, LoRA rank 64 on q/k/v/o (as experiments/paper-8b.yaml), gradient
   checkpointing, AdamW on the adapters.
2. Measures this device's matmul peak (square bf16 matmuls): MFU is reported
   against what the chip does, not a datasheet number.
3. SFT step: a batch of samples shaped like a WebVoyager step (one 1280x800
   screenshot = 4000 patches = 1000 image tokens, text up to --seq tokens, loss
   on the last --completion tokens); forward, backward, optimizer step.
4. RL step (Salvage-DS / GRPO shape): --states prompts x --group sampled
   completions of exactly --new-tokens tokens (transformers generate with a KV
   cache: the trainer's own rollout path; vLLM rollouts are faster), then a
   policy-gradient forward/backward over the completions.
5. Model FLOPs: rmsweb/models/flops.py (the same count as `rmsweb plan`): a frozen
   LoRA base costs 4N per token in training (forward + input gradient; no weight
   gradient), the adapters 6 N_lora, the vision tower forward only; the RL prompt's
   image tokens are positions of the prompt, counted once.
6. MFU is printed twice: against the measured matmul rate and against the datasheet
   dense bf16 peak of the GPU (--datasheet-tflops, else looked up by device name).
7. Memory: the peak each phase allocated on the GPU (torch's max_memory_allocated,
   reset between SFT and RL) beside what `rmsweb plan`'s formulas (rmsweb/models/plan.py)
   give for the same shapes, on a line `memory: sft_peak_gib=.. sft_plan_gib=..
   rl_peak_gib=.. rl_plan_gib=..` (peaks are `nan` off CUDA). The plan counts SFT without
   full logits (TRL's tiled loss); this step computes them, so its SFT peak is higher.
The last line is `mfu_sft=X mfu_rl=Y tokens_per_s=Z` (Z: SFT tokens per second).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # rmsweb without an install

from rmsweb.models.flops import (
    DATASHEET_TFLOPS,
    TEXT_8B,
    VISION_8B,
    Shape,
    attn_flops,
    rl_flops,
    rollout_flops,
    sft_flops,
    vision_forward,
)

__all__ = [
    "DATASHEET_TFLOPS",
    "TEXT_8B",
    "VISION_8B",
    "Shape",
    "attn_flops",
    "rl_flops",
    "rollout_flops",
    "sft_flops",
    "vision_forward",
]

GIB = 2**30
# --tiny: the same architecture at a size a CPU runs in seconds.
TEXT_TINY = {
    **TEXT_8B,
    "vocab_size": 1024,
    "hidden_size": 64,
    "intermediate_size": 192,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 4096,
    "rope_parameters": {**TEXT_8B["rope_parameters"], "mrope_section": [2, 3, 3]},
}
VISION_TINY = {
    **VISION_8B,
    "depth": 2,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_heads": 2,
    "out_hidden_size": 64,
    "deepstack_visual_indexes": [0],
}
# Qwen's special token ids; the tiny vocabulary keeps them at its top.
SPECIAL_8B = {"image": 151655, "video": 151656, "start": 151652, "end": 151653}
SPECIAL_TINY = {"image": 1020, "video": 1021, "start": 1022, "end": 1023}


LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]


def plan_estimate(
    tiny: bool, lora_rank: int, w: int, sft: tuple[int, int], rl: tuple[int, int, int]
) -> tuple[float, float]:
    """Bytes per GPU `rmsweb plan` gives this step: SFT (samples, tokens each) with
    checkpointing; RL (sequences, prompt, new tokens): HF generate's KV cache or the
    update's activations and logits, whichever is larger (micro-batch: every sequence)."""
    from types import SimpleNamespace

    from rmsweb.models.plan import (
        activation_bytes_per_token,
        dims_from_config,
        kv_bytes_per_token,
        trainable_bytes,
    )

    text, vision = (TEXT_TINY, VISION_TINY) if tiny else (TEXT_8B, VISION_8B)
    lora = SimpleNamespace(enabled=True, rank=lora_rank, targets=LORA_TARGETS)
    d = dims_from_config({**text, "tie_word_embeddings": False}, vision, lora)
    base = w * d.params + trainable_bytes(d, w, lora=True)
    (n, seq), (seqs, prompt, new) = sft, rl
    total = prompt + new
    update = seqs * (total * activation_bytes_per_token(d, w, True) + 3 * 4 * d.vocab * new)
    return (
        base + n * seq * activation_bytes_per_token(d, w, True),
        base + max(seqs * total * kv_bytes_per_token(d, w), update),
    )


def datasheet_peak(device: str, override_tflops: float | None) -> float | None:
    """FLOP/s the vendor states for this GPU (None on CPU or an unknown name)."""
    if override_tflops:
        return override_tflops * 1e12
    if not device.startswith("cuda"):
        return None
    import torch

    name = torch.cuda.get_device_name(device)
    for key, tflops in DATASHEET_TFLOPS.items():
        if key in name:
            return tflops * 1e12
    return None


def build(tiny: bool, device: str, dtype: Any, lora_rank: int) -> tuple[Any, Shape, dict]:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    text, vision, special = (
        (TEXT_TINY, VISION_TINY, SPECIAL_TINY) if tiny else (TEXT_8B, VISION_8B, SPECIAL_8B)
    )
    config = Qwen3VLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=special["image"],
        video_token_id=special["video"],
        vision_start_token_id=special["start"],
        vision_end_token_id=special["end"],
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    # Built directly on the device in the target dtype: 8B in fp32 on the host is 35 GB.
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    with torch.device(device):
        model = Qwen3VLForConditionalGeneration(config)
    torch.set_default_dtype(previous)
    linear = torch.nn.Linear
    lang = model.model.language_model
    shape = Shape(
        text_linear=sum(m.weight.numel() for m in lang.modules() if isinstance(m, linear)),
        head=model.lm_head.weight.numel(),
        vision_linear=sum(
            m.weight.numel() for m in model.model.visual.modules() if isinstance(m, linear)
        ),
        lora=0,
        layers=text["num_hidden_layers"],
        attn_width=text["num_attention_heads"] * text["head_dim"],
        vision_layers=vision["depth"],
        vision_width=vision["hidden_size"],
    )
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = model.config.text_config.use_cache = False  # training default
    lora = LoraConfig(
        r=lora_rank,
        lora_alpha=2 * lora_rank,
        lora_dropout=0.0,
        # Names of the text decoder's projections; the vision blocks' are qkv/proj, so the
        # vision tower stays frozen, as in paper-8b.
        target_modules=LORA_TARGETS,
    )
    model = get_peft_model(model, lora)
    shape.lora = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return model, shape, special


def image_inputs(
    width: int, height: int, patch: int, device: str, dtype: Any
) -> tuple[Any, Any, int, int]:
    """pixel_values / image_grid_thw as Qwen3-VL's processor makes them, and token counts."""
    import torch

    grid_h, grid_w = height // patch, width // patch
    patches = grid_h * grid_w
    # Each patch row: 3 channels x 2 frames (a still image is repeated) x patch x patch.
    pixels = torch.randn(patches, 3 * 2 * patch * patch, device=device, dtype=dtype)
    grid = torch.tensor([[1, grid_h, grid_w]], device=device)
    return pixels, grid, patches, patches // 4  # 2x2 merge: 4 patches per image token


def sample_ids(seq: int, image_tokens: int, special: dict, vocab: int, device: str) -> Any:
    """Text, then the screenshot block, then text: `seq` tokens in all."""
    import torch

    text = seq - image_tokens - 2
    head = text // 4  # instruction and history before the screenshot, the page text after
    ids = torch.randint(0, special["start"] if vocab > special["start"] else vocab - 8, (seq,))
    ids[head] = special["start"]
    ids[head + 1 : head + 1 + image_tokens] = special["image"]
    ids[head + 1 + image_tokens] = special["end"]
    return ids.to(device)


def batch(n: int, seq: int, img: tuple, special: dict, vocab: int, device: str) -> dict:
    import torch

    pixels, grid, _, image_tokens = img
    ids = torch.stack([sample_ids(seq, image_tokens, special, vocab, device) for _ in range(n)])
    return {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "mm_token_type_ids": token_types(ids, special),
        "pixel_values": pixels.repeat(n, 1),
        "image_grid_thw": grid.repeat(n, 1),
    }


def token_types(ids: Any, special: dict) -> Any:
    """1 at image tokens, 0 elsewhere: what M-RoPE needs to place the image in 3D."""
    return (ids == special["image"]).int()


def matmul_peak(device: str, dtype: Any, n: int, seconds: float = 3.0) -> float:
    """FLOP/s of repeated n x n x n matmuls on this device (the MFU denominator)."""
    import torch

    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    sync(device)
    iters, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(10):
            a @ b
        sync(device)
        iters += 10
    return 2 * n**3 * iters / (time.perf_counter() - start)


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(device: str, fn: Any, steps: int, warmup: int) -> float:
    """Median seconds per call after warm-up."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(steps):
        sync(device)
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tiny", action="store_true", help="tiny model and inputs (smoke run)")
    ap.add_argument("--device", default="cuda", help="cuda or cpu")
    ap.add_argument("--dtype", default=None, help="bfloat16 (cuda default) or float32 (cpu)")
    ap.add_argument("--batch", type=int, default=None, help="SFT samples per step")
    ap.add_argument("--seq", type=int, default=None, help="tokens per SFT sample")
    ap.add_argument("--completion", type=int, default=64, help="SFT loss tokens per sample")
    ap.add_argument("--states", type=int, default=None, help="RL states per step")
    ap.add_argument("--group", type=int, default=8, help="RL completions per state")
    ap.add_argument("--prompt", type=int, default=None, help="RL prompt tokens")
    ap.add_argument("--new-tokens", type=int, default=None, help="RL completion tokens")
    ap.add_argument("--lora-rank", type=int, default=64)
    ap.add_argument("--steps", type=int, default=5, help="timed steps of each kind")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument(
        "--datasheet-tflops", type=float, default=None, help="dense bf16 peak of this GPU"
    )
    a = ap.parse_args()

    import torch

    tiny = a.tiny
    dtype = getattr(torch, a.dtype or ("float32" if a.device == "cpu" else "bfloat16"))
    # 8B defaults: 4 x 4096-token samples (paper-8b: batch 4, screenshots of 1000 tokens);
    # RL: 4 states x 8 = 32 sequences of 2048 + 128 tokens (a thought and an action).
    batch_n = a.batch or (2 if tiny else 4)
    seq = a.seq or (96 if tiny else 4096)
    states = a.states or (2 if tiny else 4)
    prompt = a.prompt or (64 if tiny else 2048)
    new = a.new_tokens or (8 if tiny else 128)
    width, height = (64, 64) if tiny else (1280, 800)
    if a.device == "cpu":
        torch.set_num_threads(max(1, torch.get_num_threads()))

    build_start = time.perf_counter()
    model, shape, special = build(tiny, a.device, dtype, a.lora_rank)
    vocab = model.config.text_config.vocab_size
    print(
        f"model: {'tiny' if tiny else 'Qwen3-VL-8B-shaped'} random, {dtype}, built in "
        f"{time.perf_counter() - build_start:.1f} s; linear weights: text {shape.text_linear / 1e6:,.1f} M, "
        f"head {shape.head / 1e6:,.1f} M, vision {shape.vision_linear / 1e6:,.1f} M; "
        f"LoRA {shape.lora / 1e6:.2f} M trainable"
    )
    peak = matmul_peak(a.device, dtype, 512 if tiny else 8192, seconds=1.0 if tiny else 3.0)
    sheet = datasheet_peak(a.device, a.datasheet_tflops)
    print(
        f"matmul peak: {peak / 1e12:.2f} TFLOP/s ({dtype}, measured); datasheet: "
        + (f"{sheet / 1e12:.1f} TFLOP/s" if sheet else "unknown (--datasheet-tflops)")
    )
    img = image_inputs(width, height, 16, a.device, dtype)
    patches = img[2]
    optimizer = torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad],
        lr=1e-4,
        **({"fused": True} if a.device.startswith("cuda") else {}),
    )

    # ---------------------------------------------------------------- SFT
    sft_inputs = batch(batch_n, seq, img, special, vocab, a.device)
    labels = torch.full_like(sft_inputs["input_ids"], -100)
    labels[:, -a.completion :] = sft_inputs["input_ids"][:, -a.completion :]

    def sft_step() -> None:
        loss = model(**sft_inputs, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    on_cuda = a.device.startswith("cuda")
    sft_s = timed(a.device, sft_step, a.steps, a.warmup)
    sft_peak = torch.cuda.max_memory_allocated() if on_cuda else math.nan
    if on_cuda:
        torch.cuda.reset_peak_memory_stats()  # the RL phase's peak on its own
    sft_tokens = batch_n * seq
    sft_work = sft_flops(shape, batch_n, seq, patches)
    mfu_sft = sft_work / sft_s / peak
    tokens_per_s = sft_tokens / sft_s
    print(
        f"sft: {batch_n} x {seq} tokens ({img[3]} image tokens each): {sft_s * 1000:.0f} ms/step, "
        f"{tokens_per_s:,.0f} tokens/s, MFU {mfu_sft:.3f} of measured matmul"
        + (f", {sft_work / sft_s / sheet:.3f} of datasheet" if sheet else "")
    )

    # ---------------------------------------------------------------- RL
    sequences = states * a.group
    rl_inputs = batch(states, prompt, img, special, vocab, a.device)
    rl_inputs = {
        k: v.repeat_interleave(a.group, 0) for k, v in rl_inputs.items() if k != "pixel_values"
    }
    rl_inputs["pixel_values"] = img[0].repeat(sequences, 1)
    rollout_s: list[float] = []
    update_s: list[float] = []

    def rl_step() -> None:
        sync(a.device)
        start = time.perf_counter()
        model.eval()
        with torch.no_grad(), _cache_on(model):
            out = model.generate(
                **rl_inputs,
                do_sample=True,
                use_cache=True,
                max_new_tokens=new,
                min_new_tokens=new,  # exact lengths: FLOPs and timings comparable across runs
                top_k=0,
                top_p=1.0,
                # A random model may sample an image placeholder, which then has no image.
                suppress_tokens=list(special.values()),
            )
        sync(a.device)
        rollout_s.append(time.perf_counter() - start)
        model.train()
        completion = out[:, -new:]
        advantages = torch.randn(sequences, device=a.device)  # group-normalized in the trainer
        full = {
            **rl_inputs,
            "input_ids": out,
            "attention_mask": torch.ones_like(out),
            "mm_token_type_ids": token_types(out, special),
        }
        logits = model(**full, logits_to_keep=new + 1).logits[:, :-1].float()
        logp = torch.log_softmax(logits, -1).gather(-1, completion.unsqueeze(-1)).squeeze(-1)
        loss = -(advantages[:, None] * logp).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        sync(a.device)
        update_s.append(time.perf_counter() - start - rollout_s[-1])

    rl_s = timed(a.device, rl_step, a.steps, a.warmup)
    # `prompt` tokens already hold the screenshot block (sample_ids): counted once.
    rl_work = rl_flops(shape, sequences, prompt, new, patches)
    mfu_rl = rl_work / rl_s / peak
    timed_rollouts = sorted(rollout_s[a.warmup :])[len(rollout_s[a.warmup :]) // 2]
    print(
        f"rl: {states} states x {a.group} completions of {new} tokens (prompt {prompt}): "
        f"{rl_s * 1000:.0f} ms/step (rollout {timed_rollouts * 1000:.0f} ms), "
        f"{sequences * new / rl_s:,.1f} completion tokens/s, MFU {mfu_rl:.3f} of measured matmul"
        + (f", {rl_work / rl_s / sheet:.3f} of datasheet" if sheet else "")
    )
    rl_peak = torch.cuda.max_memory_allocated() if on_cuda else math.nan
    sft_plan, rl_plan = plan_estimate(
        tiny, a.lora_rank, dtype.itemsize, (batch_n, seq), (sequences, prompt, new)
    )
    print(
        f"memory: sft_peak_gib={sft_peak / GIB:.2f} sft_plan_gib={sft_plan / GIB:.2f} "
        f"rl_peak_gib={rl_peak / GIB:.2f} rl_plan_gib={rl_plan / GIB:.2f}"
    )
    if sheet:
        print(
            f"datasheet: mfu_sft={sft_work / sft_s / sheet:.3f} mfu_rl={rl_work / rl_s / sheet:.3f}"
        )
    print(f"mfu_sft={mfu_sft:.3f} mfu_rl={mfu_rl:.3f} tokens_per_s={tokens_per_s:.0f}")


@contextlib.contextmanager
def _cache_on(model: Any):
    """Rollouts decode with the KV cache, which gradient checkpointing turns off."""
    base = model.base_model.model
    base.gradient_checkpointing_disable()
    base.config.use_cache = base.config.text_config.use_cache = True
    try:
        yield
    finally:
        base.config.use_cache = base.config.text_config.use_cache = False
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


if __name__ == "__main__":
    main()
