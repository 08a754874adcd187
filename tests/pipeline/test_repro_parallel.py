"""`rmsweb repro`: independent stages run side by side through DVC, and dvc.lock ends up
holding every stage (DVC writes each stage's entry under its repository lock)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from rmsweb import pipeline
from rmsweb.pipeline import chain_lengths, load_graph, plan, reproduce

# a and b each wait for the other to have started: run one at a time, the first of
# them times out and fails, so the parallel test below cannot pass serially.
WAIT_FOR = textwrap.dedent(
    """
    import os, pathlib, sys, time
    me, other, out = sys.argv[1:4]
    pathlib.Path(me).touch()
    deadline = time.monotonic() + float(os.environ.get("WAIT_S", "30"))
    while not pathlib.Path(other).exists():
        if time.monotonic() > deadline:
            sys.exit(f"{other} never appeared: not run concurrently")
        time.sleep(0.05)
    pathlib.Path(out).write_text(me)
    """
)


def _dvc(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    dvc = Path(sys.executable).with_name("dvc")
    return subprocess.run([str(dvc), *args], cwd=root, capture_output=True, text=True, check=False)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    assert _dvc(root, "init", "--no-scm", "-q").returncode == 0
    (root / "wait_for.py").write_text(WAIT_FOR)
    py = sys.executable
    stages = {
        "a": {"cmd": f"{py} wait_for.py a.started b.started out_a", "deps": ["wait_for.py"],
              "outs": ["out_a"]},
        "b": {"cmd": f"{py} wait_for.py b.started a.started out_b", "deps": ["wait_for.py"],
              "outs": ["out_b"]},
        "c": {"cmd": "cat out_a out_b > out_c", "deps": ["out_a", "out_b"], "outs": ["out_c"]},
        "d": {"cmd": "echo d > out_d", "outs": ["out_d"]},
    }  # fmt: skip
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    return root


def test_graph_and_priority(project: Path) -> None:
    nodes = load_graph(project / "dvc.yaml")
    assert nodes["c"].needs == {"a", "b"} and nodes["a"].needs == set()
    assert set(plan(nodes, ["c"])) == {"a", "b", "c"}
    assert chain_lengths(nodes) == {"a": 2, "b": 2, "c": 1, "d": 1}


def test_independent_stages_run_concurrently_and_all_reach_dvc_lock(project: Path) -> None:
    lines: list[str] = []
    outcomes = reproduce(["c", "d"], root=project, jobs=2, echo=lines.append)
    assert {o.stage: o.returncode for o in outcomes} == {"a": 0, "b": 0, "c": 0, "d": 0}, lines
    lock = yaml.safe_load((project / "dvc.lock").read_text())
    assert set(lock["stages"]) == {"a", "b", "c", "d"}
    status = _dvc(project, "status")
    assert status.returncode == 0 and "up to date" in status.stdout, status.stdout
    assert (project / "out_c").read_text() == "a.startedb.started"
    # A second run finds everything up to date: DVC decides, nothing reruns.
    (project / "a.started").unlink()
    again = reproduce(["c", "d"], root=project, jobs=2, echo=lines.append)
    assert all(o.returncode == 0 for o in again) and not (project / "a.started").exists()


def test_dry_run_lists_the_stale_stages_and_runs_nothing(project: Path) -> None:
    from rmsweb.pipeline_time import dry_run_lines

    lines = dry_run_lines(["c"], project, 2)
    assert lines[:4] == ["repro --dry-run: 3 stage(s) would run, 2 at a time", "  a", "  b", "  c"]
    # No stage here writes a metrics file with its wall: all three are unknown, and named.
    assert lines[4].endswith("3 stages (0 at their last recorded wall, 0 borrowed from their "
                             "kind, 3 unknown)")  # fmt: skip
    assert not (project / "dvc.lock").exists() and not (project / "a.started").exists()
    # A run starts with the same estimate in one line.
    from typer.testing import CliRunner

    from rmsweb.cli import app

    result = CliRunner().invoke(app, ["repro", "c", "--root", str(project)])
    assert result.exit_code == 0, result.output
    assert (
        "repro: about 0.00 h at --jobs 2, from the walls of 0 stage(s)' last runs; 3 with no "
        "wall to go by (rmsweb repro --dry-run lists them)"
    ) in result.output
    assert "repro --dry-run: 0 stage(s) would run, 2 at a time" in dry_run_lines(["c"], project, 2)


def test_one_job_at_a_time_cannot_pass_the_concurrency_check(project: Path) -> None:
    """The control: the same targets serially fail, and c (downstream) is never run."""
    os.environ["WAIT_S"] = "2"
    try:
        lines: list[str] = []
        outcomes = reproduce(["c"], root=project, jobs=1, echo=lines.append)
    finally:
        del os.environ["WAIT_S"]
    codes = {o.stage: o.returncode for o in outcomes}
    assert "c" not in codes and any(code != 0 for code in codes.values())
    assert any(
        line.startswith("not run (a stage failed): ") and line.endswith("c") for line in lines
    )
    assert any("never appeared" in line for line in lines)  # the failed stage's log tail


def test_a_lock_error_is_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    flag = tmp_path / "tried"
    script = (
        "import pathlib, sys; p = pathlib.Path(sys.argv[1])\n"
        "if not p.exists():\n    p.touch(); print('ERROR: Unable to acquire lock.'); sys.exit(1)\n"
        "print('ran')\n"
    )
    monkeypatch.setattr(
        pipeline, "dvc_command", lambda stage: [sys.executable, "-c", script, str(flag)]
    )
    outcome = pipeline.run_one("x", tmp_path, tmp_path, retries=2, pause_s=0.01)
    assert outcome.returncode == 0 and outcome.attempts == 2
    # Any other failure is not retried.
    monkeypatch.setattr(pipeline, "dvc_command", lambda stage: [sys.executable, "-c", "exit(3)"])
    outcome = pipeline.run_one("x", tmp_path, tmp_path, retries=2, pause_s=0.01)
    assert outcome.returncode == 3 and outcome.attempts == 1


def test_unknown_target_is_a_clear_error(project: Path) -> None:
    from typer.testing import CliRunner

    from rmsweb.cli import app

    result = CliRunner().invoke(app, ["repro", "nope", "--root", str(project)])
    assert result.exit_code == 2 and "unknown stage(s): nope" in result.output


def test_each_stage_gets_its_share_of_the_cores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two torch stages that each take every core run ~12x slower side by side, so the
    scheduler hands each `cores // jobs` threads (rmsweb/models/threads.py); a stage that
    runs alone gets every core."""
    for key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "RMSWEB_STAGE_THREADS"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    root = tmp_path / "proj"
    root.mkdir()
    assert _dvc(root, "init", "--no-scm", "-q").returncode == 0
    # Side by side: a and b wait for each other (so both run at once), each takes its share.
    (root / "wait_for.py").write_text(WAIT_FOR)
    py, echo_env = sys.executable, "echo $RMSWEB_STAGE_THREADS $OMP_NUM_THREADS $MKL_NUM_THREADS"
    stages = {
        name: {"cmd": f"{echo_env} > env_{name} && {py} wait_for.py {name}.s {other}.s out_{name}",
               "deps": ["wait_for.py"], "outs": [f"out_{name}"]}
        for name, other in (("a", "b"), ("b", "a"))
    }  # fmt: skip
    # t needs a and b: it starts with nothing running and nothing else ready.
    stages["t"] = {"cmd": f"{echo_env} > out", "deps": ["out_a", "out_b"], "outs": ["out"]}
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    outcomes = reproduce(["t"], root=root, jobs=2, echo=lambda line: None)
    assert all(o.returncode == 0 for o in outcomes), [o.log.read_text() for o in outcomes]
    assert (root / "env_a").read_text().split() == ["2", "2", "2"]
    assert (root / "env_b").read_text().split() == ["2", "2", "2"]
    # Alone, a stage gets every core: nothing can start beside it until it ends.
    assert (root / "out").read_text().split() == ["4", "4", "4"]
    # One job at a time: every core, as before. A count the user exported is kept.
    assert pipeline.stage_env(1, {})["OMP_NUM_THREADS"] == "4"
    assert pipeline.stage_env(8, {})["RMSWEB_STAGE_THREADS"] == "1"
    kept = pipeline.stage_env(2, {"OMP_NUM_THREADS": "3"})
    assert (kept["OMP_NUM_THREADS"], kept["RMSWEB_STAGE_THREADS"]) == ("3", "3")


