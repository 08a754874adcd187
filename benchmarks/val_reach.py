"""Reach on val failure states of one SFT checkpoint, without a mining run.

The regime stage measures reach on mined and on val failure states; mining costs ~20
minutes on 2 cores, and choosing among SFT settings (a sweep's points) needs only the
val side. This runs `rmsweb regime` with an empty mine run and writes a results file
with the command, the commit and the pooled and per-task figures.

    python benchmarks/val_reach.py --exp sft-replay-r25 --sft runs/sft/sft-replay-r25/s0 \
        --out benchmarks/results/val_reach_sft-replay-r25.json

The experiment's settings are the ones in params.yaml (suite.val, rl.group_size,
rl.temperature, regime.val_seeds_per_task); the SFT folder is the checkpoint probed.
`--temperature` and `--group-size` probe the same checkpoint at another RL setting
(they are RL's to choose on val): the stage then reads a copy of params.yaml with the
experiment's rl section changed, and the results file names the overrides. `--states
FILE` keeps the probed states with their samples (the stage's regime_states.parquet,
whose `source` says first or later failure), which the run's folder otherwise drops.

    python benchmarks/val_reach.py --exp capacity-click-budget50 \
        --sft runs/sft/capacity-click-budget50/s0 --temperature 1.0 \
        --out benchmarks/results/val_reach_capacity-click-budget50-t1.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KEPT = ("headroom", "reach_val", "sft_success", "expert_success", "expert_steps")


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def shown_command(argv: list[str]) -> str:
    """The command as run, for the committed results file: a --states file outside the
    repository (the states are not committed) is shown as FILE, not as this machine's path."""
    shown = [Path(argv[0]).as_posix(), *argv[1:]]
    for i, word in enumerate(shown[:-1]):
        if word == "--states" and not Path(shown[i + 1]).resolve().is_relative_to(ROOT):
            shown[i + 1] = "FILE"
    return " ".join(shown)


def _pick(block: dict) -> dict:
    return {k: v for k, v in block.items() if any(k.startswith(p) for p in KEPT)}


def _with_rl(path: Path, exp: str, overrides: dict) -> dict:
    """params.yaml's contents with `exp`'s rl settings overridden."""
    from rmsweb.spec.safe_yaml import load_plain

    params, _ = load_plain(path.read_text())
    if exp not in params:
        raise SystemExit(f"{path}: no experiment {exp!r} (run `rmsweb compile`?)")
    params[exp]["rl"].update(overrides)
    return params


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exp", required=True, help="experiment or sweep point in params.yaml")
    ap.add_argument("--sft", required=True, type=Path, help="the SFT stage's folder")
    ap.add_argument("--seed", type=int, default=0, help="training seed (sampling seed)")
    ap.add_argument("--out", required=True, type=Path, help="results JSON to write")
    ap.add_argument("--params", type=Path, default=Path("params.yaml"))
    ap.add_argument("--temperature", type=float, help="override rl.temperature")
    ap.add_argument("--group-size", type=int, help="override rl.group_size (G)")
    ap.add_argument(
        "--states",
        type=Path,
        help="also keep the probed states and their samples here (the stage's "
        "regime_states.parquet, for DuckDB)",
    )
    args = ap.parse_args()
    overrides = {
        k: v
        for k, v in (("temperature", args.temperature), ("group_size", args.group_size))
        if v is not None
    }
    with tempfile.TemporaryDirectory() as tmp:
        params = args.params
        if overrides:
            params = Path(tmp) / "params.json"  # JSON is YAML: the stage reads it as is
            params.write_text(json.dumps(_with_rl(args.params, args.exp, overrides)))
        mine = Path(tmp) / "mine"  # no mined states: only val failure states are probed
        mine.mkdir()
        metrics = Path(tmp) / "regime.json"
        cmd = [
            "rmsweb", "regime", "--exp", args.exp, "--seed", str(args.seed),
            "--in", f"sft={args.sft}", "--in", f"mine={mine}",
            "--out", str(Path(tmp) / "regime"), "--metrics", str(metrics),
            "--params", str(params),
        ]  # fmt: skip
        if subprocess.run(cmd).returncode != 0:
            return 1
        m = json.loads(metrics.read_text())
        if args.states:
            from rmsweb.regime.table import FILE as STATES_FILE

            args.states.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(tmp) / "regime" / STATES_FILE, args.states)
    result = {
        "note": "reach on val failure states without mining (benchmarks/val_reach.py)",
        "command": shown_command(sys.argv),
        "commit": _commit(),
        "experiment": args.exp,
        "sft": str(args.sft),
        "overrides": {f"rl.{k}": v for k, v in overrides.items()},
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
