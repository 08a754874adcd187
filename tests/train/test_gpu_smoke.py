"""benchmarks/gpu_smoke.sh without a GPU: its --dry-run takes every step on CPU with the tiny
model (gpu_step.py, the plan estimate, collecting the gpu-marked tests), so a typo in the
script fails here instead of on a GPU's clock. About 40 s on an idle 2-core machine (the
preflight's CPU path included)."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_smoke.sh"
SUMMARY = (
    r"mfu_sft=\d+\.\d{3} mfu_rl=\d+\.\d{3} tokens_per_s=\d+ "
    r"sft_peak_gib=nan sft_plan_gib=\d+\.\d{2} rl_peak_gib=nan rl_plan_gib=\d+\.\d{2} "
    r"preflight=ok preflight_sft_vs_plan=nan preflight_rl_vs_plan=nan preflight_vllm=skipped "
    r"preflight_fsdp=ok "
    r"gpu_tests_collected=(\d+)"
)


def _smoke(tmp_path: Path, python: str, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHON": python,
        "RMSWEB_WHEELS": str(tmp_path / "no-wheels"),  # this environment's packages as they are
        "OUT": str(tmp_path / "out"),
    }
    (tmp_path / "out").mkdir(exist_ok=True)
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )


@pytest.mark.slow  # the whole script on CPU (~30-40 s): `make slow`, which CI runs
def test_dry_run_takes_every_step_and_ends_with_the_summary_line(tmp_path: Path) -> None:
    proc = _smoke(tmp_path, sys.executable, "--dry-run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    last = proc.stdout.strip().splitlines()[-1]
    match = re.fullmatch(SUMMARY, last)
    assert match, last
    # Every gpu-marked test of the VL LoRA SFT/RL and vLLM files, found under their paths.
    assert int(match.group(1)) >= 5
    assert "no wheels in" in proc.stderr
    assert (tmp_path / "out" / "gpu_step.log").is_file()
    # The preflight's CPU path ran (rehearsal spec, tiny model): its figures are there.
    assert (tmp_path / "out" / "preflight" / "metrics.json").is_file()


def test_the_header_says_how_anyone_runs_it() -> None:
    """Plain shell on one's own GPU machine: no launcher of one particular setup."""
    text = SCRIPT.read_text()
    header = text[: text.index("set -uo pipefail")]
    assert "rsync" in header and "--wheel-list" in header and "RMSWEB_WHEELS" in header
    for local in ("/work/", "library", "device tool", "carry"):
        assert local not in text, local


def test_a_failing_step_fails_the_smoke_and_still_prints_the_summary(tmp_path: Path) -> None:
    """The control: a Python that cannot run anything (a broken image) fails every step;
    the script says so, exits non-zero and prints the summary with what it has (nothing)."""
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'no python here' >&2\nexit 3\n")
    broken.chmod(0o755)
    proc = _smoke(tmp_path, str(broken), "--dry-run")
    assert proc.returncode == 1
    assert "a package is missing" in proc.stderr and "gpu_step.py failed" in proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("mfu_sft=nan mfu_rl=nan tokens_per_s=nan sft_peak_gib=nan")


def test_the_wheel_list_pins_what_the_tests_pass_with() -> None:
    """Each wheel is pinned to constraints-gpu.txt's version where that file pins it (the
    cloud's stack), else to the version this environment's tests pass with."""
    listed = subprocess.run(
        ["bash", str(SCRIPT), "--wheel-list"], capture_output=True, text=True, check=True
    ).stdout.split()
    pins = dict(line.split("==") for line in listed)
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][0-9A-Za-z.]*", w) for w in listed)
    cloud = {}
    for line in (ROOT / "constraints-gpu.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            cloud[name.strip()] = version.strip()
    assert {"trl", "datasets", "pydantic", "transformers"} <= set(pins)
    for name, version in pins.items():
        want = cloud.get(name) or importlib.metadata.version(name)
        assert version == want, f"{name}: wheel list {version}, expected {want}"
