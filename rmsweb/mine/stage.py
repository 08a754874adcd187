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
    from rmsweb.mine.floor import tally
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
    if m.mode == "none" and node_rank() != 0:
        return  # no rollouts to share out: the head draws the states alone
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
    routine_info: dict[str, Any] = {}
    experts = _oracle_experts(io.spec)
    if experts is not None and m.mode in ("oracle", "none"):
        rows, routine_info = _oracle_routine(io, experts, rows, kept)
    _store_screenshots(io.out, rows, collect_records)
    _replace_table(io.out, "mined_states", rows)
    metrics = {"mode": m.mode, **mining_metrics(records, critical, fragile, rows), **rollout}
    metrics["routine_labels"] = routine_info
    metrics["per_task"] = {
        t: {
            "rollouts": v.episodes,
            "failure_rate": round(v.failure_rate, 4),
            "failure_states": v.failure_states,
        }
        for t, v in tally(records).items()
    }
    metrics["wall_s"] = round(time.perf_counter() - start, 1)
    io.write_metrics(metrics)


async def _rollouts(io: StageIO, kept: list[Any]) -> dict[str, Any]:
    from rmsweb.agents.build import checkpoint_policy
    from rmsweb.mine.label import MiningPolicy
    from rmsweb.mine.rollouts import mine_split
    from rmsweb.rollout.build import build_runner

    spec, m = io.spec, io.spec.mine
    runner = build_runner(spec.suite, run=f"mine/{io.exp}", stage="mine")
    split = mine_split(runner.suite)
    seeds = runner.suite.seeds(split)
    cap = min(len(seeds), m.max_seeds_per_task or len(seeds))
    first = min(cap, m.seeds_per_task or cap)
    tasks = runner.suite.task_ids(split)
    model_dir = io.input("sft") / "model"
    async with runner:
        inner = checkpoint_policy(
            model_dir, spec.model, "sft", temperature=m.temperature, seed=io.train_seed
        )
        labeller = _labeller(m.mode, runner.suite, kept)
        probes = m.fragile_k if labeller is not None and m.fragile_k >= 2 else 0
        policy = MiningPolicy(inner, labeller, probes)
        judge = _judge_client(spec) if m.mode == "judge" else None
        play = _player(runner, policy, split, m.samples_per_task, judge, m.mode)
        try:
            episodes, wall, done = await _rounds(io, play, tasks, seeds, first, cap)
        finally:
            await policy.close()
            if judge is not None:
                await judge.close()
    return {
        "rollout_split": split,
        "rollout_episodes_now": episodes,  # this invocation (a resumed run does fewer)
        "rollout_wall_s": round(wall, 1),
        "episodes_per_s": round(episodes / wall, 3) if episodes and wall else None,
        "generations_now": policy.generations,
        "probes_per_state": probes or 1,
        "seeds_per_task": done,
    }


def _player(runner: Any, policy: Any, split: str, samples: int, judge: Any, mode: str) -> Any:
    """play(tasks, seeds, sink, shard) -> (episodes, wall s): one round of rollouts."""
    from rmsweb.mine.rollouts import run_rollouts

    async def play(tasks: list[str], seeds: list[int], sink: Any, shard: Any) -> Any:
        return await run_rollouts(
            runner,
            policy,
            tasks,
            seeds,
            sink,
            samples,
            after=_judge_labels(judge) if judge else None,
            description=f"mine ({mode})",
            shard=shard,
            split=split,
        )

    return play


async def _rounds(
    io: StageIO, play: Any, tasks: list[str], seeds: list[int], first: int, cap: int
) -> tuple[int, float, dict[str, int]]:
    """The first round on every node, then the floor's rounds on the head (mine/floor.py).

    Later rounds depend on every node's results, which only the head has after the
    merge, so they run there alone."""
    from rmsweb.mine.floor import next_round, tally
    from rmsweb.rollout.sharded import node_share
    from rmsweb.store.reader import read_records
    from rmsweb.store.writer import ShardWriter

    m = io.spec.mine
    # One node: a ShardWriter on io.out. Several: this node's share of the units,
    # merged into io.out by the head (rmsweb.rollout.sharded).
    async with node_share(io.out) as share:
        episodes, wall = await play(tasks, seeds[:first], share.sink, share.shard)
    done = dict.fromkeys(tasks, first)
    step = m.seeds_per_task or cap
    while node_rank() == 0 and m.min_failures_per_task:
        played = {t: set(seeds[: done[t]]) for t in tasks}  # finished rounds only
        todo = next_round(
            tally(read_records(io.out), played),
            done,
            floor=m.min_failures_per_task,
            min_rate=m.floor_failure_rate,
            cap=cap,
        )
        if not todo:
            break
        for start in sorted({done[t] for t in todo}):  # tasks that are level play together
            group = [t for t in todo if done[t] == start]
            stop = min(cap, start + step)
            with ShardWriter(io.out) as sink:
                n, w = await play(group, seeds[start:stop], sink, (0, 1))
            episodes, wall = episodes + n, wall + w
            done.update(dict.fromkeys(group, stop))
    return episodes, wall, done


def _oracle_experts(spec: Any) -> dict[str, Any] | None:
    """The scripted expert of every task, when the suite has one for each (MiniWoB)."""
    from rmsweb.suites.factory import build_suite

    suite = build_suite(spec.suite)
    experts = {t: suite.expert(t) for t in suite.task_ids("train")}
    return experts if experts and all(experts.values()) else None


def _oracle_routine(
    io: StageIO, experts: dict[str, Any], rows: list[Any], kept: list[Any]
) -> tuple[list[Any], dict[str, Any]]:
    """Routine rows scored against the oracle's acceptable set (mine/routine.py)."""
    from rmsweb.mine.routine import REPLAY_DIR, relabel, replay_labels

    # Rows of tasks the suite has no expert for (data collected for another task list)
    # keep the teacher's action.
    wanted = {(r.task_id, r.seed) for r in rows if r.source == "routine" and r.task_id in experts}
    if not wanted:
        return rows, {}
    episodes = [r for r in kept if (r.episode.task_id, r.episode.seed) in wanted]
    replays = asyncio.run(replay_labels(io.spec.suite, experts, episodes, io.out / REPLAY_DIR))
    result = relabel(rows, replays)
    info = {
        "replayed_episodes": len(episodes),
        "relabelled": result.relabelled,
        "kept_teacher_action": result.kept_teacher,
        "teacher_action_not_acceptable": result.teacher_not_acceptable,
    }
    return result.rows, info


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
