"""kill -9 of `rmsweb repro` in the middle of a sweep, then `rmsweb repro` again: the
finished point is not rerun (each point's stage starts once across both runs), the
killed one runs again, and the sweep's table equals an uninterrupted run's.

A scratch DVC project holds a two-point sweep over a tiny collection (2 MiniWoB tasks x
3 train seeds; metric: the collection's yield), with the package linked in so the
stages' code deps resolve. Slow: three runs of two collect stages.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmsweb.env.launch import chromium_pids

pytestmark = [pytest.mark.faults, pytest.mark.slow, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]
SPEC = """\
extends: miniwob-cpu.yaml
name: sweepkill
suite:
  tasks: [click-button, enter-text]
  train: {start: 0, count: 3}
collect: {processes: 1}
sft: {demos_per_task: null}
sweep:
  errs:
    split: train
    metric: collect.yield
    axes:
      err: {collect.teacher.error_rate: [0.0, 0.5]}
"""
FIRST, SECOND = "collect_errs-err0p0", "collect_errs-err0p5"
TARGET = "sweep-errs_sweepkill"


def _project(root: Path) -> Path:
    root.mkdir()
    (root / "rmsweb").symlink_to(ROOT / "rmsweb")
    (root / "experiments").mkdir()
    (root / "experiments" / "miniwob-cpu.yaml").write_text(
        (ROOT / "experiments" / "miniwob-cpu.yaml").read_text()
    )
    (root / "experiments" / "sweepkill.yaml").write_text(SPEC)
    bin_dir = Path(sys.executable).parent
    assert subprocess.run([bin_dir / "dvc", "init", "--no-scm", "-q"], cwd=root).returncode == 0
    done = subprocess.run([bin_dir / "rmsweb", "compile"], cwd=root, capture_output=True)
    assert done.returncode == 0, done.stderr
    return root


def _repro(root: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    return subprocess.Popen(
        [Path(sys.executable).with_name("rmsweb"), "repro", TARGET, "--jobs", "1"],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,  # its own process group: kill -9 takes DVC and the stage
    )


def _results(root: Path) -> list[str]:
    rows = (root / "metrics" / "sweep" / "errs.csv").read_text().splitlines()
    return rows


def test_kill_during_a_sweep_then_repro_finishes_without_rerunning(tmp_path: Path) -> None:
    before = set(chromium_pids())
    reference = _project(tmp_path / "reference")
    ref = _repro(reference)
    out, _ = ref.communicate(timeout=900)
    assert ref.returncode == 0, out

    root = _project(tmp_path / "killed")
    first = _repro(root)
    lines: list[str] = []
    assert first.stdout is not None
    deadline = time.monotonic() + 600
    for line in first.stdout:  # kill as soon as the second point's stage has started
        lines.append(line)
        if f"start {SECOND}" in line:
            time.sleep(3)  # inside the stage, not at its first line
            os.killpg(first.pid, signal.SIGKILL)
            break
        assert time.monotonic() < deadline, "".join(lines)
    first.wait(timeout=60)
    assert first.returncode == -signal.SIGKILL, "".join(lines)
    assert any(f"done  {FIRST}" in line for line in lines), "".join(lines)
    time.sleep(2)
    for pid in set(chromium_pids()) - before:  # the killed stage's browser, if it outlived it
        os.kill(pid, signal.SIGKILL)

    second = _repro(root)
    out, _ = second.communicate(timeout=900)
    assert second.returncode == 0, out
    both = "".join(lines) + out
    assert both.count(f"start {FIRST}") == 1, both  # finished before the kill: not rerun
    assert both.count(f"start {SECOND}") == 2, both  # killed: run again
    assert "1 of 3 stage(s) up to date" in out, out
    assert _results(root) == _results(reference)
