"""Two-node collection offline: two real processes on 127.0.0.1 as SkyPilot would run them.

Node 0 runs `rmsweb collect` (the head: it posts the stage, plays its share, waits,
merges); node 1 runs `rmsweb worker`, which joins the posted stage and plays its share.
1. Node 1 is killed with SIGKILL after it stored some units and restarted; the merged
   output must hold every (task, seed, attempt) episode of a single-node run exactly
   once, with the same rows apart from the clock.
2. A managed-job recovery: both nodes are killed (preempted), and a new attempt (a new
   run id, fresh node disks, the same bucket) resumes the units the lost attempt stored,
   because the shard folder is keyed by the stage's run key. The control: the same
   recovery after a config change (a new run key) plays every unit afresh.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests/ is no package: the helper beside
from multinode import (
    ROOT,
    WORKER,
    cluster,
    env,
    join,
    kill,
    node_folder,
    rows,
    shard_folder,
    shard_folders,
    start,
    started,
    units,
    wait_for_shards,
)

from rmsweb.store.reader import read_rows

# Stage subprocesses on two nodes (30-60 s each): the fault tier only (`make faults`).
pytestmark = [pytest.mark.browser, pytest.mark.faults, pytest.mark.slow]

EXP = "multinode"
# experiments/smoke.yaml with 2 tasks x 8 train seeds: 16 units, 8 per node.
OVERRIDES = [f"name={EXP}", "suite.train.count=8", "suite.test.count=1"]
OUT = "runs/collect/" + EXP
CLOCK_METRICS = {"wall_s", "teacher_seconds_per_kept"}


def _collect_cmd() -> list[str]:
    return [sys.executable, "-m", "rmsweb", "collect", "--exp", EXP, "--params", "params.yaml"]


def _metrics(path: Path) -> dict:
    return {k: v for k, v in json.loads(path.read_text()).items() if k not in CLOCK_METRICS}


def _params(*extra: str) -> str:
    from rmsweb.compile.dvcfile import render_params_yaml
    from rmsweb.spec import load_experiment

    return render_params_yaml(
        [load_experiment(ROOT / "experiments" / "smoke.yaml", [*OVERRIDES, *extra])]
    )


def test_two_nodes_one_killed_and_restarted_collect_what_one_node_does(tmp_path: Path) -> None:
    t0 = time.monotonic()
    params = _params()
    metrics = ["--out", OUT, "--metrics", "collect.json"]

    # The reference: one node, no SkyPilot variables (the local path).
    single = node_folder(tmp_path, "single", params)
    ref = subprocess.run(
        [*_collect_cmd(), *metrics], cwd=single, env=env(), capture_output=True, text=True
    )
    assert ref.returncode == 0, ref.stderr[-3000:]
    t_single = time.monotonic() - t0

    rdv = tmp_path / "bucket" / "rendezvous"
    head_env = env(SKYPILOT_NODE_RANK="0", **cluster(rdv, "attempt-1"))
    worker_env = env(SKYPILOT_NODE_RANK="1", **cluster(rdv, "attempt-1"))
    nodes = tmp_path / "nodes"
    head_dir, worker_dir = node_folder(nodes, "0", params), node_folder(nodes, "1", params)
    log0, log1 = tmp_path / "node0.log", tmp_path / "node1.log"

    t1 = time.monotonic()
    head = start([*_collect_cmd(), *metrics], head_dir, head_env, log0)
    worker = start([*WORKER, "--exp", EXP], worker_dir, worker_env, log1)
    try:
        # Kill node 1 (its worker and the stage it runs) once it stored a unit.
        wait_for_shards(rdv, OUT, 1, {"node 1": worker}, log1)
        kill(worker)
        killed_at = time.time()
        shards = shard_folder(rdv, OUT)
        node1 = shards / "node-1-of-2"
        stored_at_kill = len(units(node1))
        assert not (node1 / "done").exists(), "node 1 finished before the kill: more units"
        assert 0 < stored_at_kill < 8

        restarted_at = time.time()
        worker = start([*WORKER, "--exp", EXP], worker_dir, worker_env, log1)
        join(head, worker, EXP, head_dir, head_env, (log0, log1), 300)
    finally:
        kill(head, worker)
    t_two = time.monotonic() - t1

    # The shares: disjoint, 8 units each, node 1's written by two processes (killed, rerun).
    share0, share1 = units(shards / "node-0-of-2"), units(node1)
    assert len(share0) == len(share1) == 8 and not share0 & share1
    # Both of node 1's processes stored units: the killed one's were kept, not replayed.
    starts = [e.started_at for e in read_rows(node1, "episodes")]
    assert min(starts) < killed_at < restarted_at < max(starts)

    merged, reference = head_dir / OUT, single / OUT
    assert units(merged) == share0 | share1 == units(reference)
    assert rows(merged) == rows(reference)  # each (task, seed, attempt) once, same rows
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


def _attempt(
    tmp: Path, rdv: Path, run_id: str, params: str, *, preempt: bool
) -> tuple[Path, float]:
    """One attempt of the managed job on fresh node disks; `preempt`: both nodes are
    SIGKILLed once each stored a unit. Returns the head's folder and the start time."""
    folder = tmp / run_id
    head_dir, worker_dir = node_folder(folder, "0", params), node_folder(folder, "1", params)
    head_env = env(SKYPILOT_NODE_RANK="0", **cluster(rdv, run_id))
    worker_env = env(SKYPILOT_NODE_RANK="1", **cluster(rdv, run_id))
    log0, log1 = folder / "node0.log", folder / "node1.log"
    begun = time.time()
    cmd = [*_collect_cmd(), "--out", OUT, "--metrics", "collect.json"]
    head = start(cmd, head_dir, head_env, log0)
    worker = start([*WORKER, "--exp", EXP], worker_dir, worker_env, log1)
    try:
        if preempt:
            wait_for_shards(rdv, OUT, 0, {"head": head}, log0)
            wait_for_shards(rdv, OUT, 1, {"worker": worker}, log1)
            kill(head, worker)
            return head_dir, begun
        join(head, worker, EXP, head_dir, head_env, (log0, log1), 300)
    finally:
        kill(head, worker)
    return head_dir, begun


