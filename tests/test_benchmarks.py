"""Every script under benchmarks/ runs at a tiny size and prints its result line.

A schema or API change that breaks a benchmark fails here, not months later when
someone wants its figures. Each run is shrunk to seconds (the comment says how); the
figures themselves mean nothing at this size, only the line's shape and the run's
success. benchmarks/rl_efficiency.py is run by tests/benchmarks/test_rl_efficiency_bench.py,
benchmarks/mine_throughput.py by tests/train/test_mine_throughput_bench.py (both need
the tiny model fixtures there), benchmarks/gpu_step.py by tests/test_gpu_step.py.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
NUMBER = r"(?:\d+(?:\.\d+)?|nan)"


def run(*args: str, timeout: float = 300) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-3000:])
    return proc.stdout.strip().splitlines()


def test_every_benchmark_script_is_run_by_a_test() -> None:
    """A new script needs its tiny run here (or in the test this docstring names)."""
    scripts = {p.name for p in BENCH.iterdir() if p.suffix in (".py", ".sh")}
    tests = (ROOT / "tests").rglob("test_*.py")
    mentioned = {
        s
        for t in tests
        for s in scripts
        if f"benchmarks/{s}" in t.read_text() or f'"{s}"' in t.read_text()
    }
    assert scripts <= mentioned, sorted(scripts - mentioned)


def test_report_scale_runs_and_both_engines_agree() -> None:
    # --scale 0.002 --pandas-scale 0.001: DuckDB on 2,000 steps over 100 episodes and on
    # 1,000 beside pandas (the committed run is --scale 100 --pandas-scale 10)
    lines = run(
        "benchmarks/report_scale.py", "--scale", "0.002", "--pandas-scale", "0.001",
        "--repeat", "1",
    )  # fmt: skip
    last = re.fullmatch(
        rf"rows=2000 duckdb_s=({NUMBER}) duckdb_cpu_s=({NUMBER}) peak_mb=(\d+) "
        rf"pandas_rows=1000 duckdb_at_pandas_rows_s=({NUMBER}) pandas_s=({NUMBER}) "
        rf"speedup=({NUMBER}) pandas_peak_mb=(\d+) memory_ratio=({NUMBER}) agree=(yes|no)",
        lines[-1],
    )
    assert last, lines[-1]
    assert last.group(9) == "yes", "\n".join(lines)  # the same numbers from both engines
    assert any(line.startswith("synthesized 2,000 steps") for line in lines)
    assert any(line.startswith("synthesized 1,000 steps") for line in lines)
    # each phase's own peak: not the synthesis' (ru_maxrss carries it over fork and exec)
    assert 0 < int(last.group(3)) < 1024 and 0 < int(last.group(7)) < 1024


_PEAK_AFTER_A_BIG_PARENT = """
import subprocess, sys
ballast = bytearray(400 * 2**20)  # 400 MiB touched in the parent
ballast[:: 4096] = b"x" * len(ballast[:: 4096])
code = "import importlib.util as u; s = u.spec_from_file_location('rs', sys.argv[1]); "
code += "m = u.module_from_spec(s); s.loader.exec_module(m); print(round(m.peak_mb()))"
print(subprocess.run([sys.executable, "-c", "import sys; " + code, sys.argv[1]],
                     capture_output=True, text=True, check=True).stdout.strip())
