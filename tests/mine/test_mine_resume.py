"""Mining rollouts killed with SIGKILL mid-run: the rerun stores every sample exactly once.

The child rolls out the scripted expert (oracle labels, 2 probes) over 2 tasks x 4 seeds
x 3 samples into a ShardWriter that would commit every 2 episodes, so a unit's 3 samples
straddle the shard boundary. The runner writes a unit whole (sink.write_unit), so after
the kill every stored unit has all its samples; the rerun (same code, same folder) must
run the rest: every (task, seed, sample) once, with its labels, none twice.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from rmsweb.store.layout import part_files
from rmsweb.store.reader import read_records

pytestmark = pytest.mark.browser

TASKS, SEEDS, SAMPLES = ["click-button", "enter-text"], 4, 3

CHILD = r"""
import asyncio, sys
from pathlib import Path
from rmsweb.agents.expert import ExpertPolicy
from rmsweb.mine.label import MiningPolicy, OracleLabeller
from rmsweb.mine.rollouts import run_rollouts
from rmsweb.rollout.build import build_runner
from rmsweb.spec import ExperimentSpec
from rmsweb.store.writer import ShardWriter

out, tasks, seeds, samples = Path(sys.argv[1]), sys.argv[2].split(","), int(sys.argv[3]), int(sys.argv[4])
spec = ExperimentSpec.model_validate(
    {"name": "r", "suite": {"tasks": tasks, "train": {"start": 0, "count": seeds},
                            "browser": {"contexts": 2}}}
)

async def go():
    runner = build_runner(spec.suite, run="mine/r", stage="mine", progress=False)
    async with runner:
        experts = {t: runner.suite.expert(t) for t in tasks}
        policy = MiningPolicy(ExpertPolicy(experts, name="sft"), OracleLabeller(experts), 2)
        # Commit every 2 episodes: a unit's 3 samples straddle shards.
        with ShardWriter(out, max_episodes=2, max_seconds=3600) as sink:
            await run_rollouts(runner, policy, tasks, list(range(seeds)), sink, samples)

asyncio.run(go())
"""


def run_child(out: Path, kill_after_shards: int | None) -> None:
    args = [sys.executable, "-c", CHILD, str(out), ",".join(TASKS), str(SEEDS), str(SAMPLES)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    # Own session: the kill takes the child's browser with it.
    proc = subprocess.Popen(args, env=env, start_new_session=True)
    try:
        if kill_after_shards is None:
            assert proc.wait(timeout=300) == 0
            return
        deadline = time.monotonic() + 120
        while len(part_files(out, "episodes")) < kill_after_shards:
            assert proc.poll() is None, "the child finished before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def test_killed_rollouts_resume_without_loss_or_duplicates(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    # Killed after a few shards: with 2-episode shards and 3-sample units, a unit that
    # was not written whole would show up here as a partial unit.
    run_child(out, kill_after_shards=2)
    first = read_records(out)
    total = len(TASKS) * SEEDS * SAMPLES
    assert 0 < len(first) < total
    units = Counter((r.episode.task_id, r.episode.seed) for r in first)
    assert all(n == SAMPLES for n in units.values()), units  # all or none per unit
    kept = {r.episode.episode_id: r.episode.started_at for r in first}

    run_child(out, kill_after_shards=None)
    records = read_records(out)
    ids = [r.episode.episode_id for r in records]
    assert len(ids) == len(set(ids)) == total
    # Samples stored before the kill are kept as they were, not redone.
    assert all(
        r.episode.started_at == kept[r.episode.episode_id]
        for r in records
        if r.episode.episode_id in kept
    )
    for rec in records:
        assert [lab.step for lab in rec.labels] == [s.step for s in rec.steps]
    assert Counter((r.episode.task_id, r.episode.seed) for r in records) == {
        (t, s): SAMPLES for t in TASKS for s in range(SEEDS)
    }
