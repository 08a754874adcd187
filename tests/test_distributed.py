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


@pytest.fixture
def fake_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake torchrun that logs its arguments, and a no-op dvc."""
    log = tmp_path / "torchrun.log"
    script = tmp_path / "torchrun"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nopen({str(log)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("RMSWEB_TORCHRUN_BIN", str(script))
    monkeypatch.setenv("RMSWEB_DVC_BIN", "true")
    monkeypatch.setenv("RMSWEB_TORCHRUN", "--nnodes=2 --node_rank=0")
    monkeypatch.setenv("SKYPILOT_NUM_NODES", "2")
    monkeypatch.setenv("RMSWEB_RENDEZVOUS", str(tmp_path / "rdv"))
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    return log


def test_no_torchrun_env_runs_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RMSWEB_TORCHRUN", raising=False)
    assert launch.relaunch_under_torchrun(["sft", "--exp", "x"]) is None


def test_head_posts_and_relaunches(fake_tools: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYPILOT_NODE_RANK", "0")
    argv = ["sft", "--exp", "x", "--in", "collect=runs/collect/x", "--out", "runs/sft/x"]
    assert launch.relaunch_under_torchrun(argv) == 0
    posted = json.loads((Path(os.environ["RMSWEB_RENDEZVOUS"]) / "stage-0000.json").read_text())
    assert posted == {"argv": argv, "pull": ["runs/collect/x"]}
    assert fake_tools.read_text().split() == ["--nnodes=2", "--node_rank=0", "-m", "rmsweb", *argv]


def test_worker_joins_posted_stages_until_done(
    fake_tools: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launch, "POLL_S", 0.05)
    monkeypatch.setenv("RMSWEB_TORCHRUN", "--nnodes=2 --node_rank=1")
    rdv = Path(os.environ["RMSWEB_RENDEZVOUS"])
    worker = threading.Thread(target=launch.worker_main, args=("x",), kwargs={"timeout_s": 10})
    worker.start()
    time.sleep(0.2)
    launch.post(rdv, ["sft", "--exp", "x"])
    launch.post(rdv, ["rl", "--exp", "x"])
    time.sleep(0.3)
    launch.worker_main("x", finish=True)
    worker.join(timeout=5)
    assert not worker.is_alive()
    runs = fake_tools.read_text().splitlines()
    assert runs == [
        "--nnodes=2 --node_rank=1 -m rmsweb sft --exp x",
        "--nnodes=2 --node_rank=1 -m rmsweb rl --exp x",
    ]
