#!/bin/bash
# SFT settings on val, outside DVC: the sft stage with overrides on the default job's
# collected data and initial model (seed 0), then that checkpoint's eval on val only.
# Test seeds are never touched here; choose on val, then put the setting in the spec.
#
#   bash benchmarks/sft_tune_val.sh NAME OVERRIDE...   e.g.
#   bash benchmarks/sft_tune_val.sh s3000 sft.max_steps=3000
#   bash benchmarks/sft_tune_val.sh train600 suite.train.count=600
#
# An override of suite.* or collect.* changes the SFT data: the script then collects
# afresh into runs/tune/NAME/collect (600 train seeds: ~7 min alone) instead of reusing
# the default job's collect run.
#
# Needs `dvc repro collect_miniwob-cpu model-s0_miniwob-cpu` first. Output:
# runs/tune/NAME/ (sft/ is a checkpoint rl_tune_val.sh takes as SFT=runs/tune/NAME/sft)
# and one line: NAME val_success ... per task ... wall seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH" DVC_NO_ANALYTICS=1 HF_HUB_OFFLINE=1
name=$1
shift
d=runs/tune/$name
mkdir -p "$d"
python - "$d/params.yaml" "$@" <<'PY'
import sys
from pathlib import Path

from rmsweb.compile.dvcfile import render_params_yaml
from rmsweb.spec import load_experiment

out, overrides = sys.argv[1], sys.argv[2:]
spec = load_experiment(Path("experiments/miniwob-cpu.yaml"), [*overrides, "eval.splits=[val]"])
Path(out).write_text(render_params_yaml([spec]))
PY
start=$(date +%s)
collect=runs/collect/miniwob-cpu
for override in "$@"; do
  case $override in
    suite.* | collect.*) collect=$d/collect ;;
  esac
done
if [ "$collect" = "$d/collect" ]; then
  rmsweb collect --exp miniwob-cpu --params "$d/params.yaml" \
    --out "$collect" --metrics "$d/collect.json" > "$d/collect.log" 2>&1
fi
rmsweb sft --exp miniwob-cpu --params "$d/params.yaml" --seed 0 \
  --in collect="$collect" --in model=runs/model/miniwob-cpu/s0 \
  --out "$d/sft" --metrics "$d/sft.json" > "$d/sft.log" 2>&1
rmsweb eval --exp miniwob-cpu --params "$d/params.yaml" --policy sft --seed 0 \
  --in policy="$d/sft" --out "$d/eval" --metrics "$d/eval.json" > "$d/eval.log" 2>&1
python - "$name" "$d" "$(($(date +%s) - start))" <<'PY'
import json
import sys

name, d, wall = sys.argv[1:]
s = json.load(open(f"{d}/sft.json"))
e = json.load(open(f"{d}/eval.json"))
tasks = " ".join(f"{t}={v:.2f}" for t, v in sorted(e.get("per_task", {}).items()))
print(
    f"{name} val_success={e['success']} loss_final={s['loss_final']:.4f} "
    f"sft_samples_per_s={s['samples_per_s']} {tasks} wall_s={wall}"
)
PY
