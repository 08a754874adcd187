"""An episode stage's units across SkyPilot nodes: each node plays its share, the head merges.

    stats = await run_sharded(runner, policy, tasks, seeds, io.out, split="train", job=job)
    # or, where the job needs the sink (the mine stage's does):
    async with node_share(io.out) as share:
        await runner.run(policy, tasks, seeds, share.sink, job=job_of(share.sink),
                         shard=share.shard)
    ...
    if rmsweb.distributed.node_rank() != 0:
        return  # no metrics on a worker: its episodes reach io.out through the head's merge

On one node outside the cloud (no SKYPILOT_NUM_NODES or 1, no RMSWEB_RENDEZVOUS_ROOT)
this is the local path: a ShardWriter on `out` and `runner.run` over every (task, seed),
or, with `processes` > 1, each of that many local processes over its share into `out`
(rmsweb.rollout.processes).
With N > 1 nodes, or on clouds (N = 1 too):
1. Unit i of `units(tasks, seeds)` (task-major) is node i % N's. Each node writes
   its units into its own folder of the shared shard folder,
   $RMSWEB_RENDEZVOUS_ROOT/shards/<run key>/<out>/node-<r>-of-<N>/ (the checkpoint
   bucket; writer id node<r>), committing a shard at least every
   $RMSWEB_NODE_COMMIT_S seconds (default 10), so a killed node loses little.
2. A node that finished its share writes `done` in its folder. Workers run the
   stage through `rmsweb worker` (the head posts it; rmsweb.distributed).
3. The head (rank 0) then waits for every node's `done` (or a `failed`: a worker
   whose command died SHARD_RETRIES + 1 times) and merges the node folders into
   `out`, a unit at a time: a (task, seed) unit already merged, from an earlier
   node or an earlier merge, is skipped whole, so nothing is stored twice. Every
   table of an episode record travels (steps, screenshots, reflections, ...).
A restarted node resumes: the runner skips the units its folder already holds. So
does a recovered managed job: the folder is keyed by the stage's run key (its config,
code and inputs; rmsweb.compile.identity), which a new attempt shares with the lost
one, not by the attempt's run id. A changed config, code or input is a new key: its
units are played afresh. A recovery with another node count plays afresh too (the
folders are per count). The mine stage's floor rounds run on the head into `out`
after the merge, so a recovery replays those.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rmsweb.agents.base import Policy
from rmsweb.distributed import DONE, FAILED, node_dir, node_rank, num_nodes, shards_in_bucket
from rmsweb.errors import UserError
from rmsweb.rollout.processes import helper_processes, helper_share, stage_command
from rmsweb.rollout.runner import EpisodeRunner, Job, RunStats

if TYPE_CHECKING:
    from rmsweb.store.writer import ShardWriter

WAIT_POLL_S = 1.0


@dataclass(frozen=True)
class NodeShare:
    """What a node plays into: its sink, and its share (index, count) for `runner.run`."""

    sink: ShardWriter
    shard: tuple[int, int]


@asynccontextmanager
async def node_share(
    out: Path, processes: int = 1, argv: Sequence[str] | None = None
) -> AsyncIterator[NodeShare]:
    """This node's sink and share of a stage writing `out` (see the module doc). On exit
    without error: `done`; on the head, also wait for every node and merge into `out`.

    On the local path, `processes` > 1 with the stage's command line `argv` (`rmsweb
    <argv>`) plays the units over that many processes, each with its own browser, into
    `out` (rmsweb.rollout.processes); on exit the first process has waited for the rest.
    """
    from rmsweb.store.writer import ShardWriter

    rank, count = node_rank(), num_nodes()
    if not shards_in_bucket():
        helper = helper_share()
        if helper is not None:  # a copy started by the first process below
            with ShardWriter(out, writer_id=f"proc{helper[0]}") as sink:
                yield NodeShare(sink, helper)
            return
        if processes > 1 and argv is not None:
            with (
                ShardWriter(out) as sink,
                helper_processes(processes, stage_command(argv)),
            ):
                yield NodeShare(sink, (0, processes))
            return
        with ShardWriter(out) as sink:
            yield NodeShare(sink, (0, 1))
        return
    if not 0 <= rank < count:
        raise UserError(f"SKYPILOT_NODE_RANK={rank} is not in 0..{count - 1} (SKYPILOT_NUM_NODES)")
    folder = node_dir(out, rank, count)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / FAILED).unlink(missing_ok=True)  # a restarted node is trying again
    commit_s = float(os.environ.get("RMSWEB_NODE_COMMIT_S", "10"))
    with ShardWriter(folder, writer_id=f"node{rank}", max_seconds=commit_s) as sink:
        yield NodeShare(sink, (rank, count))
    (folder / DONE).write_text(f"{len(sink.completed_keys())} episodes\n")
    if rank == 0:
        folders = [node_dir(out, r, count) for r in range(count)]
        await wait_for_nodes(folders)
        merged = merge_node_shards(folders, out)
        print(f"merged {merged} units of {count} nodes into {out}", file=sys.stderr)


async def run_sharded(
    runner: EpisodeRunner,
    policy: Policy,
    tasks: Sequence[str],
    seeds: Sequence[int],
    out: Path,
    *,
    split: str = "train",
    job: Job | None = None,
    description: str | None = None,
    processes: int = 1,
    argv: Sequence[str] | None = None,
) -> RunStats:
    """`runner.run` over this node's share into `node_share(out, processes, argv)`; this
    process's RunStats. Single node, one process: exactly `runner.run` into a ShardWriter
    on `out`."""
    async with node_share(out, processes, argv) as share:
        rank, count = share.shard
        if count > 1:
            unit = "node" if shards_in_bucket() else "process"
            description = f"{description or policy.name} ({unit} {rank} of {count})"
        return await runner.run(
            policy,
            tasks,
            seeds,
            share.sink,
            split=split,
            job=job,
            description=description,
            shard=share.shard,
        )


async def wait_for_nodes(folders: Sequence[Path], timeout_s: float | None = None) -> None:
    """Until every node folder has `done`; a `failed` one, or the timeout, is an error."""
    if timeout_s is None:
        timeout_s = float(os.environ.get("RMSWEB_WORKER_TIMEOUT_S", 86400))
    deadline = time.monotonic() + timeout_s
    while True:
        failed = [f for f in folders if (f / FAILED).exists()]
        if failed:
            why = (failed[0] / FAILED).read_text().strip()
            raise UserError(f"node folder {failed[0]} says its node failed ({why}); see its log.")
        waiting = [f for f in folders if not (f / DONE).exists()]
        if not waiting:
            return
        if time.monotonic() > deadline:
            names = ", ".join(f.name for f in waiting)
            raise UserError(f"no `done` from {names} after {timeout_s:g} s; giving up.")
        await asyncio.sleep(WAIT_POLL_S)


def merge_node_shards(folders: Sequence[Path], out: Path) -> int:
    """Copy every node's episodes into `out`, a (task, seed, policy) unit at a time; a
    unit already in `out` or met in an earlier folder is skipped whole. Returns the
    units copied. Rerunnable: a merge killed midway resumes where its shards stop."""
    from rmsweb.store.reader import read_records, read_table
    from rmsweb.store.rows import EpisodeRecord
    from rmsweb.store.writer import ShardWriter

    have = read_table(out, "episodes", columns=["task_id", "seed", "policy"]).to_pylist()
    seen = {(r["task_id"], r["seed"], r["policy"]) for r in have}
    copied = 0
    with ShardWriter(out) as sink:
        for folder in folders:
            by_unit: dict[tuple[str, int, str], list[EpisodeRecord]] = {}
            for rec in read_records(folder):
                ep = rec.episode
                by_unit.setdefault((ep.task_id, ep.seed, ep.policy), []).append(rec)
            for unit, records in by_unit.items():
                if unit in seen:
                    continue
                seen.add(unit)
                sink.write_unit(sorted(records, key=lambda r: r.episode.attempt))
                copied += 1
    return copied
