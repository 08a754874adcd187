"""Reach on val failure states of one SFT checkpoint, without a mining run.

The regime stage measures reach on mined and on val failure states; mining costs ~20
minutes on 2 cores, and choosing among SFT settings (a sweep's points) needs only the
val side. This runs `rmsweb regime` with an empty mine run and writes a results file
with the command, the commit and the pooled and per-task figures.

    python benchmarks/val_reach.py --exp sft-replay-r25 --sft runs/sft/sft-replay-r25/s0 \
        --out benchmarks/results/val_reach_sft-replay-r25.json

The experiment's settings are the ones in params.yaml (suite.val, rl.group_size,
rl.temperature, regime.val_seeds_per_task); the SFT folder is the checkpoint probed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

KEPT = ("headroom", "reach_val", "sft_success", "expert_success", "expert_steps")


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def _pick(block: dict) -> dict:
    return {k: v for k, v in block.items() if any(k.startswith(p) for p in KEPT)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exp", required=True, help="experiment or sweep point in params.yaml")
    ap.add_argument("--sft", required=True, type=Path, help="the SFT stage's folder")
    ap.add_argument("--seed", type=int, default=0, help="training seed (sampling seed)")
    ap.add_argument("--out", required=True, type=Path, help="results JSON to write")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        mine = Path(tmp) / "mine"  # no mined states: only val failure states are probed
        mine.mkdir()
        metrics = Path(tmp) / "regime.json"
        cmd = [
            "rmsweb", "regime", "--exp", args.exp, "--seed", str(args.seed),
            "--in", f"sft={args.sft}", "--in", f"mine={mine}",
            "--out", str(Path(tmp) / "regime"), "--metrics", str(metrics),
        ]  # fmt: skip
        if subprocess.run(cmd).returncode != 0:
            return 1
        m = json.loads(metrics.read_text())
    result = {
        "note": "reach on val failure states without mining (benchmarks/val_reach.py)",
        "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "commit": _commit(),
        "experiment": args.exp,
        "sft": str(args.sft),
        "settings": {
            k: m[k] for k in ("group_size", "temperature", "similarity_tau", "val_seeds_per_task")
        },
        "pooled": _pick(m["pooled"]),
        "per_task": {t: _pick(v) for t, v in m["per_task"].items()},
        "wall_s": m["wall_s"],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    pooled = result["pooled"]
    print(json.dumps(pooled, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
