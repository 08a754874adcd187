"""compute.sharding fsdp in SFT (TRL SFTTrainer + accelerate's FSDP2), 2 gloo ranks on CPU.

accelerate 1.15 enables an FSDP plugin only for GPU-like distributed types; on CPU it
drops it silently and the Trainer runs DDP. train_sft then sets the state to FSDP as on
GPUs (sharding.accelerate_fsdp_on_cpu), so accelerate's own FSDP2 path runs: fully_shard of the PEFT-wrapped tiny
Qwen3-VL, sharded checkpoints, resume. 20 steps sharded and unsharded from the same seed:
losses and adapters (gathered whole) within 1e-4 relative (fp32); a kill -9 of rank 0
after step 12 resumes from checkpoint-10 and ends on the same adapters.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

TOLERANCE = 1e-4  # relative, fp32


def _adapter_gap(a: Path, b: Path) -> float:
    from safetensors.torch import load_file

    x, y = load_file(str(a)), load_file(str(b))
    assert x.keys() == y.keys() and x
    return max(float((x[k] - y[k]).abs().max() / x[k].abs().max().clamp(min=1e-12)) for k in x)


def _loss_gap(a: dict, b: dict) -> float:
    la, lb = dict(map(tuple, a["losses"])), dict(map(tuple, b["losses"]))
    assert sorted(la) == sorted(lb) == list(range(1, 21))
    return max(abs(la[s] - lb[s]) / abs(la[s]) for s in la)


def test_checkpoint_problem_knows_sharded_checkpoints(tmp_path: Path) -> None:
    from rmsweb.train.sft.trainer import SHARDED_WEIGHTS, checkpoint_problem

    ckpt = tmp_path / "checkpoint-5"
    (ckpt / SHARDED_WEIGHTS).mkdir(parents=True)
    (ckpt / "trainer_state.json").write_text('{"global_step": 5}')
    assert ".metadata is missing" in (checkpoint_problem(ckpt) or "")  # killed mid-save
    (ckpt / SHARDED_WEIGHTS / ".metadata").write_bytes(b"x")
    assert checkpoint_problem(ckpt) is None


@pytest.mark.slow
def test_sharded_sft_equals_unsharded_and_resumes_after_kill(
    sharded_vl_dir: Path, tmp_path: Path, run_sharded: Any
) -> None:
    vl_dir, torchrun = sharded_vl_dir, run_sharded
    runs = {name: tmp_path / name for name in ("none", "fsdp", "killed")}
    torchrun("sft", vl_dir, runs["none"], "none", 20)
    torchrun("sft", vl_dir, runs["fsdp"], "fsdp", 20)
    got = {k: json.loads((runs[k] / "result.json").read_text()) for k in ("none", "fsdp")}
    assert (got["none"]["sharded"], got["fsdp"]["sharded"]) == (False, True)
    assert _loss_gap(got["none"], got["fsdp"]) < TOLERANCE
    losses = dict(map(tuple, got["fsdp"]["losses"]))
    assert losses[20] < losses[1] - 0.5  # it learned: not two untouched models compared
    adapters = "adapters.safetensors"
    assert _adapter_gap(runs["none"] / adapters, runs["fsdp"] / adapters) < TOLERANCE
    assert (runs["fsdp"] / "work" / "checkpoint-20" / "pytorch_model_fsdp_0").is_dir()

    died = torchrun("sft", vl_dir, runs["killed"], "fsdp", 20, 12, ok=False)
    assert died.returncode != 0
    assert sorted(p.name for p in (runs["killed"] / "work").glob("checkpoint-*")) == [
        "checkpoint-10",
        "checkpoint-5",
    ]
    torchrun("sft", vl_dir, runs["killed"], "fsdp", 20)
    resumed = json.loads((runs["killed"] / "result.json").read_text())
    assert resumed["ran"] == list(range(11, 21))  # continued from checkpoint-10
    assert _loss_gap(got["fsdp"], resumed) < TOLERANCE
    assert _adapter_gap(runs["fsdp"] / adapters, runs["killed"] / adapters) < TOLERANCE
