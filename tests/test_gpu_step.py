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


def test_sft_flops_by_hand() -> None:
    g = _module()
    shape = g.Shape(
        text_linear=10, head=2, vision_linear=3, lora=1, layers=1, attn_width=4,
        vision_layers=1, vision_width=2,
    )  # fmt: skip
    # One sample of 4 tokens with a 2-patch image:
    # text forward  = 2 * (10 + 2) * 4 = 96, causal attention 1 * 4 * 4 * (4 / 2) * 4 = 128 -> 224
    # vision forward = 2 * 3 * 2 = 12, full attention 1 * 2 * 4 * 2 * 2 = 32 -> 44
    # step = 3 * 224 (forward + input gradients) + 6 * 1 * 4 (adapters) + 44 = 740
    assert g.sft_flops(shape, 1, 4, 2) == 740
    assert g.sft_flops(shape, 3, 4, 2) == 3 * 740


def test_rl_flops_by_hand() -> None:
    g = _module()
    shape = g.Shape(
        text_linear=10, head=2, vision_linear=0, lora=0, layers=1, attn_width=1,
        vision_layers=1, vision_width=1,
    )  # fmt: skip
    # prompt 2, 2 new tokens, no image (0 patches):
    # prefill = 2 * 10 * 2 + 2 * 2 + causal attention 1 * 2 * 4 * 1 * 1 = 40 + 4 + 8 = 52
    # decode  = 2 * 12 * 2 + attention 1 * 2 * 4 * (2 + 1) * 1 = 48 + 24 = 72
    # update  = 3 * (2 * 10 * 4 + 2 * 2 * 2 + causal attention 1 * 4 * 4 * 2 * 1) = 3 * 120 = 360
    assert g.rl_flops(shape, 1, 2, 2, 0) == 52 + 72 + 360


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
