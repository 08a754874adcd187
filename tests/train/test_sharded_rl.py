"""compute.sharding fsdp in RL, rehearsed on CPU with 2 gloo ranks (FSDP2, sharding.py).

The tiny Qwen3-VL with LoRA and screenshots trains 10 RL steps sharded and unsharded from
the same seed: the losses and the adapter weights agree within 1e-4 relative (fp32); a
sharded run killed with SIGKILL after step 5 resumes from its step-3 checkpoint and ends
where the uninterrupted run ends; the sharded checkpoint's adapters, merged into an
unsharded model (what eval loads), equal the unsharded run's. Generation inside
`sharding.gathered` runs no collective (the ranks generate different numbers of tokens).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

TOLERANCE = 1e-4  # relative, fp32
CURVE_KEYS = ("loss", "pg_loss", "anchor_loss", "kl", "grad_norm", "kl_to_sft")


def relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), 1e-6)


def curve_gap(a: list[dict], b: list[dict]) -> float:
    assert [r["step"] for r in a] == [r["step"] for r in b]
    gaps = [0.0]
    for x, y in zip(a, b, strict=True):
        for k in CURVE_KEYS:
            u, v = x[k], y[k]
            if u is None or (isinstance(u, float) and math.isnan(u)):
                assert v is None or math.isnan(v), (x["step"], k, u, v)
                continue
            gaps.append(relative(u, v))
    return max(gaps)


def adapter_gap(a: Path, b: Path) -> float:
    """Largest |a - b| / max|a| over the checkpoints' trainable tensors (same names)."""
    from safetensors.torch import load_file

    x, y = load_file(str(a / "trainable.safetensors")), load_file(str(b / "trainable.safetensors"))
    assert x.keys() == y.keys() and x
    return max(float((x[k] - y[k]).abs().max() / x[k].abs().max().clamp(min=1e-12)) for k in x)


def test_gathered_generation_runs_no_collective(
    sharded_vl_dir: Path, tmp_path: Path, run_sharded: Any
) -> None:
    run_sharded("gen", sharded_vl_dir, tmp_path)
    got = [json.loads((tmp_path / f"gen-{r}.json").read_text()) for r in (0, 1)]
    assert [g["tokens"] for g in got] == [2, 7]  # a collective inside would have hung
    assert got[0]["loss"] == got[1]["loss"]  # back to shards, a forward all-gathers


@pytest.mark.slow
def test_sharded_rl_equals_unsharded_and_resumes_after_kill(
    sharded_vl_dir: Path, tmp_path: Path, run_sharded: Any
) -> None:
    vl_dir, torchrun = sharded_vl_dir, run_sharded
    runs = {name: tmp_path / name for name in ("none", "fsdp", "killed")}
    torchrun("rl", vl_dir, runs["none"], "none", 10)
    torchrun("rl", vl_dir, runs["fsdp"], "fsdp", 10)
    result = {k: json.loads((v / "result.json").read_text()) for k, v in list(runs.items())[:2]}
    # Something was learned (the comparison is not of two untouched models).
    steps = result["fsdp"]["curve"]
    assert all(r["grad_norm"] > 0 for r in steps) and any(r["pg_loss"] for r in steps)
    assert curve_gap(result["none"]["curve"], result["fsdp"]["curve"]) < TOLERANCE
    last = "work/checkpoint-10"
    assert adapter_gap(runs["none"] / last, runs["fsdp"] / last) < TOLERANCE
    # The sharded run's final model (adapters merged into the unsharded base) is the same.
    merged = {k: v["merged_sums"] for k, v in result.items()}
    for name, total in merged["none"].items():
        assert abs(total - merged["fsdp"][name]) <= TOLERANCE * max(1.0, abs(total)), name

    # kill -9 of rank 0 after step 5: the last checkpoint is step 3; the rerun resumes there.
    died = torchrun("rl", vl_dir, runs["killed"], "fsdp", 10, 5, ok=False)
    assert died.returncode != 0 and not (runs["killed"] / "result.json").exists()
    assert sorted(p.name for p in (runs["killed"] / "work").glob("checkpoint-*")) == [
        "checkpoint-3"
    ]
    torchrun("rl", vl_dir, runs["killed"], "fsdp", 10)
    resumed = json.loads((runs["killed"] / "result.json").read_text())
    assert resumed["resumed_from"] == 3
    assert curve_gap(result["fsdp"]["curve"], resumed["curve"]) < TOLERANCE
    assert adapter_gap(runs["fsdp"] / last, runs["killed"] / last) < TOLERANCE
