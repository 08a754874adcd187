"""Two-node mining offline: two real processes on 127.0.0.1 as SkyPilot would run them.

Node 0 runs `rmsweb mine` (the head: it posts the stage, rolls out its share of the
(task, mine seed) units, waits, merges, then mines the states of the whole run); node 1
runs `rmsweb worker`, which pulls the stage's inputs (a fake `dvc pull` from a folder
standing for the DVC remote), joins the posted stage and rolls out its share.
1. Node 1 is killed with SIGKILL after it stored some units and restarted; the merged
   output must hold every unit of a single-node run exactly once, with the same rows in
   every table apart from the clock (episodes, steps, step labels, screenshots and the
   mined states derived from them), and the same metrics; only the head writes outputs.
2. A managed-job recovery: both nodes are killed (preempted), and a new attempt (a new
   run id, fresh node disks, the same bucket) resumes the units the lost attempt stored,
   because the shard folder is keyed by the stage's run key. The control: the same
   recovery after a config change (a new run key) rolls every unit out afresh.

Inputs, built once: a tiny random Qwen3 as the SFT checkpoint (its outputs do not parse,
so every rollout fails and is mined) and a synthetic collect run. Rollouts are greedy
(mine.temperature 0): HFPolicy seeds its sampling per generated batch, so sampled
rollouts depend on which episodes share a batch, on one node as on two.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests/ is no package: the helper beside
from multinode import (
    ROOT,
    WORKER,
    cluster,
    env,
    fake_dvc,
    join,
    kill,
    node_folder,
    rows,
    shard_folder,
    shard_folders,
    start,
    started,
    tables,
    units,
    wait_for_shards,
)

from rmsweb.store.reader import read_rows

if TYPE_CHECKING:
    from rmsweb.spec import ExperimentSpec

pytestmark = [pytest.mark.browser, pytest.mark.faults, pytest.mark.slow]

EXP = "multinode-mine"
# experiments/smoke.yaml, shrunk: 2 tasks x 4 mine seeds = 8 units (4 per node) of 2
# greedy samples each, 2 steps of 8 new tokens; no fragile probes (greedy probes agree).
# An episode slowed down by a loaded machine is not an environment error.
OVERRIDES = [
    f"name={EXP}",
    "mine.seeds_per_task=4",
    "mine.samples_per_task=2",
    "mine.temperature=0",
    "mine.fragile_k=0",
    "suite.max_steps=2",
    "suite.browser.episode_timeout_s=600",
    "suite.browser.action_timeout_s=60",
    "model.prompt.max_new_tokens=8",
]
UNITS, SAMPLES = 8, 2
SFT, COLLECT = f"runs/sft/{EXP}/s0", f"runs/collect/{EXP}"
OUT = f"runs/mine/{EXP}/s0"
# Metrics of the clock, or of what this invocation rolled out (the head: its share only).
INVOCATION_METRICS = {
    "wall_s",
    "rollout_wall_s",
    "episodes_per_s",
    "rollout_episodes_now",
    "generations_now",
}


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The DVC remote: the upstream outputs the mine stage reads (--in sft, --in collect)."""
    import torch

    from rmsweb.models.config import TinySize
    from rmsweb.models.tiny import save_tiny_model
    from rmsweb.store.synthetic import write_collect_run

    root = tmp_path_factory.mktemp("remote")
    torch.manual_seed(0)
    texts = [f'[{i}] button "ok"\nAction: click({i})' for i in range(50)]
    save_tiny_model(root / SFT / "model", "qwen3", texts, 300, TinySize(), seed=0)
    write_collect_run(root / "runs", EXP)
    return root


def _mine_cmd() -> list[str]:
    return [
        *(sys.executable, "-m", "rmsweb", "mine", "--exp", EXP, "--seed", "0"),
        *("--params", "params.yaml", "--in", f"sft={SFT}", "--in", f"collect={COLLECT}"),
        *("--out", OUT, "--metrics", "mine.json"),
    ]


def _spec(*extra: str) -> ExperimentSpec:
    from rmsweb.spec import load_experiment

    return load_experiment(ROOT / "experiments" / "smoke.yaml", [*OVERRIDES, *extra])


def _params(*extra: str) -> str:
    from rmsweb.compile.dvcfile import render_params_yaml

    return render_params_yaml([_spec(*extra)])


