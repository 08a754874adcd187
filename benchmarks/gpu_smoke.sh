#!/usr/bin/env bash
# GPU smoke: the paper-scale path's GPU checks in one command, on one GPU (H100 or larger).
#
#   bash benchmarks/gpu_smoke.sh               # on the GPU machine
#   bash benchmarks/gpu_smoke.sh --dry-run     # anywhere, on CPU: the same steps with the
#                                              # tiny model; the default test tier runs it
#   bash benchmarks/gpu_smoke.sh --wheel-list  # the wheels it needs beyond a CUDA torch
#
# It needs a Python with a CUDA torch and, for the vLLM check, `vllm` on PATH (installed
# with constraints-gpu.txt, which pins vLLM, torch and transformers together). What else
# rmsweb needs can come from a folder of wheels, for machines without a package index.
# In order:
# 1. Packages: every wheel in $RMSWEB_WHEELS (default .whl/ at the repo root) is installed
#    with `pip install --no-index --find-links $RMSWEB_WHEELS --no-deps --target $SITE`,
#    and PYTHONPATH is $SITE plus the repo (rmsweb runs from the checkout, not installed).
#    No folder: the Python's own packages are used as they are.
# 2. benchmarks/gpu_step.py: SFT and RL steps of the Qwen3-VL-8B shape (bf16, LoRA 64,
#    gradient checkpointing), MFU, and the peak memory of each beside `rmsweb plan`'s
#    formulas for the same shapes.
# 3. The preflight's GPU parts (`rmsweb preflight experiments/paper-8b.yaml`, the first
#    stage of every GPU spec, on this one GPU: each rank's work is the same on 8): one SFT
#    and one RL step with the KL probe at paper-8b's micro-batch and longest prompt, peak
#    memory against the plan (within 15%), a checkpoint written and read back, and a saved
#    VL SFT folder served by `vllm serve` and asked one chat request with an image
#    (skipped, and said so, where `vllm` is not on PATH).
# 4. The gpu-marked tests on CUDA: tests/train/test_gpu_vl_lora.py (VL LoRA SFT and RL),
#    tests/train/test_vllm_sampler.py and tests/agents/test_vllm_policy.py (these two
#    skip where vLLM is not installed).
# 5. One summary line, last:
#    mfu_sft=X mfu_rl=Y tokens_per_s=Z sft_peak_gib=.. sft_plan_gib=.. rl_peak_gib=..
#    rl_plan_gib=.. preflight=ok|failed preflight_sft_vs_plan=R preflight_rl_vs_plan=R
#    preflight_vllm=ok|skipped|failed preflight_fsdp=ok|failed gpu_tests_passed=N
#    gpu_tests_failed=N
#    gpu_tests_skipped=N (--dry-run: peaks are nan, the preflight runs its CPU path on
#    experiments/paper-8b-rehearsal.yaml, and the tests are collected, not run:
#    gpu_tests_collected=N).
# The exit status is non-zero when a step failed; the summary line is printed anyway.
# Logs go to $OUT (default: a new temp folder, printed at the start).
#
# A GPU machine without a package index: build the wheel folder on a machine with one,
# for the GPU machine's Python version (here 3.12) and platform, then copy the repo with it:
#   bash benchmarks/gpu_smoke.sh --wheel-list | xargs python3 -m pip download --no-deps \
#     --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux2014_x86_64 -d .whl
#   rsync -a ./ gpu-host:rmsweb/          # .whl/ included
#   ssh gpu-host 'cd rmsweb && bash benchmarks/gpu_smoke.sh'
# The folder is about 18 MiB (transformers is most of it). Another folder: RMSWEB_WHEELS=DIR;
# another Python: PYTHON=/path/to/python.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
WHEELS="${RMSWEB_WHEELS:-$ROOT/.whl}"
SITE="${RMSWEB_SMOKE_SITE:-/tmp/rmsweb-smoke-site}"
LOG_DIR="${OUT:-$(mktemp -d)}"
echo "gpu_smoke: logs in $LOG_DIR" >&2
BUDGET_S=900

# What a CUDA image with torch, transformers and peft typically lacks, pinned to what
# rmsweb's tests pass with: trl, datasets and the two of their needs such images lack;
# pydantic for rmsweb.spec; transformers, peft and trl at constraints-gpu.txt's pins.
# pyarrow is left to the image: its wheel is 55 MB (datasets asks for >= 24; should the
# import check below fail on it, add pyarrow==26.0.1 to the folder).
# Install order does not matter: --no-deps.
WHEEL_LIST=(
  trl==1.16.0
  datasets==5.2.0
  dill==0.4.1
  multiprocess==0.70.19
  pydantic==2.14.4
  pydantic-core==2.50.5
  annotated-types==0.8.0
  typing-inspection==0.4.5
  typing-extensions==4.16.0
  transformers==5.20.2
  peft==0.21.2
)
GPU_TESTS=(
  tests/train/test_gpu_vl_lora.py
  tests/train/test_vllm_sampler.py
  tests/agents/test_vllm_policy.py
)

