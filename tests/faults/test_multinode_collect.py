"""Two-node collection offline: two real processes on 127.0.0.1 as SkyPilot would run them.

Node 0 runs `rmsweb collect` (the head: it posts the stage, plays its share, waits,
merges); node 1 runs `rmsweb worker`, which joins the posted stage and plays its share.
Node 1 is killed with SIGKILL after it stored some units and restarted; the merged
output must hold every (task, seed, attempt) episode of a single-node run exactly
once, with the same rows apart from the clock.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from rmsweb.store.reader import read_records, read_rows

pytestmark = [pytest.mark.browser, pytest.mark.faults]

ROOT = Path(__file__).resolve().parents[2]
EXP = "multinode"
# experiments/smoke.yaml with 2 tasks x 8 train seeds: 16 units, 8 per node.
OVERRIDES = [f"name={EXP}", "suite.train.count=8", "suite.test.count=1"]
OUT = "runs/collect/" + EXP
CLOCK_COLUMNS = {"started_at", "wall_s"}
CLOCK_METRICS = {"wall_s", "teacher_seconds_per_kept"}


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "DVC_NO_ANALYTICS": "1"}
    for key in ("SKYPILOT_NODE_RANK", "SKYPILOT_NUM_NODES", "RMSWEB_RUN_ID", "RMSWEB_TORCHRUN"):
        env.pop(key, None)
    return {**env, **extra}


def _collect_cmd() -> list[str]:
    return [sys.executable, "-m", "rmsweb", "collect", "--exp", EXP, "--params", "params.yaml"]


def _start(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    # Its own process group: a kill takes the node's stage process with it, as losing a node.
    return subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdout=log.open("a"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _node(tmp: Path, name: str, params: str) -> Path:
    folder = tmp / name
    folder.mkdir(parents=True)
    (folder / "params.yaml").write_text(params)
    return folder


def _rows(out: Path) -> dict[str, dict]:
    """episode id -> its row without the clock; asserts each episode is stored once."""
    rows = read_rows(out, "episodes")
    ids = [r.episode_id for r in rows]
    assert len(ids) == len(set(ids)), "an episode is stored twice"
    return {
        r.episode_id: {k: v for k, v in asdict(r).items() if k not in CLOCK_COLUMNS} for r in rows
    }


def _metrics(path: Path) -> dict:
    return {k: v for k, v in json.loads(path.read_text()).items() if k not in CLOCK_METRICS}


def _units(folder: Path) -> set[tuple[str, int]]:
    return {(r.episode.task_id, r.episode.seed) for r in read_records(folder)}


def test_two_nodes_one_killed_and_restarted_collect_what_one_node_does(tmp_path: Path) -> None:
    from rmsweb.compile.dvcfile import render_params_yaml
    from rmsweb.spec import load_experiment

    t0 = time.monotonic()
    spec = load_experiment(ROOT / "experiments" / "smoke.yaml", OVERRIDES)
    params = render_params_yaml([spec])
    metrics = ["--out", OUT, "--metrics", "collect.json"]

    # The reference: one node, no SkyPilot variables (today's path).
    single = _node(tmp_path, "single", params)
    ref = subprocess.run(
        [*_collect_cmd(), *metrics], cwd=single, env=_env(), capture_output=True, text=True
    )
    assert ref.returncode == 0, ref.stderr[-3000:]
    t_single = time.monotonic() - t0

    rdv = tmp_path / "bucket" / "rendezvous"
    cluster = {
        "SKYPILOT_NUM_NODES": "2",
        "SKYPILOT_NODE_IPS": "127.0.0.1\n127.0.0.1",
        "RMSWEB_RUN_ID": "attempt-1",
        "RMSWEB_RENDEZVOUS_ROOT": str(rdv),
        "RMSWEB_NODE_COMMIT_S": "0",  # a shard per unit: the kill finds some stored
    }
    head_env = _env(SKYPILOT_NODE_RANK="0", **cluster)
    worker_env = _env(SKYPILOT_NODE_RANK="1", **cluster)
    nodes = tmp_path / "nodes"
    head_dir, worker_dir = _node(nodes, "0", params), _node(nodes, "1", params)
    shards = rdv / "attempt-1" / "shards" / OUT
    node1 = shards / "node-1-of-2"
    log0, log1 = tmp_path / "node0.log", tmp_path / "node1.log"

    t1 = time.monotonic()
    head = _start([*_collect_cmd(), *metrics], head_dir, head_env, log0)
    worker = _start(
        [sys.executable, "-m", "rmsweb", "worker", "--exp", EXP], worker_dir, worker_env, log1
    )
    try:
        # Kill node 1 (its worker and the stage it runs) once it stored a unit.
        deadline = time.monotonic() + 120
        while not list((node1 / "episodes").glob("part-*.parquet")):
            assert worker.poll() is None, log1.read_text()[-3000:]
            assert time.monotonic() < deadline, "node 1 stored nothing in 120 s"
            time.sleep(0.05)
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
        killed_at = time.time()
        stored_at_kill = len(_units(node1))
        assert not (node1 / "done").exists(), "node 1 finished before the kill: more units"
        assert 0 < stored_at_kill < 8

        restarted_at = time.time()
        worker = _start(
            [sys.executable, "-m", "rmsweb", "worker", "--exp", EXP], worker_dir, worker_env, log1
        )
        assert head.wait(timeout=300) == 0, log0.read_text()[-3000:]
        finish = [sys.executable, "-m", "rmsweb", "worker", "--exp", EXP, "--finish"]
        subprocess.run(finish, cwd=head_dir, env=head_env, check=True)
        assert worker.wait(timeout=60) == 0, log1.read_text()[-3000:]
    finally:
        for proc in (head, worker):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    t_two = time.monotonic() - t1

    # The shares: disjoint, 8 units each, node 1's written by two processes (killed, rerun).
    share0, share1 = _units(shards / "node-0-of-2"), _units(node1)
    assert len(share0) == len(share1) == 8 and not share0 & share1
    # Both of node 1's processes stored units: the killed one's were kept, not replayed.
    starts = [e.started_at for e in read_rows(node1, "episodes")]
    assert min(starts) < killed_at < restarted_at < max(starts)

    merged, reference = head_dir / OUT, single / OUT
    assert _units(merged) == share0 | share1 == _units(reference)
    assert _rows(merged) == _rows(reference)  # each (task, seed, attempt) once, same rows
    assert _metrics(head_dir / "collect.json") == _metrics(single / "collect.json")
    assert not (worker_dir / "collect.json").exists()  # only the head writes outputs
    episodes = len(read_rows(merged, "episodes"))
    print(
        f"\nmulti-node collect: 16 units, node 0: {len(share0)}, node 1: {len(share1)} "
        f"(SIGKILLed with {stored_at_kill} stored, restarted, resumed); {episodes} episodes "
        f"merged, equal to one node's; one node {t_single:.0f} s, two nodes with the kill "
        f"{t_two:.0f} s, test {time.monotonic() - t0:.0f} s"
    )
    shutil.rmtree(rdv, ignore_errors=True)
