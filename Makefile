# The two commands README.md documents. Each bootstraps what it needs:
# the venv (torch pinned to the CPU wheel by constraints.txt), SkyPilot's own
# venv (it conflicts with huggingface-hub over click) and Debian's Chromium.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SKY_VENV := .venv-sky
SKY_STAMP := $(SKY_VENV)/.installed
EXPERIMENT ?= miniwob-cpu

export DVC_NO_ANALYTICS := 1
export SKYPILOT_DISABLE_USAGE_COLLECTION := 1
export RMSWEB_SKY_PYTHON := $(abspath $(SKY_VENV))/bin/python
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: run test slow faults smoke rehearsal readme lint chromium install sky

JOBS ?= 2

run: $(STAMP) chromium  ## the main job: the default experiment through dvc repro, JOBS stages at a time
	rmsweb repro report_$(EXPERIMENT) --jobs $(JOBS)

# Test tiers. Every marker but gpu and live is selected by one of the tiers CI runs
# (.ci/run: test, slow, faults); tests/test_test_tiers.py holds these lines to that.
# Tests run on one worker per core, at most 4 (pytest-xdist; each worker builds its own
# session fixtures): most of the tier's time is subprocesses, servers and Chromium waiting.
test: $(STAMP) chromium  ## the default test tier (CPU, offline)
	pytest -q -n auto --maxprocesses=4

slow: $(STAMP) $(SKY_STAMP) chromium  ## the slow tests outside the fault suite (minutes)
	pytest -q -m 'slow and not faults and not gpu and not live'

faults: $(STAMP) chromium  ## the whole fault-injection suite (kill -9 of stages, full disk, ...)
	pytest -q -m 'faults and not gpu and not live'

STUDY ?= miniwob-cpu-paper

readme:  ## paste the default experiment's and the paper study's report tables into README.md
	python -m rmsweb.report.readme runs/report/$(EXPERIMENT)/report.md README.md
	@if [ -f runs/report/$(STUDY)/report.md ]; then \
	  python -m rmsweb.report.readme runs/report/$(STUDY)/report.md README.md paper; \
	else echo "no runs/report/$(STUDY)/report.md: run 'dvc repro report_$(STUDY)' for the paper table"; fi

smoke: $(STAMP) chromium  ## every stage on a CI-sized experiment (a few minutes)
	dvc repro report_smoke

# paper-8b's shape on CPU (experiments/paper-8b-rehearsal.yaml): the wrapper first runs the
# preflight's CPU path (`rmsweb preflight SPEC`: SFT and RL steps with the KL probe, a
# checkpoint read back, the all-reduce; on 2 gloo ranks; vLLM is GPU-only) as the spec
# says and again sharded (compute.sharding fsdp: FSDP2, paper-32b's path), then serves the
# local site and the scripted teacher/judge endpoint on 127.0.0.1, runs sft and rl under
# torchrun with 2 gloo ranks and stops the servers when dvc ends. REHEARSAL_ARGS=--force
# reruns all.
rehearsal: $(STAMP) chromium  ## the paper-scale path rehearsed on CPU (<= 10 minutes)
	python scripts/rehearsal.py $(REHEARSAL_ARGS)

lint: $(STAMP)
	ruff check .
	ruff format --check .

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt torch==2.13.0
	$(PY) -m pip install -q -c constraints.txt -e '.[dev,serve]'
	touch $@

sky: $(SKY_STAMP)  ## SkyPilot's own venv, .venv-sky (the slow tier builds it too)

# Not a prerequisite of `make test`: only two tests need it (SkyPilot's parser on
# sky/*.yaml), and they run in the slow tier.
$(SKY_STAMP): constraints-sky.txt
	test -x $(SKY_VENV)/bin/python || python3 -m venv $(SKY_VENV)
	$(SKY_VENV)/bin/python -m pip install -q --upgrade pip
	$(SKY_VENV)/bin/python -m pip install -q -c constraints-sky.txt skypilot
	touch $@

chromium:
	@if command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else \
	  echo "Chromium is missing: run 'sudo apt-get install -y chromium' (or 'playwright install chromium')." >&2; \
	  exit 1; \
	fi