"""


def test_report_scale_peak_is_the_phase_processs_own() -> None:
    """A phase starts after the synthesis in the same parent: its peak must not be the
    parent's (ru_maxrss is carried over fork and exec; VmHWM is not)."""
    proc = subprocess.run(
        [sys.executable, "-c", _PEAK_AFTER_A_BIG_PARENT, str(BENCH / "report_scale.py")],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert 0 < int(proc.stdout.strip()) < 300, proc.stdout


@pytest.mark.browser
def test_env_throughput_runs_without_browsergym() -> None:
    # --episodes 1 --contexts 1: one seed per task, one context; BrowserGym (its own
    # venv, minutes per episode) is skipped
    lines = run(
        "benchmarks/env_throughput.py", "--episodes", "1", "--contexts", "1", "--skip-browsergym"
    )
    assert re.fullmatch(
        rf"ratio_vs_browsergym_text=nan ratio_vs_browsergym_screenshot=nan "
        rf"ratio_vs_raw_text={NUMBER}",
        lines[-1],
    ), lines[-1]
    assert any("100.0% ok" in line for line in lines if line.startswith("rmsweb text"))


def test_sft_throughput_tiny() -> None:
    # --tiny: synthetic samples and a tiny model; 3 steps of 4 samples on one thread
    lines = run(
        "benchmarks/sft_throughput.py", "--tiny", "--steps", "3", "--batch-size", "4",
        "--threads", "1",
    )  # fmt: skip
    assert re.fullmatch(
        rf"sft_samples_per_s={NUMBER} plain_loop_samples_per_s={NUMBER} ratio={NUMBER}",
        lines[-1],
    ), lines[-1]


def test_thread_share_tiny_follows_the_freed_share() -> None:
    # --tiny: synthetic samples and a tiny model; 6 steps of 4, the share read at every step
    lines = run(
        "benchmarks/thread_share.py", "--tiny", "--steps", "6", "--batch-size", "4",
        "--poll-s", "0",
    )  # fmt: skip
    # The following run started at 1 thread and ends at the 2 its share file says.
    assert "threads at the end of the following run: 2" in lines, lines
    assert re.fullmatch(
        rf"fixed_1_s={NUMBER} fixed_2_s={NUMBER} follow_s={NUMBER} "
        rf"follow_vs_fixed_1={NUMBER} ideal_s={NUMBER}",
        lines[-1],
    ), lines[-1]


def test_completion_loss_benchmark_small() -> None:
    lines = run(
        "benchmarks/completion_loss.py", "--batch-size", "2", "--prompt-tokens", "40",
        "--steps", "1",
    )  # fmt: skip
    assert re.fullmatch(
        rf"own_loss_s_per_step={NUMBER} completion_loss_s_per_step={NUMBER} "
        rf"speedup={NUMBER}",
        lines[-1],
    ), lines[-1]


# A process that burns CPU, then exits without its parent waiting for it (its parent exits
# first, so init reaps it): rusage never sees its CPU, as with Chromium's renderers.
_UNREAPED_BURN = """
import os, time
r, w = os.pipe()
if os.fork() == 0:
    os.close(r)
    end = time.process_time() + 1.5
    while time.process_time() < end:
        pass
    os._exit(0)
os.close(w)
os.read(r, 1)  # EOF once the child has exited; it stays unreaped
os._exit(7)
"""


def test_cores_counts_what_rusage_misses() -> None:
    proc = subprocess.run(
        [sys.executable, "benchmarks/cores.py", "--", sys.executable, "-c", _UNREAPED_BURN],
        capture_output=True, text=True, timeout=60, cwd=ROOT, check=False,
    )  # fmt: skip
    assert proc.returncode == 7, proc.stderr  # the command's exit code
    line = proc.stderr.strip().splitlines()[-1]
    m = re.fullmatch(
        rf"machine_cores=({NUMBER}) rusage_cores=({NUMBER}) wall_s=\d+ ratio=({NUMBER}|inf)",
        line,
    )
    assert m, line
    machine, rusage = float(m[1]), float(m[2])
    # 1.5 CPU seconds in a run of about as long: the machine saw them, rusage did not.
    assert rusage < 0.3 and machine > rusage + 0.5, line


def test_raw_plans_cover_the_benchmark_tasks() -> None:
    """raw_plans.py is a library of env_throughput.py and browsergym_worker.py (run above
    through env_throughput); here each of its tasks gets a plan from an utterance."""
    spec = importlib.util.spec_from_file_location("raw_plans", BENCH / "raw_plans.py")
    assert spec is not None and spec.loader is not None
    raw = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(raw)
    utterances = {
        "click-button": 'Click on the "Submit" button.',
        "click-link": 'Click on the link "home".',
        "enter-text": 'Enter "Bob" into the text field and press Submit.',
        "login-user": 'Enter the username "ann" and the password "pw" into the text fields '
        "and press login.",
        "click-checkboxes": 'Select "abc", "def" and click Submit.',
    }
    assert set(raw.TASKS) == set(utterances)
    for task in raw.TASKS:
        plan = raw.raw_plan(task, utterances[task])
        assert plan and all(kind in ("click", "fill") for kind, _sel, _text in plan), task


def test_browsergym_worker_runs_in_browsergym_venv(tmp_path: Path) -> None:
    """The worker runs in BrowserGym's own venv (env_throughput.py makes it); without
    BrowserGym here, only that it fails for that reason, naming the module."""
    if importlib.util.find_spec("browsergym") is not None:  # pragma: no cover - its venv
        pytest.skip("BrowserGym is installed: env_throughput.py's full run covers the worker")
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"tasks": ["click-button"], "seeds": [0]}))
    proc = subprocess.run(
        [sys.executable, str(BENCH / "browsergym_worker.py"), str(job)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0 and "No module named 'browsergym'" in proc.stderr


@pytest.mark.slow
def test_dvc_status_times_the_three_cases() -> None:
    """benchmarks/dvc_status.py at its smallest: one timing of each case, 2x the stages."""
    lines = run("benchmarks/dvc_status.py", "--repeat", "1", "--factor", "2", timeout=900)
    assert lines[0].startswith("dvc status report_miniwob-cpu, best of 1")
    assert (
        "C parser" in lines[1] and "pure-Python parser" in lines[2] and "2x the stages" in lines[3]
    )
    ratio = re.fullmatch(rf"ratio pure / C: ({NUMBER}); 2x / 1x: ({NUMBER})", lines[4])
    assert ratio, lines
    assert lines[5].startswith("targets: <= 3 s now (")