def test_a_recovered_job_resumes_the_units_the_lost_attempt_stored(tmp_path: Path) -> None:
    params = _params("suite.train.count=4")  # 8 units, 4 per node
    rdv = tmp_path / "bucket" / "rendezvous"

    _attempt(tmp_path, rdv, "attempt-1", params, preempt=True)
    preempted_at = time.time()
    shards = shard_folder(rdv, OUT)
    # What the lost attempt kept: some units on each node, not all.
    stored = {rank: units(shards / f"node-{rank}-of-2") for rank in (0, 1)}
    assert all(stored.values()) and sum(map(len, stored.values())) < 8

    head_dir, recovered_at = _attempt(tmp_path, rdv, "attempt-2", params, preempt=False)
    assert shard_folder(rdv, OUT) == shards  # the recovery found the same folder
    merged = units(head_dir / OUT)
    assert len(merged) == 8
    rows(head_dir / OUT)  # each episode once
    replayed = {u for u, t in started(head_dir / OUT).items() if t > recovered_at}
    resumed = stored[0] | stored[1]
    assert not replayed & resumed, "the recovery replayed units the lost attempt stored"
    assert replayed == merged - resumed  # and played exactly the rest
    assert all(t < preempted_at for u, t in started(head_dir / OUT).items() if u in resumed)

    # Control: the same recovery after a config change (dvc exp run -S ...): a new run
    # key, a new shard folder, and every unit is played again.
    changed = _params("suite.train.count=4", "collect.max_retries=1")
    head_dir, changed_at = _attempt(tmp_path, rdv, "attempt-3", changed, preempt=False)
    assert len(shard_folders(rdv, OUT)) == 2
    again = started(head_dir / OUT)
    assert len(again) == 8 and all(t > changed_at for t in again.values())
