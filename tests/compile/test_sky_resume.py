"""Resume after a lost disk, with the real DVC: what the sky task's `stage` helper relies on.

A managed-job recovery starts on a fresh disk with the workdir as launched (no
outputs, the old dvc.lock). `dvc repro --pull --single-item` must then restore
every stage the lost attempt pushed (`dvc push --run-cache`) without running
it, and run only the first unfinished one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rmsweb.compile.skyfile import HELPERS

DVC_YAML = """\
stages:
  collect:
    cmd: echo collect >> {runs} && mkdir -p out && echo episodes > out/collect.txt
    deps: [code.py]  # every rmsweb stage has its code as a dep (a stage without deps always reruns)
    outs: [out/collect.txt]
  sft:
    cmd: echo sft >> {runs} && cat out/collect.txt > out/model.txt && echo trained >> out/model.txt
    deps: [out/collect.txt]
    outs: [out/model.txt]
"""


def _sh(cmd: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        ["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    dvc = Path(os.environ.get("VIRTUAL_ENV", "")) / "bin" / "dvc"
    dvc_bin = str(dvc) if dvc.exists() else shutil.which("dvc")
    if dvc_bin is None:
        pytest.skip("dvc is not installed")
    env = {
        **os.environ,
        "PATH": f"{Path(dvc_bin).parent}:{os.environ['PATH']}",
        "DVC_NO_ANALYTICS": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    origin = tmp_path / "origin"
    origin.mkdir()
    (origin / "dvc.yaml").write_text(DVC_YAML.format(runs=tmp_path / "runs.log"))
    (origin / "code.py").write_text("print('collect')\n")
    _sh("git init -q && dvc init -q && git add -A && git commit -qm init", origin, env)
    return origin, env


def _node(origin: Path, name: str, remote: Path, env: dict[str, str]) -> Path:
    """A fresh node: the launched workdir (a clone) with the bucket remote configured."""
    node = origin.parent / name
    _sh(f"git clone -q {origin} {node}", origin.parent, env)
    _sh(f"dvc remote add --local --default --force cloud {remote}", node, env)
    return node


@pytest.mark.slow  # ~10 dvc/git commands: 20-50 s on a busy 2-core machine
def test_recovery_restores_finished_stages_and_runs_the_rest(
    repo: tuple[Path, dict[str, str]],
) -> None:
    origin, env = repo
    remote = origin.parent / "bucket"
    runs = origin.parent / "runs.log"
    helpers = HELPERS.split("declare -A")[0]  # the `stage` function of the task's run script

    first = _node(origin, "attempt-1", remote, env)
    _sh(helpers + "stage collect", first, env)
    shutil.rmtree(first)  # preempted before sft: the disk is gone

    second = _node(origin, "attempt-2", remote, env)
    out = _sh(helpers + "stage collect\nstage sft", second, env)
    assert runs.read_text().split() == ["collect", "sft"]  # collect ran once, in attempt 1
    assert "is cached - skipping run" in out.stdout + out.stderr
    assert (second / "out" / "model.txt").read_text() == "episodes\ntrained\n"