def test_a_stage_left_running_alone_gets_the_freed_cores(
    tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """a and b start side by side at half the cores each; when a ends and nothing is
    ready, b's share file says every core (the training stages follow it between
    steps). With a thread count the user exported there are no share files."""
    import threading

    for key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "RMSWEB_STAGE_THREADS"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    a_done = threading.Event()
    seen: dict[str, list[str]] = {}

    def runner(stage: str, root: Path, log_dir: Path, retries: int, env=None):
        share = Path(env[pipeline.STAGE_THREADS_FILE_ENV])
        seen[stage] = [share.read_text().strip()]
        if stage == "a":
            a_done.set()
        elif stage == "b":
            assert a_done.wait(10)
            for _ in range(200):  # the scheduler rewrites it once a's end is seen
                if share.read_text().strip() == "4":
                    break
                time.sleep(0.01)
            seen[stage].append(share.read_text().strip())
        return pipeline.Outcome(stage, 0, 0.0, log_dir / f"{stage}.log", 1)

    reproduce(
        ["c"], root=project, jobs=2, runner=runner, echo=lambda _: None, status=_status_unknown
    )
    assert seen == {"a": ["2"], "b": ["2", "4"], "c": ["4"]}
    # The user's count stays fixed: no share file is named.
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    envs: list[dict] = []

    def fixed(stage: str, root: Path, log_dir: Path, retries: int, env=None):
        envs.append(dict(env))
        return pipeline.Outcome(stage, 0, 0.0, log_dir / f"{stage}.log", 1)

    reproduce(
        ["c"], root=project, jobs=2, runner=fixed, echo=lambda _: None, status=_status_unknown
    )
    assert envs and all(pipeline.STAGE_THREADS_FILE_ENV not in e for e in envs)


def test_a_raised_share_is_taken_back_when_new_stages_join(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """6 cores, 3 jobs: p and q start alone together (3 cores each); q's end makes r1 and
    r2 ready, and with three running p's share goes back to 2, not left at 3."""
    import threading

    for key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "RMSWEB_STAGE_THREADS"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    root = tmp_path / "proj"
    root.mkdir()
    stages = {
        "p": {"cmd": "true", "outs": ["out_p"]},
        "q": {"cmd": "true", "outs": ["out_q"]},
        "r1": {"cmd": "true", "deps": ["out_q"], "outs": ["out_r1"]},
        "r2": {"cmd": "true", "deps": ["out_q"], "outs": ["out_r2"]},
    }
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    started, checked = threading.Barrier(3), threading.Barrier(3)
    seen: dict[str, list[str]] = {}

    def runner(stage: str, root: Path, log_dir: Path, retries: int, env=None):
        share = Path(env[pipeline.STAGE_THREADS_FILE_ENV])
        seen[stage] = [share.read_text().strip()]
        if stage in ("r1", "r2"):
            started.wait(10)
            checked.wait(10)  # run on until p has read its share
        elif stage == "p":
            started.wait(10)  # r1 and r2 have started: three running
            for _ in range(200):
                if share.read_text().strip() == "2":
                    break
                time.sleep(0.01)
            seen[stage].append(share.read_text().strip())
            checked.wait(10)
        return pipeline.Outcome(stage, 0, 0.0, log_dir / f"{stage}.log", 1)

    reproduce(
        ["p", "r1", "r2"], root=root, jobs=3, runner=runner, echo=lambda _: None,
        status=_status_unknown,
    )  # fmt: skip
    assert seen["p"][-1] == "2" and seen["r1"] == ["2"] and seen["r2"] == ["2"], seen


def _status_unknown(root: Path, targets: list[str]) -> None:
    """A `dvc status` that cannot answer: every planned stage runs."""
    return None


def test_a_training_stage_follows_its_share_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    from rmsweb.models.threads import ThreadShare, share_callback

    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        path = tmp_path / "share"
        share = ThreadShare(path, every_s=0.0)
        assert share.poll() is None  # no file yet: threads unchanged
        path.write_text("1\n")
        assert share.poll() is None and torch.get_num_threads() == 1  # the starting share
        path.write_text("2\n")
        assert share.poll() == 2 and torch.get_num_threads() == 2
        assert share.poll() is None  # unchanged
        path.write_text("junk")
        assert share.poll() is None and torch.get_num_threads() == 2
        monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")  # torchrun's ranks split it
        path.write_text("4\n")
        assert share.poll() == 2
        # Read at most every `every_s` seconds: a change waits for the next read.
        slow = ThreadShare(path, every_s=3600.0)
        path.write_text("2\n")
        assert slow.poll() == 1  # the first read is at once
        path.write_text("6\n")
        assert slow.poll() is None and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    monkeypatch.setenv(pipeline.STAGE_THREADS_FILE_ENV, str(path))
    assert len(share_callback(None)) == 1
    assert share_callback(2) == []  # the spec's torch_threads wins
    monkeypatch.delenv(pipeline.STAGE_THREADS_FILE_ENV)
    assert share_callback(None) == []  # not under the scheduler


def test_a_stage_takes_the_spec_then_the_schedulers_thread_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rmsweb.models.threads import torch_threads

    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    monkeypatch.delenv("RMSWEB_STAGE_THREADS", raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert torch_threads(None) == 6
    monkeypatch.setenv("RMSWEB_STAGE_THREADS", "3")
    assert (torch_threads(None), torch_threads(2)) == (3, 2)
    monkeypatch.setenv("RMSWEB_STAGE_THREADS", "junk")
    assert torch_threads(None) == 6
    # torchrun's ranks on one node split the stage's share (never below 1 thread)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert torch_threads(None) == 3
    monkeypatch.setenv("RMSWEB_STAGE_THREADS", "2")
    assert (torch_threads(None), torch_threads(4)) == (1, 4)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    assert torch_threads(None) == 1


def test_only_stale_stages_and_their_downstream_run(project: Path) -> None:
    """`rmsweb repro` asks `dvc status` once and starts nothing that is up to date (a
    resumed sweep never reruns a finished point); a stale stage's downstream runs too."""
    started: list[str] = []

    def runner(stage: str, root: Path, log_dir: Path, retries: int, env=None):
        started.append(stage)
        return pipeline.Outcome(stage, 0, 0.0, log_dir / f"{stage}.log", 1)

    reproduce(
        ["c", "d"], root=project, runner=runner, echo=lambda _: None, status=lambda r, t: {"a"}
    )
    assert sorted(started) == ["a", "c"]  # b and d are fresh; c is below a
    started.clear()
    reproduce(
        ["c", "d"], root=project, runner=runner, echo=lambda _: None, status=lambda r, t: set()
    )
    assert started == []
    started.clear()
    # When `dvc status` cannot answer, every stage goes to DVC, which decides.
    reproduce(
        ["c", "d"], root=project, runner=runner, echo=lambda _: None, status=lambda r, t: None
    )
    assert sorted(started) == ["a", "b", "c", "d"]


def test_stale_stages_reads_dvc_status(project: Path) -> None:
    from rmsweb.pipeline import stale_stages

    assert stale_stages(project, ["d"]) == {"d"}  # never run
    assert _dvc(project, "repro", "d").returncode == 0
    assert stale_stages(project, ["d"]) == set()
    assert stale_stages(project, ["c"]) == {"a", "b", "c"}
