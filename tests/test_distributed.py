"""Multi-node launching: head posts distributed stages, workers join them under torchrun."""

from __future__ import annotations

import json
import os
import subprocess
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
    rdv = launch.rendezvous_dir()
    rdv.mkdir(parents=True)
    for seq in (0, 1):  # the worker node is ready for both posts (see the test below)
        launch.ready_marker(rdv, seq, 1).write_text("ready\n")
    assert launch.relaunch_under_torchrun(argv) == 0
    posted = json.loads((rdv / "stage-0000.json").read_text())
    assert posted == {
        "mode": "torchrun",
        "argv": argv,
        "pull": ["runs/collect/x"],
        "dvc_lock": "schema: '2.0'\nstages: {collect_x: {}}\n",
        "master_port": launch.MASTER_PORT_BASE,
        "env": {},
        "servers": [],
        "seq": 0,
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


def test_head_starts_torchrun_only_once_the_worker_has_pulled(
    fake_tools: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's `dvc pull` (slow: a 17.5 GB model) ends before the head's torchrun
    starts, so torchrun's rendezvous never waits on a pull."""
    monkeypatch.setattr(launch, "POLL_S", 0.05)
    events = tmp_path / "events"

    def tool(name: str, line: str, sleep: float = 0.0) -> str:
        path = tmp_path / name
        path.write_text(
            f"#!{sys.executable}\nimport time\ntime.sleep({sleep})\n"
            f"open({str(events)!r}, 'a').write({line!r} + '\\n')\n"
        )
        path.chmod(0o755)
        return str(path)

    worker_env = {
        **os.environ,
        "SKYPILOT_NODE_RANK": "1",
        "RMSWEB_TORCHRUN": "--nnodes=2 --node_rank=1",
        "RMSWEB_DVC_BIN": tool("dvc-slow", "worker pulled", sleep=1.5),
        "RMSWEB_TORCHRUN_BIN": tool("torchrun-worker", "worker torchrun"),
    }
    code = "from rmsweb import distributed as d; d.POLL_S = 0.05; d.worker_main('x', timeout_s=30)"
    worker = subprocess.Popen([sys.executable, "-c", code], env=worker_env)
    monkeypatch.setenv("SKYPILOT_NODE_RANK", "0")
    monkeypatch.setenv("RMSWEB_TORCHRUN_BIN", tool("torchrun-head", "head torchrun"))
    argv = ["sft", "--exp", "x", "--in", "model=runs/model/x"]
    assert launch.relaunch_under_torchrun(argv) == 0
    launch.worker_main("x", finish=True)
    assert worker.wait(timeout=30) == 0
    lines = events.read_text().splitlines()
    assert lines.index("worker pulled") < lines.index("head torchrun"), lines


def test_head_stops_with_the_workers_pull_failure(
    fake_tools: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launch, "POLL_S", 0.05)
    monkeypatch.setenv(
        "RMSWEB_DVC_BIN", str(_logging_tool(tmp_path / "dvc1", fake_tools["dvc"], 1))
    )
    monkeypatch.setenv("SKYPILOT_NODE_RANK", "1")
    folder = launch.rendezvous_dir()
    job = launch.post(folder, ["sft", "--exp", "x", "--in", "collect=runs/collect/x"])
    with pytest.raises(UserError, match="dvc pull"):
        launch.worker_main("x", timeout_s=5)
    with pytest.raises(UserError, match=r"worker node 1 cannot join stage-0000: .*dvc pull"):
        launch.wait_until_ready(folder, job["seq"], 2, timeout_s=5)
    launch.ready_marker(folder, 1, 1).write_text("ready\n")  # a later post: node 1 ready
    with pytest.raises(UserError, match=r"worker node\(s\) \[2\] not ready"):
        launch.wait_until_ready(folder, 1, 3, timeout_s=0.2)  # node 2 never came
    assert not fake_tools["torchrun"].exists()


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


# --------------------------------------------------------------------------- sharded stages

FAKE_VLLM = """#!{python}
import http.server, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
open({log!r}, "a").write(" ".join(sys.argv[1:]) + "\\n")

class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_sharded_stage_runs_on_the_worker_with_its_servers_and_reports_failure(
    fake_tools: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker starts the stage's local servers, runs the posted command as a plain
    process (no torchrun), reruns it when it dies, then marks its node folder `failed`."""
    log = tmp_path / "vllm.log"
    vllm = tmp_path / "vllm"
    vllm.write_text(FAKE_VLLM.format(python=sys.executable, log=str(log)))
    vllm.chmod(0o755)
    monkeypatch.setenv("RMSWEB_VLLM_BIN", str(vllm))
    monkeypatch.setenv("HOME", str(tmp_path))  # the server's log file goes to ~/vllm-PORT.log
    monkeypatch.setenv("SKYPILOT_NODE_RANK", "0")
    monkeypatch.setenv("RMSWEB_RUN_KEY", "collect-key")  # what the head's stage command sets
    port = _free_port()
    # A stage command that fails at once: this experiment is not in any params.yaml.
    argv = ["collect", "--exp", "nope", "--out", "runs/collect/nope", "--metrics", "m.json"]
    launch.post_sharded(argv, [(port, 30, ["Qwen/Teacher", "--max-model-len", "4096"])])
    job = json.loads((launch.rendezvous_dir() / "stage-0000.json").read_text())
    assert job["mode"] == "shards" and job["servers"] == [
        [port, 30, ["Qwen/Teacher", "--max-model-len", "4096"]]
    ]
    monkeypatch.setenv("SKYPILOT_NODE_RANK", "1")
    monkeypatch.delenv("RMSWEB_RUN_KEY")  # the worker has the posted one only
    with pytest.raises(UserError, match="exit 2 after 3 tries"):
        launch.worker_main("nope", timeout_s=10)
    assert not fake_tools["torchrun"].exists()  # a plain process, not torchrun
    assert log.read_text().split() == [
        "serve",
        "Qwen/Teacher",
        "--max-model-len",
        "4096",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    assert not launch._ready(port)  # stopped with the stage
    failed = launch.node_dir(Path("runs/collect/nope"), 1, 2, "collect-key") / launch.FAILED
    assert failed.read_text().strip() == "exit 2 after 3 tries"


def test_shard_folder_is_keyed_by_the_run_key_not_the_attempt(
    fake_tools: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recovery (new node IPs: a new run id) finds the lost attempt's shard folder; a
    new run key (config, code or inputs changed) does not."""
    out = Path("runs/mine/x")
    monkeypatch.setenv("RMSWEB_RUN_KEY", "mine-s0-abc")
    first_attempt, first = launch.rendezvous_dir(), launch.node_dir(out, 1, 2)
    monkeypatch.setenv("SKYPILOT_NODE_IPS", "10.0.3.7\n10.0.3.9")
    assert launch.rendezvous_dir() != first_attempt  # posts are per attempt...
    assert launch.node_dir(out, 1, 2) == first  # ...the units are per run key
    assert first.parts[-5:] == ("mine-s0-abc", "runs", "mine", "x", "node-1-of-2")
    monkeypatch.setenv("RMSWEB_RUN_KEY", "mine-s0-def")
    assert launch.node_dir(out, 1, 2) != first
    monkeypatch.delenv("RMSWEB_RUN_KEY")
    with pytest.raises(UserError, match="RMSWEB_RUN_KEY is not set"):
        launch.node_dir(out, 1, 2)


def test_the_head_clears_a_lost_attempts_failed_markers_before_it_posts(
    fake_tools: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `failed` left by the lost attempt would stop the new head at once; a `done` is
    still true (same run key: the same units) and stays."""
    monkeypatch.setenv("SKYPILOT_NODE_RANK", "0")
    monkeypatch.setenv("RMSWEB_RUN_KEY", "collect-key")
    out = Path("runs/collect/x")
    lost = [launch.node_dir(out, r, 2) for r in range(2)]
    for folder in lost:
        folder.mkdir(parents=True)
    (lost[0] / launch.DONE).write_text("8 episodes\n")
    (lost[1] / launch.FAILED).write_text("exit 137 after 3 tries\n")
    launch.post_sharded(["collect", "--exp", "x", "--out", str(out), "--metrics", "m.json"])
    assert (lost[0] / launch.DONE).exists() and not (lost[1] / launch.FAILED).exists()
    job = json.loads((launch.rendezvous_dir() / "stage-0000.json").read_text())
    assert job["env"] == {"RMSWEB_RUN_KEY": "collect-key"}  # the workers' shard folder


def test_head_stops_waiting_when_a_node_failed(tmp_path: Path) -> None:
    import asyncio

    from rmsweb.rollout.sharded import wait_for_nodes

    folders = [tmp_path / "node-0-of-2", tmp_path / "node-1-of-2"]
    for f in folders:
        f.mkdir()
    (folders[0] / launch.DONE).write_text("")
    (folders[1] / launch.FAILED).write_text("exit 137 after 3 tries\n")
    with pytest.raises(UserError, match="node-1-of-2 says its node failed"):
        asyncio.run(wait_for_nodes(folders, timeout_s=5))
    (folders[1] / launch.FAILED).unlink()
    with pytest.raises(UserError, match="no `done` from node-1-of-2"):
        asyncio.run(wait_for_nodes(folders, timeout_s=0))


def test_merge_keeps_each_unit_once(tmp_path: Path) -> None:
    """A unit found in two node folders (a node count changed, a unit rewritten) is merged
    once, whole, from the first folder; a rerun of the merge adds nothing."""
    from rmsweb.rollout.runner import units
    from rmsweb.rollout.sharded import merge_node_shards
    from rmsweb.store.reader import read_rows
    from rmsweb.store.synthetic import write_collect_run

    a = write_collect_run(tmp_path / "a", "x", seeds=3)  # every unit, with retries
    b = write_collect_run(tmp_path / "b", "x", seeds=4)  # the same units and 2 more
    out = tmp_path / "merged"
    eps_a, eps_b = read_rows(a, "episodes"), read_rows(b, "episodes")
    tasks = sorted({e.task_id for e in eps_b})
    assert merge_node_shards([a, b], out) == len(units(tasks, range(4)))
    merged = read_rows(out, "episodes")
    ids = [e.episode_id for e in merged]
    assert len(ids) == len(set(ids))
    from_b = {e.episode_id for e in eps_b if e.seed == 3}
    assert set(ids) == {e.episode_id for e in eps_a} | from_b
    assert len(read_rows(out, "reflections")) > 0  # companions travel with their episodes
    assert merge_node_shards([a, b], out) == 0


def test_units_share_every_task_among_nodes() -> None:
    from rmsweb.rollout.runner import units

    all_units = units(["click", "type"], [0, 1, 2, 3])
    shares = [set(all_units[r::2]) for r in range(2)]
    assert shares[0].isdisjoint(shares[1]) and shares[0] | shares[1] == set(all_units)
    assert {t for t, _ in shares[1]} == {"click", "type"}  # both tasks on both nodes


def test_one_cloud_node_keeps_its_units_in_the_bucket_for_a_recovery(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A one-node managed job (paper-8b): a sharded stage's units go to the bucket under its
    run key and are merged into the output; a recovery on a fresh disk finds them there
    (the runner skips the stored ones), where the output folder would have lost them."""
    import asyncio

    from rmsweb.rollout.sharded import node_share
    from rmsweb.store.reader import read_rows
    from rmsweb.store.synthetic import make_episode

    monkeypatch.delenv("SKYPILOT_NUM_NODES", raising=False)
    monkeypatch.setenv("RMSWEB_RENDEZVOUS_ROOT", str(tmp_path / "bucket"))
    monkeypatch.setenv("RMSWEB_RUN_KEY", "collect-key")
    rec = make_episode(run="collect/x", task="t", seed=0, policy="expert", success=True, n_steps=2)

    async def attempt(disk: Path, store: bool) -> set[str]:
        disk.mkdir()
        monkeypatch.chdir(disk)  # the stage's out is relative, as dvc.yaml names it
        async with node_share(Path("runs/collect/x")) as share:
            assert share.shard == (0, 1)
            stored = share.sink.completed_keys()  # what the runner would skip
            if store:
                share.sink.write_unit([rec])
        return stored

    assert asyncio.run(attempt(tmp_path / "disk1", store=True)) == set()
    assert [e.episode_id for e in read_rows(tmp_path / "disk1/runs/collect/x", "episodes")] == [
        rec.episode.episode_id
    ]
    # The recovery: a fresh disk, the same run key.
    assert asyncio.run(attempt(tmp_path / "disk2", store=False)) == {rec.episode.episode_id}
    assert len(read_rows(tmp_path / "disk2/runs/collect/x", "episodes")) == 1
    # Outside the cloud (no RMSWEB_RENDEZVOUS_ROOT) the stage writes its output directly.
    monkeypatch.delenv("RMSWEB_RENDEZVOUS_ROOT")
    assert asyncio.run(attempt(tmp_path / "local", store=False)) == set()
