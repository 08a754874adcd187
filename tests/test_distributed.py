"""Multi-node launching: head posts distributed stages, workers join them under torchrun."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from rmsweb import distributed as launch
from rmsweb.errors import UserError


def _logging_tool(path: Path, log: Path, code: int = 0) -> Path:
    path.write_text(
        f"#!{sys.executable}\nimport sys\n"
        f"open({str(log)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        f"sys.exit({code})\n"
    )
    path.chmod(0o755)
    return path


@pytest.fixture
def fake_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A fake torchrun and dvc that log their arguments; a two-node SkyPilot environment."""
    logs = {"torchrun": tmp_path / "torchrun.log", "dvc": tmp_path / "dvc.log"}
    monkeypatch.setenv(
        "RMSWEB_TORCHRUN_BIN", str(_logging_tool(tmp_path / "torchrun", logs["torchrun"]))
    )
    monkeypatch.setenv("RMSWEB_DVC_BIN", str(_logging_tool(tmp_path / "dvc", logs["dvc"])))
    monkeypatch.setenv("RMSWEB_TORCHRUN", "--nnodes=2 --node_rank=0")
    monkeypatch.setenv("SKYPILOT_NUM_NODES", "2")
    monkeypatch.setenv("SKYPILOT_TASK_ID", "sky-managed-2026-12-01_rmsweb-paper-32b_7")
    monkeypatch.setenv("SKYPILOT_NODE_IPS", "10.0.0.1\n10.0.0.2")
    monkeypatch.setenv("RMSWEB_RENDEZVOUS_ROOT", str(tmp_path / "rdv"))
    monkeypatch.delenv("RMSWEB_RUN_ID", raising=False)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.chdir(tmp_path)  # the head reads, the worker writes ./dvc.lock
    return logs


def test_no_torchrun_env_runs_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RMSWEB_TORCHRUN", raising=False)
    assert launch.relaunch_under_torchrun(["sft", "--exp", "x"]) is None


