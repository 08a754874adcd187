"""Routine states scored against the oracle's acceptable set, not the teacher's action.

A routine state comes from the SFT data: a step of the teacher's kept trajectory. Its
executed action is one acceptable action at best, and a detour (an action the expert
would not take) a quarter of the time at the default job's settings, so scoring RL
samples against it alone would call right actions wrong and teach the detours.

The oracle reads the live page (element values, tags, boxes), which the stored text
does not keep, so the kept episodes behind the selected routine states are replayed:
the same seed, the teacher's recorded outputs step by step (MiniWoB is deterministic
under its seed), with the oracle labelling each state. A state whose replayed page text
differs from the stored one keeps the teacher's action, and is counted.

The replays are stored as their own run under <mine out>/routine_replay (resumable).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rmsweb.agents.base import ActResult
from rmsweb.env.actions import Action, format_action
from rmsweb.env.types import ActRequest, Expert
from rmsweb.store.rows import EpisodeRecord, MinedStateRow

REPLAY_DIR = "routine_replay"


class ReplayPolicy:
    """Plays back recorded outputs: at step t of (task, seed), the kept trajectory's t-th."""

    name = "teacher-replay"

    def __init__(self, outputs: Mapping[tuple[str, int], Sequence[str]]) -> None:
        self.outputs = outputs

    async def act(self, request: ActRequest) -> ActResult:
        recorded = self.outputs.get((request.task_id, request.seed), ())
        step = request.step
        return ActResult(recorded[step] if step < len(recorded) else "Action: stop()")

    async def close(self) -> None:
        pass


@dataclass(frozen=True)
class Relabelled:
    rows: list[MinedStateRow]
    relabelled: int  # routine rows now scored against the oracle's set
    kept_teacher: int  # replay diverged or no label: the teacher's action stays
    teacher_not_acceptable: int  # the teacher's executed action was not in the oracle's set


async def replay_labels(
    spec: Any, experts: Mapping[str, Expert], episodes: Sequence[EpisodeRecord], out: Path
) -> list[EpisodeRecord]:
    """Replay the given kept episodes with the oracle labelling each state; their records."""
    from rmsweb.mine.label import MiningPolicy, OracleLabeller
    from rmsweb.mine.rollouts import run_rollouts
    from rmsweb.rollout.build import build_runner
    from rmsweb.store.reader import read_records
    from rmsweb.store.writer import ShardWriter

    outputs = {
        (r.episode.task_id, r.episode.seed): [s.output_text for s in r.steps] for r in episodes
    }
    seeds_of: dict[str, list[int]] = defaultdict(list)
    for task, seed in sorted(outputs):
        seeds_of[task].append(seed)
    runner = build_runner(spec, run="mine/routine-replay", stage="mine")
    policy = MiningPolicy(ReplayPolicy(outputs), OracleLabeller(experts), probes=0)
    async with runner:
        with ShardWriter(out) as sink:
            for task, seeds in sorted(seeds_of.items()):
                await run_rollouts(
                    runner, policy, [task], seeds, sink, 1, description="routine replay"
                )
    return read_records(out)


def relabel(rows: Sequence[MinedStateRow], replays: Sequence[EpisodeRecord]) -> Relabelled:
    """Routine rows with the oracle's acceptable set from the replay of their episode."""
    from rmsweb.env.actions import ParseError, matches_any, parse_action

    by_key = {(r.episode.task_id, r.episode.seed): r for r in replays if not r.episode.error}
    out: list[MinedStateRow] = []
    relabelled = kept = not_ok = 0
    for row in rows:
        if row.source != "routine" or (row.task_id, row.seed) not in by_key:
            out.append(row)
            continue
        rec = by_key[(row.task_id, row.seed)]
        step = next((s for s in rec.steps if s.step == row.step), None)
        label = next((lab for lab in rec.labels if lab.step == row.step), None)
        if step is None or label is None or not label.acceptable or step.obs_text != row.obs_text:
            kept += 1
            out.append(row)
            continue
        acceptable = [a for a in map(parse_action, label.acceptable) if isinstance(a, Action)]
        teacher = parse_action(row.reference_actions[0])
        if isinstance(teacher, ParseError) or not matches_any(teacher, acceptable):
            not_ok += 1
        relabelled += 1
        out.append(replace(row, reference_actions=[format_action(a) for a in acceptable]))
    return Relabelled(out, relabelled, kept, not_ok)
