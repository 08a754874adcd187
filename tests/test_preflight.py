"""The preflight (issue: the first GPU run survives): its CPU path on the rehearsal spec in
one process and on 2 gloo ranks, its failure messages, and its place in `make rehearsal`.
The GPU parts (peak memory against the plan, vLLM serving) run in benchmarks/gpu_smoke.sh."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rmsweb.cli import app
from rmsweb.errors import UserError
from rmsweb.train.preflight import checks
from rmsweb.train.preflight import stage as preflight

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "experiments" / "paper-8b-rehearsal.yaml"
CHECKS = {"all_reduce", "sft_step", "rl_step", "checkpoint", "vllm"}


def _run(tmp: Path, torchrun: str | None = None) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "DVC_NO_ANALYTICS": "1"}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"  # torchrun
    env.pop("RMSWEB_TORCHRUN", None)
    if torchrun:
        env["RMSWEB_TORCHRUN"] = torchrun
    cmd = [sys.executable, "-m", "rmsweb", "preflight", str(SPEC), "--out", str(tmp)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "preflight: all_reduce ok" in done.stdout
    return json.loads((tmp / "metrics.json").read_text())


def test_cpu_path_runs_every_check_but_vllm(tmp_path: Path) -> None:
    m = _run(tmp_path)
    assert m["ok"] and m["device"] == "cpu" and m["world_size"] == 1
    assert set(m["checks"]) == CHECKS
    assert m["checks"]["vllm"]["skipped"]
    sft, rl = m["checks"]["sft_step"], m["checks"]["rl_step"]
    assert sft["plan_gib"] > 0 and sft["peak_gib"] is None  # no CUDA: nothing to compare
    assert sft["tokens_per_sample"] > 1000  # the spec's longest prompt, screenshot included
    assert rl["micro_batch"] == 4 and rl["probe_states"] >= 1 and rl["entropy"] > 0
    assert m["checks"]["checkpoint"]["ok"] and m["checks"]["checkpoint"]["mib"] > 0


def test_two_gloo_ranks_join_the_all_reduce(tmp_path: Path) -> None:
    m = _run(tmp_path, "--standalone --nproc_per_node=2")
    assert m["ok"] and m["world_size"] == 2
    assert m["checks"]["all_reduce"]["world_size"] == 2
    assert m["checks"]["rl_step"]["sequences"] == 8  # one micro-batch of 4 a rank


def test_a_failed_check_names_itself_and_its_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rmsweb.spec import load_experiment

    spec = load_experiment(SPEC)

    def oom(*_: object) -> dict:
        raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(checks, "sft_step", oom)
    monkeypatch.setattr(checks, "rl_policy_and_trainer", oom)
    with pytest.raises(UserError) as err:
        preflight.run(spec, tmp_path, tmp_path / "m.json")
    text = str(err.value)
    assert "sft_step: RuntimeError: CUDA out of memory" in text
    assert "fix: lower sft.batch_size" in text and "fix: lower rl.micro_batch_size" in text
    m = json.loads((tmp_path / "m.json").read_text())  # the figures are written anyway
    assert not m["ok"] and m["failed_on_ranks"] == {"0": ["sft_step", "rl_step"]}


def test_peak_over_the_plan_fails_and_under_it_is_noted() -> None:
    over = checks.compare({}, 11.6, 10.0)
    assert over["_failed"] and "1.16x the plan's 10.0 GiB" in over["_message"]
    assert "_failed" not in checks.compare({}, 11.4, 10.0)
    assert "over-counts" in checks.compare({}, 8.0, 10.0)["note"]
    assert checks.compare({}, float("nan"), 10.0)["peak_vs_plan"] is None


def test_cli_needs_a_spec_or_a_stage() -> None:
    result = CliRunner().invoke(app, ["preflight"])
    assert result.exit_code == 2 and "give a spec file or --exp NAME" in result.output


def test_make_rehearsal_runs_the_preflight_first() -> None:
    text = (ROOT / "scripts" / "rehearsal.py").read_text()
    assert text.index("preflight_command()") < text.index("cmd, cwd=ROOT")
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import rehearsal
    finally:
        sys.path.pop(0)
    cmd = rehearsal.preflight_command("python")
    assert cmd[:5] == ["python", "-m", "rmsweb", "preflight", rehearsal.SPEC]
    assert (ROOT / rehearsal.SPEC).is_file()
    assert "scripts/rehearsal.py" in (ROOT / "Makefile").read_text()
