#!/usr/bin/env bash
# GPU smoke: the paper-scale path's GPU checks in one command, within 8 minutes on one H200.
#
#   bash benchmarks/gpu_smoke.sh               # on the GPU machine (no network there)
#   bash benchmarks/gpu_smoke.sh --dry-run     # anywhere, on CPU: the same steps with the
#                                              # tiny model; the default test tier runs it
#   bash benchmarks/gpu_smoke.sh --wheel-list  # the wheels it needs beyond the GPU image
#
# The GPU image has torch, transformers and peft but no network; what else rmsweb needs
# comes as wheels. In order:
# 1. Packages: every wheel in $RMSWEB_WHEELS (default .whl/ at the repo root) is installed
#    with `pip install --no-index --find-links $RMSWEB_WHEELS --no-deps --target $SITE`,
#    and PYTHONPATH is $SITE plus the repo (rmsweb runs from the checkout, not installed).
# 2. benchmarks/gpu_step.py: SFT and RL steps of the Qwen3-VL-8B shape (bf16, LoRA 64,
#    gradient checkpointing), MFU, and the peak memory of each beside `rmsweb plan`'s
#    formulas for the same shapes.
# 3. The gpu-marked tests on CUDA: tests/train/test_gpu_vl_lora.py (VL LoRA SFT and RL),
#    tests/train/test_vllm_sampler.py and tests/agents/test_vllm_policy.py (these two
#    skip where vLLM is not installed: it does not come as a wheel here, it pins its own
#    torch).
# 4. One summary line, last:
#    mfu_sft=X mfu_rl=Y tokens_per_s=Z sft_peak_gib=.. sft_plan_gib=.. rl_peak_gib=..
#    rl_plan_gib=.. gpu_tests_passed=N gpu_tests_failed=N gpu_tests_skipped=N
#    (--dry-run: peaks are nan, and the tests are collected, not run: gpu_tests_collected=N).
# The exit status is non-zero when a step failed; the summary line is printed anyway.
#
# Building the wheel folder (here, where PyPI answers; the H200 image's Python is 3.12,
# see /work/.library/device/README.md), then running it through the device tool:
#   echo /.whl/ >> "$(git rev-parse --git-common-dir)/info/exclude"   # travels, untracked
#   bash benchmarks/gpu_smoke.sh --wheel-list | xargs python3 -m pip download --no-deps \
#     --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux2014_x86_64 -d .whl
#   run(command="bash benchmarks/gpu_smoke.sh", carry=[".whl"], timeout_s=540)
# The folder is about 18 MiB (transformers is most of it); the tool carries at most 64
# MiB with the repo. Elsewhere: any folder of wheels for the target's Python, named by
# RMSWEB_WHEELS.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
WHEELS="${RMSWEB_WHEELS:-$ROOT/.whl}"
SITE="${RMSWEB_SMOKE_SITE:-/tmp/rmsweb-smoke-site}"
LOG_DIR="${OUT:-$(mktemp -d)}"  # the device tool brings $OUT back
BUDGET_S=480

# What the image lacks (its package list: /work/.library/device/KINDS.md), pinned to what
# rmsweb's tests pass with: trl, datasets and the two of their needs the image lacks;
# pydantic for rmsweb.spec; transformers and peft at constraints-gpu.txt's pins (the
# image's transformers is older). pyarrow stays the image's: its wheel is 55 MB, which
# the 64 MiB carry cannot take beside the rest (datasets asks for >= 24; should the
# import check below fail on it, carry pyarrow==26.0.1 instead of transformers).
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

# ---------------------------------------------------------------- 3. gpu tests
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

# ---------------------------------------------------------------- 4. summary
took=$(( $(date +%s) - START ))
phase "done in ${took} s (budget ${BUDGET_S} s)"
[ "$DRY_RUN" = 0 ] && [ "$took" -gt "$BUDGET_S" ] && echo "gpu_smoke: over budget" >&2
echo "${mfu:-mfu_sft=nan mfu_rl=nan tokens_per_s=nan} ${memory:-sft_peak_gib=nan sft_plan_gib=nan rl_peak_gib=nan rl_plan_gib=nan} $tests"
exit "$FAILED"
