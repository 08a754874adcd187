#!/bin/bash
# RL hyperparameters on val, outside DVC: the rl stage with overrides on the default job's
# SFT checkpoint and mined states (seed 0), then the rl policy's eval on the val split only.
# Test seeds are never touched here; choose on val, then put the setting in the spec.
#
#   bash benchmarks/rl_tune_val.sh NAME OVERRIDE...   e.g.
#   bash benchmarks/rl_tune_val.sh t05 rl.temperature=0.5 rl.learning_rate=1.0e-4 rl.steps=30
#
# Needs `dvc repro sft-s0_miniwob-cpu mine-s0_miniwob-cpu` first. Output: runs/tune/NAME/
# and one line: NAME val_success ... reward first -> last ... accepted ... wall seconds.
# Environment: SPEC=file (default experiments/miniwob-cpu.yaml; e.g. an arm of the paper
# study such as experiments/miniwob-cpu-paper-sftctl.yaml, whose stages share seed 0's
# SFT and mined states), SFT=dir (default runs/sft/miniwob-cpu/s0), MINE=dir (default
# runs/mine/miniwob-cpu/s0); MINE=new reruns the mine stage with the overrides into
# runs/tune/NAME/mine (for mine.* settings), MINE=runs/tune/OTHER/mine reuses one;
# COLLECT=dir (default runs/collect/miniwob-cpu: the routine states of MINE=new), e.g. the
# collection of benchmarks/sft_tune_val.sh (runs/tune/OTHER/collect) with its SFT.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH" DVC_NO_ANALYTICS=1 HF_HUB_OFFLINE=1
name=$1
shift
d=runs/tune/$name
mkdir -p "$d"
exp=$(python - "$d/params.yaml" "${SPEC:-experiments/miniwob-cpu.yaml}" "$@" <<'PY'
import sys
from pathlib import Path

from rmsweb.compile.dvcfile import render_params_yaml
from rmsweb.spec import load_experiment

out, spec_file, overrides = sys.argv[1], sys.argv[2], sys.argv[3:]
spec = load_experiment(Path(spec_file), [*overrides, "eval.splits=[val]"])
Path(out).write_text(render_params_yaml([spec]))
print(spec.name)
PY
)
start=$(date +%s)
sft=${SFT:-runs/sft/miniwob-cpu/s0}
mine=${MINE:-runs/mine/miniwob-cpu/s0}
if [ "$mine" = new ]; then
  mine=$d/mine
  rmsweb mine --exp "$exp" --params "$d/params.yaml" --seed 0 \
    --in sft="$sft" --in collect="${COLLECT:-runs/collect/miniwob-cpu}" \
    --out "$mine" --metrics "$d/mine.json" > "$d/mine.log" 2>&1
fi
rmsweb rl --exp "$exp" --params "$d/params.yaml" --seed 0 \
  --in mine="$mine" --in sft="$sft" \
  --out "$d/rl" --metrics "$d/rl.json" > "$d/rl.log" 2>&1
rmsweb eval --exp "$exp" --params "$d/params.yaml" --policy rl --seed 0 \
  --in policy="$d/rl" --out "$d/eval" --metrics "$d/eval.json" > "$d/eval.log" 2>&1
python - "$name" "$d" "$(($(date +%s) - start))" <<'PY'
import json
import sys

name, d, wall = sys.argv[1:]
r = json.load(open(f"{d}/rl.json"))
e = json.load(open(f"{d}/eval.json"))
def f(v):
    return "-" if v is None else f"{v:.3f}"


print(
    f"{name} val_success={e['success']} reward {f(r['reward_mean_first'])} -> "
    f"{f(r['reward_mean_last10pct'])} accepted={r['accepted_fraction']:.3f} "
    f"kl_to_sft={f(r.get('kl_to_sft_final'))} states={r['states']} wall_s={wall}"
)
PY