def _node(tmp: Path, name: str, params: str, remote: Path, *, head: bool) -> Path:
    """A node's disk: the head (or a single node) has the upstream outputs, as the sky
    task ran them there; a worker has none until it pulls them."""
    folder = node_folder(tmp, name, params)
    if head:
        for d in (SFT, COLLECT):
            shutil.copytree(remote / d, folder / d)
    return folder


def _metrics(path: Path) -> dict:
    return {k: v for k, v in json.loads(path.read_text()).items() if k not in INVOCATION_METRICS}


def _no_outputs(worker_dir: Path) -> bool:
    """Whether a worker's disk holds none of the stage's outputs (metrics, tables)."""
    return not (worker_dir / "mine.json").exists() and not [
        p for p in (worker_dir / OUT).rglob("*") if p.is_file()
    ]


def test_two_nodes_one_killed_and_restarted_mine_what_one_node_does(
    remote: Path, tmp_path: Path
) -> None:
    t0 = time.monotonic()
    params = _params()
    dvc = str(fake_dvc(tmp_path / "dvc", remote))

    # The reference: one node, no SkyPilot variables (the local path).
    single = _node(tmp_path, "single", params, remote, head=True)
    ref = subprocess.run(_mine_cmd(), cwd=single, env=env(), capture_output=True, text=True)
    assert ref.returncode == 0, ref.stderr[-3000:]
    t_single = time.monotonic() - t0

    rdv = tmp_path / "bucket" / "rendezvous"
    head_env = env(SKYPILOT_NODE_RANK="0", **cluster(rdv, "attempt-1"))
    worker_env = env(SKYPILOT_NODE_RANK="1", RMSWEB_DVC_BIN=dvc, **cluster(rdv, "attempt-1"))
    nodes = tmp_path / "nodes"
    head_dir = _node(nodes, "0", params, remote, head=True)
    worker_dir = _node(nodes, "1", params, remote, head=False)
    log0, log1 = tmp_path / "node0.log", tmp_path / "node1.log"

    t1 = time.monotonic()
    head = start(_mine_cmd(), head_dir, head_env, log0)
    worker = start([*WORKER, "--exp", EXP], worker_dir, worker_env, log1)
    try:
        # Kill node 1 (its worker and the stage it runs) once it stored a unit.
        wait_for_shards(rdv, OUT, 1, {"node 1": worker}, log1)
        kill(worker)
        killed_at = time.time()
        shards = shard_folder(rdv, OUT)
        node1 = shards / "node-1-of-2"
        kept = units(node1)
        assert not (node1 / "done").exists(), "node 1 finished before the kill: more units"
        assert 0 < len(kept) < UNITS // 2

        restarted_at = time.time()
        worker = start([*WORKER, "--exp", EXP], worker_dir, worker_env, log1)
        join(head, worker, EXP, head_dir, head_env, (log0, log1), 600)
    finally:
        kill(head, worker)
    t_two = time.monotonic() - t1

    # The shares: disjoint, 4 units each, node 1's written by two processes (killed, rerun).
    share0, share1 = units(shards / "node-0-of-2"), units(node1)
    assert len(share0) == len(share1) == UNITS // 2 and not share0 & share1
    # The units the killed process stored were kept, not rolled out again; the restarted
    # process rolled out the rest.
    first = started(node1)
    assert all(first[u] < killed_at for u in kept)
    assert all(restarted_at < first[u] for u in share1 - kept)
    assert len(read_rows(node1, "episodes")) == (UNITS // 2) * SAMPLES  # each sample once

    merged, reference = head_dir / OUT, single / OUT
    assert units(merged) == share0 | share1 == units(reference)
    assert rows(merged).keys() == rows(reference).keys()  # each (task, seed, sample) once
    got, want = tables(merged), tables(reference)  # the same rows, in every table
    assert set(got) == set(want) >= {"episodes", "steps", "step_labels", "mined_states"}
    for table in want:  # the labels travel with their episodes; the states mined from all
        assert got[table] == want[table], table
    assert _metrics(head_dir / "mine.json") == _metrics(single / "mine.json")
    # The worker rolled out from the inputs it pulled, and wrote no outputs of its own.
    assert (worker_dir / SFT / "model" / "config.json").exists()
    assert _no_outputs(worker_dir)
    states = len(want["mined_states"])
    print(
        f"\nmulti-node mine: {UNITS} units x {SAMPLES} samples, node 0: {len(share0)}, "
        f"node 1: {len(share1)} (SIGKILLed with {len(kept)} stored, restarted, resumed); "
        f"{len(want['episodes'])} rollouts, {len(want['step_labels'])} step labels and "
        f"{states} mined states, equal to one node's; one node {t_single:.0f} s, two nodes "
        f"with the kill {t_two:.0f} s, test {time.monotonic() - t0:.0f} s"
    )
    shutil.rmtree(rdv, ignore_errors=True)


def _attempt(
    tmp: Path, rdv: Path, run_id: str, params: str, remote: Path, *, preempt: bool
) -> tuple[Path, float]:
    """One attempt of the managed job on fresh node disks; `preempt`: both nodes are
    SIGKILLed once each stored a unit. Returns the head's folder and the start time."""
    folder = tmp / run_id
    head_dir = _node(folder, "0", params, remote, head=True)
    worker_dir = _node(folder, "1", params, remote, head=False)
    dvc = str(fake_dvc(folder / "dvc", remote))
    head_env = env(SKYPILOT_NODE_RANK="0", **cluster(rdv, run_id))
    worker_env = env(SKYPILOT_NODE_RANK="1", RMSWEB_DVC_BIN=dvc, **cluster(rdv, run_id))
    log0, log1 = folder / "node0.log", folder / "node1.log"
    begun = time.time()
    head = start(_mine_cmd(), head_dir, head_env, log0)
    worker = start([*WORKER, "--exp", EXP], worker_dir, worker_env, log1)
    try:
        if preempt:
            wait_for_shards(rdv, OUT, 0, {"head": head}, log0)
            wait_for_shards(rdv, OUT, 1, {"worker": worker}, log1)
            kill(head, worker)
            return head_dir, begun
        join(head, worker, EXP, head_dir, head_env, (log0, log1), 600)
        assert _no_outputs(worker_dir)
    finally:
        kill(head, worker)
    return head_dir, begun


def _run_key(remote: Path, *extra: str) -> str:
    """The mine stage's run key as the head computes it from its config and inputs."""
    from rmsweb.compile.identity import stage_run_key

    inputs = {"sft": remote / SFT, "collect": remote / COLLECT}
    return stage_run_key(_spec(*extra), "mine", None, inputs, seed=0)


def test_a_recovered_job_resumes_the_units_the_lost_attempt_stored(
    remote: Path, tmp_path: Path
) -> None:
    smaller = "mine.seeds_per_task=3"  # 6 units, 3 per node
    params = _params(smaller)
    rdv = tmp_path / "bucket" / "rendezvous"

    _attempt(tmp_path, rdv, "attempt-1", params, remote, preempt=True)
    preempted_at = time.time()
    shards = shard_folder(rdv, OUT)
    assert shards == rdv / "shards" / _run_key(remote, smaller) / OUT  # keyed by the run key
    # What the lost attempt kept: some units on each node, not all.
    stored = {rank: units(shards / f"node-{rank}-of-2") for rank in (0, 1)}
    assert all(stored.values()) and sum(map(len, stored.values())) < 6

    head_dir, recovered_at = _attempt(tmp_path, rdv, "attempt-2", params, remote, preempt=False)
    assert shard_folder(rdv, OUT) == shards  # the recovery found the same folder
    merged = units(head_dir / OUT)
    assert len(merged) == 6
    rows(head_dir / OUT)  # each episode once
    first = started(head_dir / OUT)
    replayed = {u for u, t in first.items() if t > recovered_at}
    resumed = stored[0] | stored[1]
    assert not replayed & resumed, "the recovery replayed units the lost attempt stored"
    assert replayed == merged - resumed  # and rolled out exactly the rest
    assert all(t < preempted_at for u, t in first.items() if u in resumed)

    # Control: the same recovery after a config change (dvc exp run -S ...) that changes
    # no rollout: a new run key, a new shard folder, and every unit is rolled out again.
    change = "mine.max_states=1000"
    assert _run_key(remote, smaller, change) != _run_key(remote, smaller)
    changed = _params(smaller, change)
    again_dir, changed_at = _attempt(tmp_path, rdv, "attempt-3", changed, remote, preempt=False)
    assert len(shard_folders(rdv, OUT)) == 2
    again = started(again_dir / OUT)
    assert len(again) == 6 and all(t > changed_at for t in again.values())
    # The recovered job's output is what an uninterrupted run stores.
    assert tables(head_dir / OUT) == tables(again_dir / OUT)
