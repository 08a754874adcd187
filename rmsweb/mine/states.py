"""From findings and SFT data to the mined_states rows: weights, deduplication, mixing.

1. Weight of a mined state = mode_weights[failure mode] (default 1.0) x criticality
   (1 for critical, the wrong fraction of the samples for fragile).
2. Identical states are stored once: the state id hashes what the prompt is built
   from (task, instruction, page text, screenshot, earlier actions and errors). Of
   duplicates the highest weight wins, critical before fragile on ties, then the
   lowest (episode id, step): not the first stored, since a resumed or multi-node run
   stores the same rollouts in another order (its samples' outputs may differ).
3. `max_states` keeps the mined states of highest weight (ties: critical first,
   then by state id, so the choice is deterministic), leaving room for the routine
   share: at most floor(max_states x (1 - routine_fraction)) of them.
4. Routine states, drawn uniformly (seeded) from the SFT data (every step of the
   teacher's kept trajectories) minus the mined states, are mixed in so that they
   make `routine_fraction` of the result: R = round(M x f / (1 - f)). Their
   reference action is the teacher's, their weight 1.0.
5. Mode `none` (the baseline) is step 4 alone: min(max_states, all) uniform states.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Iterable, Mapping, Sequence

from rmsweb.env.actions import Action, format_action
from rmsweb.env.types import HistoryItem
from rmsweb.mine.critical import Finding, history_before
from rmsweb.store.rows import EpisodeRecord, MinedStateRow

SOURCE_ORDER = {"critical": 0, "fragile": 1, "routine": 2}


def state_id(
    task_id: str, instruction: str, obs_text: str, screenshot: str | None, history: Sequence
) -> str:
    """A stable id of what the prompt is built from (the prompt shows each earlier step's
    action and error, not its raw output)."""
    key = [task_id, instruction, obs_text, screenshot, [[h.action_text, h.error] for h in history]]
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:20]


def finding_row(f: Finding, mode_weights: Mapping[str, float]) -> MinedStateRow:
    rec, ep = f.record, f.record.episode
    st = next(s for s in rec.steps if s.step == f.step)
    history = history_before(rec.steps, f.step)
    return MinedStateRow(
        state_id=state_id(ep.task_id, ep.instruction, st.obs_text, st.screenshot, history),
        episode_id=ep.episode_id,
        step=f.step,
        obs_text=st.obs_text,
        screenshot=st.screenshot,
        history=history,
        reference_actions=list(f.label.acceptable),
        policy_action=f.policy_action,
        failure_mode=f.failure_mode,
        weight=mode_weights.get(f.failure_mode, 1.0) * f.criticality,
        task_id=ep.task_id,
        instruction=ep.instruction,
        seed=ep.seed,
        source=f.source,
        policy_output=f.policy_output,
        sampled_actions=f.sampled,
        wrong_fraction=f.criticality if f.source == "fragile" else None,
        boxes=list(f.label.boxes),
    )


def kept_records(records: Iterable[EpisodeRecord]) -> list[EpisodeRecord]:
    """The SFT data: per (task, seed) the successful attempt with the fewest steps (then
    the earliest). The same rule as rmsweb.train.sft.samples.kept_records, which a stage
    package may not import; tests/mine pins the two together."""
    best: dict[tuple[str, int], EpisodeRecord] = {}
    for rec in records:
        ep = rec.episode
        if not ep.success or ep.error:
            continue
        key = (ep.task_id, ep.seed)
        cur = best.get(key)
        if cur is None or (ep.n_steps, ep.attempt) < (cur.episode.n_steps, cur.episode.attempt):
            best[key] = rec
    return [best[k] for k in sorted(best)]


def routine_rows(kept: Iterable[EpisodeRecord]) -> list[MinedStateRow]:
    """Every step of the SFT data (the kept teacher trajectories) as a routine state."""
    rows = []
    for rec in kept:
        ep = rec.episode
        for st in rec.steps:
            if not st.parse_ok or st.action is None:
                continue  # SFT trains on parsed steps only
            history: list[HistoryItem] = history_before(rec.steps, st.step)
            rows.append(
                MinedStateRow(
                    state_id=state_id(
                        ep.task_id, ep.instruction, st.obs_text, st.screenshot, history
                    ),
                    episode_id=ep.episode_id,
                    step=st.step,
                    obs_text=st.obs_text,
                    screenshot=st.screenshot,
                    history=history,
                    reference_actions=[format_action(Action.from_row(st.action))],
                    policy_action=None,
                    failure_mode=None,
                    weight=1.0,
                    task_id=ep.task_id,
                    instruction=ep.instruction,
                    seed=ep.seed,
                    source="routine",
                )
            )
    return rows


def _rank(row: MinedStateRow) -> tuple[float, int, str, str, int]:
    return (-row.weight, SOURCE_ORDER[row.source], row.state_id, row.episode_id, row.step)


def dedupe(rows: Iterable[MinedStateRow]) -> list[MinedStateRow]:
    """One row per state id: the highest weight, critical before fragile on ties, then
    the lowest (episode id, step), whatever order the rows come in."""
    best: dict[str, MinedStateRow] = {}
    for row in rows:
        cur = best.get(row.state_id)
        if cur is None or _rank(row) < _rank(cur):
            best[row.state_id] = row
    return sorted(best.values(), key=_rank)


def select_states(
    mined: Sequence[MinedStateRow],
    routine: Sequence[MinedStateRow],
    *,
    routine_fraction: float,
    max_states: int,
    seed: int,
) -> list[MinedStateRow]:
    """Steps 3-4 of the module doc: cap the mined states, mix in routine ones."""
    mined = dedupe(mined)
    room = max(1, math.floor(max_states * (1 - routine_fraction)))
    kept = mined[:room]
    taken = {r.state_id for r in kept}
    pool = [r for r in dedupe(routine) if r.state_id not in taken]
    want = round(len(kept) * routine_fraction / (1 - routine_fraction))
    want = min(want, len(pool), max_states - len(kept))
    return kept + uniform(pool, want, seed)


def uniform(pool: Sequence[MinedStateRow], n: int, seed: int) -> list[MinedStateRow]:
    """n states drawn uniformly without replacement (seeded), in state-id order."""
    ordered = sorted(pool, key=lambda r: r.state_id)
    return random.Random(seed).sample(ordered, min(n, len(ordered)))