DRY_RUN=0
case "${1:-}" in
  --dry-run) DRY_RUN=1 ;;
  --wheel-list) printf '%s\n' "${WHEEL_LIST[@]}"; exit 0 ;;
  "") ;;
  *) echo "usage: $0 [--dry-run | --wheel-list]" >&2; exit 2 ;;
esac

START=$(date +%s)
FAILED=0
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 DVC_NO_ANALYTICS=1 PYTHONUNBUFFERED=1
export SKYPILOT_DISABLE_USAGE_COLLECTION=1

phase() { echo "== gpu_smoke [$(( $(date +%s) - START )) s]: $*" >&2; }

# ---------------------------------------------------------------- 1. packages
if compgen -G "$WHEELS/*.whl" >/dev/null; then
  phase "installing $(ls "$WHEELS"/*.whl | wc -l) wheels from $WHEELS into $SITE"
  pip_args=(install -q --no-index --find-links "$WHEELS" --no-deps --no-compile
            --no-cache-dir --upgrade --target "$SITE")
  # --dry-run: pip checks the wheels against the GPU image's Python and platform.
  [ "$DRY_RUN" = 1 ] && pip_args+=(--dry-run --only-binary=:all: --implementation cp
    --python-version "${RMSWEB_WHEELS_PYTHON:-3.12}" --platform manylinux_2_28_x86_64
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
  if ! "$PY" -m pip "${pip_args[@]}" "$WHEELS"/*.whl; then
    echo "gpu_smoke: pip could not install the wheels in $WHEELS" >&2
    FAILED=1
  fi
  [ "$DRY_RUN" = 1 ] || export PYTHONPATH="$SITE:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
else
  phase "no wheels in $WHEELS: using this Python's packages as they are"
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
if ! "$PY" -c "import torch, transformers, peft, trl, datasets, pydantic, rmsweb" 2>"$LOG_DIR/imports.err"; then
  echo "gpu_smoke: a package is missing (see below); build the wheel folder (header of $0)" >&2
  tail -n 3 "$LOG_DIR/imports.err" >&2
  FAILED=1
fi

# ---------------------------------------------------------------- 2. gpu_step
if [ "$DRY_RUN" = 1 ]; then
  # The code path, not the numbers: one step of each, 2 sequences of 4 new tokens.
  step_args=(--tiny --device cpu --steps 1 --warmup 0 --states 1 --group 2 --new-tokens 4)
  step_limit=540  # a CPU shared with other work; the budget is the GPU run's
else
  step_args=(--steps 3 --warmup 1)  # 8B shape: about 2 minutes on an H200
  step_limit=300
fi
phase "benchmarks/gpu_step.py ${step_args[*]}"
timeout "$step_limit" "$PY" "$ROOT/benchmarks/gpu_step.py" "${step_args[@]}" \
  >"$LOG_DIR/gpu_step.log" 2>&1
code=$?
grep -v -i warn "$LOG_DIR/gpu_step.log" >&2
if [ "$code" -ne 0 ]; then
  echo "gpu_smoke: gpu_step.py failed (exit $code; 124: over its ${step_limit} s)" >&2
  FAILED=1
fi
mfu=$(grep -E '^mfu_sft=' "$LOG_DIR/gpu_step.log" | tail -n 1)
memory=$(grep -E '^memory: ' "$LOG_DIR/gpu_step.log" | tail -n 1 | sed 's/^memory: //')

# ---------------------------------------------------------------- 3. preflight
if [ "$DRY_RUN" = 1 ]; then
  pf_spec="$ROOT/experiments/paper-8b-rehearsal.yaml"  # the CPU path, the tiny model
  pf_limit=300
else
  pf_spec="$ROOT/experiments/paper-8b.yaml"  # paper-8b's shape on this GPU
  pf_limit=420
fi
pf_args=()
command -v "${RMSWEB_VLLM_BIN:-vllm}" >/dev/null 2>&1 || pf_args+=(--skip-vllm)
phase "python -m rmsweb.train.preflight ${pf_spec#"$ROOT"/} ${pf_args[*]}"
(cd "$ROOT" && timeout "$pf_limit" "$PY" -m rmsweb.train.preflight "$pf_spec" \
  --out "$LOG_DIR/preflight" "${pf_args[@]}") >"$LOG_DIR/preflight.log" 2>&1
code=$?
grep -E '^(preflight|error|  fix)' "$LOG_DIR/preflight.log" >&2
if [ "$code" -ne 0 ]; then
  echo "gpu_smoke: the preflight failed (exit $code; 124: over its ${pf_limit} s)" >&2
  tail -n 5 "$LOG_DIR/preflight.log" >&2
  FAILED=1
fi
preflight=$("$PY" - "$LOG_DIR/preflight/metrics.json" <<'PYEOF' 2>/dev/null
import json, sys
try:
    m = json.load(open(sys.argv[1]))
except OSError:
    print("preflight=failed preflight_sft_vs_plan=nan preflight_rl_vs_plan=nan preflight_vllm=failed")
    raise SystemExit
c = m["checks"]
def ratio(name):
    v = c.get(name, {}).get("peak_vs_plan")
    return "nan" if v is None else f"{v:.3f}"
v = c.get("vllm", {})
state = "skipped" if v.get("skipped") else ("ok" if v.get("ok") else "failed")
print(f"preflight={'ok' if m['ok'] else 'failed'} preflight_sft_vs_plan={ratio('sft_step')} "
      f"preflight_rl_vs_plan={ratio('rl_step')} preflight_vllm={state}")
PYEOF
)
[ -n "$preflight" ] || preflight="preflight=failed preflight_sft_vs_plan=nan preflight_rl_vs_plan=nan preflight_vllm=failed"

# 3b. The sharded path (compute.sharding fsdp: FSDP2, the path paper-32b takes), same spec
# and GPU(s), vLLM left out (checked above): SFT and RL steps, KL probe, checkpoint.
# Sharding needs ranks: one per GPU (2 CPU ranks on gloo in --dry-run).
pf_ranks=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[ "$DRY_RUN" = 1 ] || [ "${pf_ranks:-0}" -lt 1 ] && pf_ranks=2
phase "torchrun --nproc_per_node=$pf_ranks -m rmsweb.train.preflight ${pf_spec#"$ROOT"/} -o compute.sharding=fsdp --skip-vllm"
(cd "$ROOT" && OMP_NUM_THREADS=1 timeout "$pf_limit" "$PY" -m torch.distributed.run \
  --nproc_per_node="$pf_ranks" -m rmsweb.train.preflight "$pf_spec" \
  -o compute.sharding=fsdp --skip-vllm --out "$LOG_DIR/preflight-fsdp") \
  >"$LOG_DIR/preflight-fsdp.log" 2>&1
code=$?
grep -E '^(preflight|error|  fix)' "$LOG_DIR/preflight-fsdp.log" >&2
if [ "$code" -ne 0 ]; then
  echo "gpu_smoke: the sharded preflight failed (exit $code)" >&2
  tail -n 5 "$LOG_DIR/preflight-fsdp.log" >&2
  FAILED=1
  preflight="$preflight preflight_fsdp=failed"
else
  preflight="$preflight preflight_fsdp=ok"
fi

# ---------------------------------------------------------------- 4. gpu tests
cd "$ROOT" || exit 2
if [ "$DRY_RUN" = 1 ]; then
  phase "collecting the gpu-marked tests"
  "$PY" -m pytest -q -m gpu --collect-only -p no:cacheprovider "${GPU_TESTS[@]}" \
    >"$LOG_DIR/gpu_tests.log" 2>&1
  code=$?
  collected=$(grep -cE '::' "$LOG_DIR/gpu_tests.log")
  tests="gpu_tests_collected=$collected"
  if [ "$code" -ne 0 ] || [ "$collected" -eq 0 ]; then
    tail -n 20 "$LOG_DIR/gpu_tests.log" >&2
    FAILED=1
  fi
else
  left=$(( BUDGET_S - ($(date +%s) - START) - 10 ))
  phase "gpu-marked tests on CUDA (${left} s left of the budget)"
  timeout "$(( left > 60 ? left : 60 ))" "$PY" -m pytest -q -rs -m gpu -p no:cacheprovider \
    "${GPU_TESTS[@]}" >"$LOG_DIR/gpu_tests.log" 2>&1
  code=$?
  tail -n 25 "$LOG_DIR/gpu_tests.log" >&2
  count() { grep -oE "[0-9]+ $1" "$LOG_DIR/gpu_tests.log" | tail -n 1 | cut -d' ' -f1; }
  tests="gpu_tests_passed=$(count passed || true) gpu_tests_failed=$(count failed || true)"
  tests="$tests gpu_tests_skipped=$(count skipped || true)"
  tests=$(echo "$tests" | sed -E 's/=( |$)/=0\1/g')
  [ "$code" -ne 0 ] && FAILED=1
fi

# ---------------------------------------------------------------- 5. summary
took=$(( $(date +%s) - START ))
phase "done in ${took} s (budget ${BUDGET_S} s)"
[ "$DRY_RUN" = 0 ] && [ "$took" -gt "$BUDGET_S" ] && echo "gpu_smoke: over budget" >&2
echo "${mfu:-mfu_sft=nan mfu_rl=nan tokens_per_s=nan} ${memory:-sft_peak_gib=nan sft_plan_gib=nan rl_peak_gib=nan rl_plan_gib=nan} $preflight $tests"
exit "$FAILED"
