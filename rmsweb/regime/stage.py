"""Stage `regime`: headroom, reach and length of one training seed's SFT policy.

Inputs: `sft` (the SFT stage's folder; the model at <sft>/model) and `mine` (the mine
stage's run: its mined_states, the states RL trains on). Reads suite (tasks, val
seeds, browser, max_steps), model (prompt, backend), rl.group_size, rl.temperature,
rl.reward.similarity_tau and `regime`.

1. Val episodes (rollouts.py): the expert and the greedy SFT policy on the val seeds
   (`regime.val_seeds_per_task`, default all), the latter's states labelled by the
   expert's oracle; stored in <out> (resumable).
2. States: the mined failure states (critical and fragile, not routine; capped at
   `regime.max_mined_states`) and the val failure states (failures.py).
3. Reach (probe.py, accept.py): G = rl.group_size samples of the SFT checkpoint at
   rl.temperature on every state, each judged by RL's reward.
4. Outputs: <out>/regime_states.parquet (table.py) and the metrics JSON: per task and
   pooled (measures.py), the settings they were measured at, and the wall time.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from rmsweb.stage_io import StageIO

MINED_SOURCES = ("critical", "fragile")  # the failure states; routine ones are SFT data


def main(io: StageIO) -> None:
    from rmsweb.regime.accept import grade_samples
    from rmsweb.regime.measures import POOLED, regime_metrics
    from rmsweb.regime.table import write_states

    start = time.perf_counter()
    spec = io.spec
    io.out.mkdir(parents=True, exist_ok=True)
    tasks, seeds, records, mined, val, info = asyncio.run(_measure(io))
    grade_samples(mined + val, spec.rl.reward.similarity_tau)
    write_states(io.out, mined + val)
    per_task = regime_metrics(tasks, records, mined, val, expert="expert", sft="sft")
    io.write_metrics(
        {
            "seed": io.train_seed,
            "group_size": spec.rl.group_size,
            "temperature": spec.rl.temperature,
            "similarity_tau": spec.rl.reward.similarity_tau,
            "val_seeds_per_task": len(seeds),
            "mined_states_available": info.pop("mined_available"),
            "pooled": per_task.pop(POOLED),
            "per_task": per_task,
            **info,
            "wall_s": round(time.perf_counter() - start, 1),
        }
    )


async def _measure(io: StageIO) -> tuple[list[str], list[int], list, list, list, dict[str, Any]]:
    """Play val, collect both kinds of failure state and probe them (module doc, 1-3)."""
    from rmsweb.agents.build import checkpoint_policy
    from rmsweb.evaluate.job import split_plan
    from rmsweb.regime.failures import val_failure_states
    from rmsweb.regime.probe import probe_states, sampling_policy
    from rmsweb.regime.rollouts import SPLIT, play_val
    from rmsweb.rollout.build import build_runner
    from rmsweb.store.layout import run_name
    from rmsweb.store.reader import read_records
    from rmsweb.store.writer import ShardWriter

    spec, regime = io.spec, io.spec.regime
    mine_dir, model_dir = io.input("mine"), io.input("sft") / "model"
    mined, available = _mined_states(mine_dir, regime.max_mined_states, io.train_seed)
    runner = build_runner(spec.suite, run=run_name(io.out), stage="regime")
    tasks, seeds = split_plan(runner.suite, [SPLIT], regime.val_seeds_per_task)[SPLIT]
    greedy = checkpoint_policy(model_dir, spec.model, "sft", temperature=0.0, seed=io.train_seed)
    try:
        async with runner:
            with ShardWriter(io.out) as sink:
                info = await play_val(runner, greedy, tasks, seeds, sink)
        records = [rec for rec in read_records(io.out) if rec.episode.split == SPLIT]
        sft = [rec for rec in records if rec.episode.policy == greedy.name]
        val = val_failure_states(sft, spec.rl.reward.similarity_tau)
        sampler = sampling_policy(greedy, spec.rl.temperature)
        probe_start = time.perf_counter()
        try:
            await probe_states(sampler, mined + val, spec.rl.group_size, _screenshots(io, mine_dir))
        finally:
            await sampler.close()
    finally:
        await greedy.close()
    info.update(
        mined_available=available,
        probe_wall_s=round(time.perf_counter() - probe_start, 1),
        generations=spec.rl.group_size * (len(mined) + len(val)),
    )
    return tasks, seeds, records, mined, val, info


def _mined_states(mine_dir: Path, cap: int | None, seed: int) -> tuple[list, int]:
    """The mine run's failure states as ProbeStates (a seeded uniform draw of `cap` when
    set; rmsweb.mine.states.uniform), and how many there were."""
    from rmsweb.mine.states import uniform
    from rmsweb.regime.probe import from_mined_row
    from rmsweb.store.reader import read_rows

    rows = [r for r in read_rows(mine_dir, "mined_states") if r.source in MINED_SOURCES]
    picked = uniform(rows, cap, seed) if cap is not None else rows
    picked = sorted(picked, key=lambda r: r.state_id)
    return [from_mined_row(r) for r in picked], len(rows)


def _screenshots(io: StageIO, mine_dir: Path) -> dict[str, bytes] | None:
    """The PNGs the states name (the mine run's and this run's), when prompts show them."""
    if not io.spec.model.prompt.screenshot:
        return None
    from rmsweb.store.reader import read_rows

    return {s.sha256: s.png for d in (mine_dir, io.out) for s in read_rows(d, "screenshots")}