def test_run_id_changes_with_the_attempt_not_the_node(
    fake_tools: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = launch.run_id()
    monkeypatch.setenv("SKYPILOT_NODE_RANK", "1")
    assert launch.run_id() == first  # every node of an attempt agrees
    # A managed-job recovery keeps SKYPILOT_TASK_ID but runs on new nodes.
    monkeypatch.setenv("SKYPILOT_NODE_IPS", "10.0.3.7\n10.0.3.9")
    assert launch.run_id() != first
    assert launch.rendezvous_dir().name == launch.run_id()
    monkeypatch.setenv("RMSWEB_RUN_ID", "manual")
    assert launch.rendezvous_dir() == Path(os.environ["RMSWEB_RENDEZVOUS_ROOT"]) / "manual"
    monkeypatch.delenv("RMSWEB_RUN_ID")
    monkeypatch.delenv("SKYPILOT_NODE_IPS")
    with pytest.raises(UserError, match="RMSWEB_RUN_ID"):
        launch.run_id()


def test_head_posts_lock_and_port_and_does_not_push(
    fake_tools: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKYPILOT_NODE_RANK", "0")
    Path("dvc.lock").write_text("schema: '2.0'\nstages: {collect_x: {}}\n")
    argv = ["sft", "--exp", "x", "--in", "collect=runs/collect/x", "--out", "runs/sft/x"]
    assert launch.relaunch_under_torchrun(argv) == 0
    rdv = launch.rendezvous_dir()
    posted = json.loads((rdv / "stage-0000.json").read_text())
    assert posted == {
        "argv": argv,
        "pull": ["runs/collect/x"],
        "dvc_lock": "schema: '2.0'\nstages: {collect_x: {}}\n",
        "master_port": launch.MASTER_PORT_BASE,
        "env": {},
    }
    assert fake_tools["torchrun"].read_text().split() == [
        "--nnodes=2",
        "--node_rank=0",
        f"--master_port={launch.MASTER_PORT_BASE}",
        "-m",
        "rmsweb",
        *argv,
    ]
    assert not fake_tools["dvc"].exists()  # no push: the sky task pushed every finished stage
    launch.relaunch_under_torchrun(["rl", "--exp", "x"])
    second = json.loads((rdv / "stage-0001.json").read_text())
    assert second["master_port"] == launch.MASTER_PORT_BASE + 1  # each post its own port


def test_worker_joins_posted_stages_until_done(
    fake_tools: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launch, "POLL_S", 0.05)
    monkeypatch.setenv("RMSWEB_TORCHRUN", "--nnodes=2 --node_rank=1")
    rdv = launch.rendezvous_dir()
    worker = threading.Thread(target=launch.worker_main, args=("x",), kwargs={"timeout_s": 10})
    worker.start()
    time.sleep(0.2)
    launch.post(rdv, ["sft", "--exp", "x", "--in", "collect=runs/collect/x"], "lock-v1\n")
    launch.post(rdv, ["rl", "--exp", "x"], "lock-v2\n")
    time.sleep(0.3)
    launch.worker_main("x", finish=True)
    worker.join(timeout=5)
    assert not worker.is_alive()
    assert fake_tools["torchrun"].read_text().splitlines() == [
        "--nnodes=2 --node_rank=1 --master_port=29500 -m rmsweb sft --exp x --in collect=runs/collect/x",
        "--nnodes=2 --node_rank=1 --master_port=29501 -m rmsweb rl --exp x",
    ]
    # Inputs pulled at the head's versions: its dvc.lock was written before the pull.
    assert fake_tools["dvc"].read_text().splitlines() == ["pull runs/collect/x"]
    assert Path("dvc.lock").read_text() == "lock-v2\n"


def test_worker_ranks_get_the_heads_run_key(
    fake_tools: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checkpoint folder's key is computed once on the head; workers use the same."""
    seen = tmp_path / "seen_key"
    torchrun = tmp_path / "torchrun-env"
    torchrun.write_text(
        f"#!{sys.executable}\nimport os\n"
        f"open({str(seen)!r}, 'w').write(os.environ.get('RMSWEB_RUN_KEY', 'missing'))\n"
    )
    torchrun.chmod(0o755)
    monkeypatch.setenv("RMSWEB_TORCHRUN_BIN", str(torchrun))
    monkeypatch.setenv("RMSWEB_RUN_KEY", "abc123-def456")
    job = launch.post(launch.rendezvous_dir(), ["sft", "--exp", "x"])
    assert job["env"] == {"RMSWEB_RUN_KEY": "abc123-def456"}
    monkeypatch.delenv("RMSWEB_RUN_KEY")  # the worker node's own environment lacks it
    monkeypatch.setenv("RMSWEB_TORCHRUN", "--nnodes=2 --node_rank=1")
    launch.worker_main("x", finish=True)
    launch.worker_main("x", timeout_s=5)
    assert seen.read_text() == "abc123-def456"


def test_recovered_worker_ignores_the_lost_attempts_rendezvous(
    fake_tools: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old attempt posted sft and finished; the new attempt's worker must wait for its head."""
    monkeypatch.setattr(launch, "POLL_S", 0.05)
    monkeypatch.setenv("RMSWEB_TORCHRUN", "--nnodes=2 --node_rank=1")
    old = launch.rendezvous_dir()
    launch.post(old, ["sft", "--exp", "x"])
    launch.worker_main("x", finish=True)
    monkeypatch.setenv("SKYPILOT_NODE_IPS", "10.0.9.1\n10.0.9.2")  # recovery: new nodes
    with pytest.raises(UserError, match="no word from the head"):
        launch.worker_main("x", timeout_s=0.3)
    assert not fake_tools["torchrun"].exists()  # joined nothing of the old attempt


def test_worker_fails_loudly_when_inputs_cannot_be_pulled(
    fake_tools: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "RMSWEB_DVC_BIN", str(_logging_tool(tmp_path / "dvc1", fake_tools["dvc"], 1))
    )
    monkeypatch.setenv("RMSWEB_TORCHRUN", "--nnodes=2 --node_rank=1")
    launch.post(launch.rendezvous_dir(), ["sft", "--exp", "x", "--in", "collect=runs/collect/x"])
    with pytest.raises(UserError, match="dvc pull runs/collect/x"):
        launch.worker_main("x", timeout_s=5)
    assert not fake_tools["torchrun"].exists()  # never trains on missing data
