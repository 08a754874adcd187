"""One node of a sharded collection: the collect stage's loop on every COUNT-th train seed
from INDEX, writing its own shards (writer id `node<INDEX>`) into the shared run folder.

    python tests/faults/shard_collect.py PARAMS EXP OUT INDEX COUNT

What tests/faults/test_kill_stages.py runs as "two collectors on one run": two writer
ids in ONE run folder. The collect stage's own multi-node sharding (a folder per node,
merged by the head: rmsweb/rollout/sharded.py) is tested by test_multinode_collect.py.
The loop is rmsweb/collect/stage.py's `_collect`.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path


async def collect_shard(params: Path, exp: str, out: Path, index: int, count: int) -> None:
    from rmsweb.collect.job import collect_job
    from rmsweb.collect.retry import RetryLoop
    from rmsweb.collect.teacher import build_teacher
    from rmsweb.rollout.build import build_runner
    from rmsweb.spec import load_from_params
    from rmsweb.store.writer import ShardWriter

    spec = load_from_params(params, exp)
    c = spec.collect
    loop = RetryLoop(c.retry, c.max_retries, c.teacher_budget)
    runner = build_runner(spec.suite, run=f"collect/{exp}", stage="collect", progress=False)
    seeds = runner.suite.seeds("train")
    if c.episodes_per_task:
        seeds = seeds[: c.episodes_per_task]
    async with runner:
        teacher = build_teacher(spec, runner.suite)
        try:
            with ShardWriter(out, writer_id=f"node{index}") as sink:
                await runner.run(
                    teacher.policy,
                    runner.suite.task_ids(),
                    seeds[index::count],  # disjoint: each (task, seed) unit on one node
                    sink,
                    split="train",
                    job=collect_job(loop, teacher.judge, teacher.reflector, forget=teacher.forget),
                )
        finally:
            await teacher.policy.close()


if __name__ == "__main__":
    params, exp, out, index, count = sys.argv[1:6]
    asyncio.run(collect_shard(Path(params), exp, Path(out), int(index), int(count)))
