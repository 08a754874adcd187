"""benchmarks/gpu_step.py: its FLOP count (the MFU numerator) and its CPU smoke path."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_step.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_step", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_step"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_lora_sft_step_by_hand() -> None:
    g = _module()
    shape = g.Shape(
        text_linear=10, head=2, vision_linear=3, lora=1, layers=1, attn_width=4,
        vision_layers=1, vision_width=2,
    )  # fmt: skip
    # One sample of 4 tokens with a 2-patch image, frozen base + LoRA:
    # linear: (2 fwd + 2 input grad) * (10 + 2) * 4 = 192  (full fine-tuning's 6N: 288)
    # causal attention forward 1 * 4 * 4 * (4 / 2) * 4 = 128, backward 2x -> 384
    # adapters 6 * 1 * 4 = 24; vision forward 2 * 3 * 2 + 1 * 2 * 4 * 2 * 2 = 12 + 32 = 44
    assert g.sft_flops(shape, 1, 4, 2) == 192 + 384 + 24 + 44 == 644
    assert g.sft_flops(shape, 3, 4, 2) == 3 * 644


def test_rl_prompt_counts_its_image_tokens_once() -> None:
    g = _module()
    shape = g.Shape(
        text_linear=10, head=2, vision_linear=0, lora=0, layers=1, attn_width=1,
        vision_layers=1, vision_width=1,
    )  # fmt: skip
    # prompt 2 tokens, 2 new tokens, no image (0 patches):
    # prefill = 2 * 10 * 2 + 2 * 2 + causal attention 1 * 2 * 4 * 1 * 1 = 40 + 4 + 8 = 52
    # decode  = 2 * 12 * 2 + attention 1 * 2 * 4 * (2 + 1) * 1 = 48 + 24 = 72
    # update  = 4 * (10 * 4 + 2 * 2) + 3 * causal attention (1 * 4 * 4 * 2 * 1 = 32) = 176 + 96
    assert g.rl_flops(shape, 1, 2, 2, 0) == 52 + 72 + 176 + 96 == 396
    # A prompt of 6 whose 4 middle tokens are an image's: the same 6 positions, no more.
    with_image = g.Shape(**{**shape.__dict__, "vision_linear": 5})
    patches = 16  # 4 image tokens after the 2x2 merge
    vision = 2 * 5 * patches + 1 * patches * 4 * patches * 1
    text_only = g.rl_flops(shape, 1, 6, 2, 0)
    assert g.rl_flops(with_image, 1, 6, 2, patches) == text_only + 2 * vision


def test_analytic_shape_matches_the_built_model() -> None:
    """rmsweb plan's Shape (from the config) is the one gpu_step counts on the model."""
    import torch

    from rmsweb.models.flops import shape_from_config

    g = _module()
    _, built, _ = g.build(True, "cpu", torch.float32, 4)
    assert (
        shape_from_config(g.TEXT_TINY, g.VISION_TINY, 4, ["q_proj", "k_proj", "v_proj", "o_proj"])
        == built
    )


# In the default tier (issue 26): about 15 s on a loaded 2-core machine, so a change that
# breaks the benchmark fails CI at once.
def test_tiny_cpu_run_ends_with_the_summary_line() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--tiny", "--device", "cpu", "--steps", "1", "--warmup", "0"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"mfu_sft=\d+\.\d{3} mfu_rl=\d+\.\d{3} tokens_per_s=\d+", last), last
