"""The preflight's sharded path (compute.sharding fsdp) on 2 gloo ranks, as `make rehearsal`
runs it: the SFT step through accelerate's FSDP2, the RL step and KL probe through
sharding.py, the checkpoint gathered by every rank, written by rank 0, read back by all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "experiments" / "paper-8b-rehearsal.yaml"


def test_preflight_runs_the_sharded_path_on_two_gloo_ranks(tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "DVC_NO_ANALYTICS": "1"}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"  # torchrun
    env["RMSWEB_TORCHRUN"] = "--nproc_per_node 2 --standalone"
    cmd = [sys.executable, "-m", "rmsweb", "preflight", str(SPEC), "--out", str(tmp_path)]
    cmd += ["-o", "compute.sharding=fsdp"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "did not enable FSDP" not in done.stderr  # the SFT step really sharded
    m = json.loads((tmp_path / "metrics.json").read_text())
    assert m["ok"] and m["world_size"] == 2
    checks = m["checks"]
    assert checks["sft_step"]["sharding"] == checks["rl_step"]["sharding"] == "fsdp"
    assert checks["checkpoint"]["ok"] and checks["checkpoint"]["read_s"] is not None
