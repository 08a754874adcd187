"""Stage `mine` (recipe part M): critical and fragile states of the SFT policy for RL.

This module is the stage's I/O; the work is in the modules beside it.

1. Rollouts (rollouts.py): the SFT checkpoint, sampled at `mine.temperature`, plays
   `samples_per_task` episodes per task and train seed (`seeds_per_task` of them)
   through the same runner, policy and prompt code as eval. Every visited state is
   labelled online (label.py: the oracle or the reference trajectory) and, with
   `fragile_k` >= 2, probed with k sampled actions; mode judge labels each failed
   episode afterwards (judge.py). Episodes and labels go to <out> as one shard each
   (resumable: a rerun skips what is stored).
2. Mining (critical.py, modes.py): the first unacceptable step of each failed or
   detoured episode (critical), and states whose samples disagree and are partly
   wrong (fragile), each with a failure mode.
3. Selection (states.py): weights, deduplication, the `max_states` cap and the
   routine share from the SFT data (the teacher's kept trajectories); mode none
   draws uniform SFT states and rolls nothing out.
4. Outputs: <out>/mined_states (rewritten whole from everything stored, so a rerun
   never duplicates), the rollouts' episodes/steps/step_labels, the screenshots the
   states name, and the metrics JSON.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from typing import Any

from rmsweb.distributed import node_rank
from rmsweb.errors import UserError
from rmsweb.stage_io import StageIO


def main(io: StageIO) -> None:
    from rmsweb.mine.critical import critical_state, fragile_states
    from rmsweb.mine.metrics import mining_metrics
    from rmsweb.mine.states import (
        dedupe,
        finding_row,
        kept_records,
        routine_rows,
        select_states,
        uniform,
    )
    from rmsweb.store.reader import read_records

    m = io.spec.mine
    start = time.perf_counter()
    collect_records = read_records(io.input("collect"))
    kept = kept_records(collect_records)
    if not kept:
        raise UserError(
            f"no successful collected episodes in {io.input('collect')}: no SFT data to "
            "mine against or mix in. Check the collect stage's metrics."
        )
    io.out.mkdir(parents=True, exist_ok=True)
    routine = routine_rows(kept)
    rollout: dict[str, Any] = {}
    if m.mode != "none":
        rollout = asyncio.run(_rollouts(io, kept))
        if node_rank() != 0:
            return  # a worker's share is merged by the head, which mines the whole run
    records = read_records(io.out)
    critical = [f for r in records if (f := critical_state(r)) is not None]
    fragile = [f for r in records for f in fragile_states(r)]
    if m.mode == "none":
        rows = uniform(dedupe(routine), m.max_states, io.train_seed)
    else:
        weights = {str(mode): w for mode, w in m.mode_weights.items()}
        mined = [finding_row(f, weights) for f in critical + fragile]
        rows = select_states(
            mined,
            routine,
            routine_fraction=m.routine_fraction,
            max_states=m.max_states,
            seed=io.train_seed,
        )
    _store_screenshots(io.out, rows, collect_records)
    _replace_table(io.out, "mined_states", rows)
    metrics = {"mode": m.mode, **mining_metrics(records, critical, fragile, rows), **rollout}
    metrics["wall_s"] = round(time.perf_counter() - start, 1)
    io.write_metrics(metrics)


async def _rollouts(io: StageIO, kept: list[Any]) -> dict[str, Any]:
    from rmsweb.agents.build import checkpoint_policy
    from rmsweb.mine.label import MiningPolicy
    from rmsweb.mine.rollouts import run_rollouts
    from rmsweb.rollout.build import build_runner
    from rmsweb.rollout.sharded import node_share

    spec, m = io.spec, io.spec.mine
    runner = build_runner(spec.suite, run=f"mine/{io.exp}", stage="mine")
    seeds = runner.suite.seeds("train")[: m.seeds_per_task]
    model_dir = io.input("sft") / "model"
    async with runner:
        inner = checkpoint_policy(
            model_dir, spec.model, "sft", temperature=m.temperature, seed=io.train_seed
        )
        labeller = _labeller(m.mode, runner.suite, kept)
        probes = m.fragile_k if labeller is not None and m.fragile_k >= 2 else 0
        policy = MiningPolicy(inner, labeller, probes)
        judge = _judge_client(spec) if m.mode == "judge" else None
        try:
            # One node: a ShardWriter on io.out. Several: this node's share of the units,
            # merged into io.out by the head (rmsweb.rollout.sharded).
            async with node_share(io.out) as share:
                episodes, wall = await run_rollouts(
                    runner,
                    policy,
                    runner.suite.task_ids("train"),
                    seeds,
                    share.sink,
                    m.samples_per_task,
                    after=_judge_labels(judge) if judge else None,
                    description=f"mine ({m.mode})",
                    shard=share.shard,
                )
        finally:
            await policy.close()
            if judge is not None:
                await judge.close()
    return {
        "rollout_episodes_now": episodes,  # this invocation (a resumed run does fewer)
        "rollout_wall_s": round(wall, 1),
        "episodes_per_s": round(episodes / wall, 3) if episodes and wall else None,
        "generations_now": policy.generations,
        "probes_per_state": probes or 1,
    }


def _labeller(mode: str, suite: Any, kept: list[Any]) -> Any:
    from rmsweb.env.actions import Action
    from rmsweb.mine.label import OracleLabeller, ReferenceLabeller, ReferenceStep

    if mode == "oracle":
        experts = {t: suite.expert(t) for t in suite.task_ids("train")}
        missing = sorted(t for t, e in experts.items() if e is None)
        if missing:
            raise UserError(
                f"mine.mode oracle: no scripted expert for {', '.join(missing)}. Use mode "
                "reference (the teacher's kept trajectories) or drop these tasks."
            )
        return OracleLabeller(experts)
    if mode == "reference":
        references = {}
        for rec in kept:
            steps = []
            for st in rec.steps:
                if st.action is None:
                    break  # an unparsable reference step: the reference ends there
                steps.append(ReferenceStep(Action.from_row(st.action), st.obs_text))
            references[(rec.episode.task_id, rec.episode.seed)] = steps
        return ReferenceLabeller(references)
    return None  # judge: labels come after each failed episode


def _judge_client(spec: Any) -> Any:
    from rmsweb.agents.openai_client import ChatClient

    endpoint = spec.mine.judge or getattr(spec.suite, "judge", None)
    if endpoint is None:  # the spec validator already refuses this; kept for direct calls
        raise UserError("mine.mode judge needs mine.judge (base_url, model) in the spec.")
    return ChatClient(
        base_url=endpoint.base_url,
        model=endpoint.model,
        api_key_env=endpoint.api_key_env,
        temperature=getattr(endpoint, "temperature", 0.0),
        max_tokens=getattr(endpoint, "max_tokens", 256),
        concurrency=getattr(endpoint, "concurrency", 8),
        timeout_s=endpoint.timeout_s,
        max_http_retries=getattr(endpoint, "max_http_retries", 4),
    )


def _judge_labels(client: Any) -> Any:
    from rmsweb.mine.judge import first_error_labels, judge_first_error

    async def label(rec: Any) -> list[Any]:
        return first_error_labels(rec, await judge_first_error(client, rec))

    return label


def _store_screenshots(out: Path, rows: list[Any], collect_records: list[Any]) -> None:
    """Routine states name screenshots of the collect run: copy them into this run, so
    the RL stage finds every state's screenshot in one place."""
    from rmsweb.store.writer import ShardWriter

    wanted = {r.screenshot for r in rows if r.source == "routine" and r.screenshot}
    if not wanted:
        return
    shots = {s.sha256: s for rec in collect_records for s in rec.screenshots if s.sha256 in wanted}
    with ShardWriter(out) as sink:
        sink.write_screenshots(list(shots.values()))


def _replace_table(run_dir: Path, table: str, rows: list[Any]) -> None:
    """The mined states are derived from everything stored: rewrite them whole each run."""
    from rmsweb.store.writer import TableWriter

    shutil.rmtree(run_dir / table, ignore_errors=True)
    with TableWriter(run_dir, table) as writer:
        writer.write_many(rows)
