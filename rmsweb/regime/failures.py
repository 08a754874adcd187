"""Val failure states: where the greedy SFT policy's action is not acceptable.

From the oracle-labelled greedy episodes (rollouts.py): every labelled step (the oracle
labels each visited state, as mining's mode oracle does) whose executed output RL's
reward would not accept (accept.py). Not only an episode's first wrong step: a policy
that errs again later fails there too. Steps the oracle had nothing to suggest at (the
task was over) are not graded; episodes that ended in an environment error are skipped,
as mining skips them (they say nothing about the policy). Identical states (same
state id: the prompt's inputs, rmsweb.mine.states.state_id) are kept once, the first in
(episode id, step) order, so a policy stuck repeating one action does not count the
same state many times.

Each state's source says where in its episode it lies: "first" (the episode's first
wrong step, the kind of state mining's critical states are) or "later" (a step after an
earlier error: the demonstrations never show a recovery, so reach there is expected
to be lower). Reach is reported on all of them and on the first ones apart.
"""

from __future__ import annotations

from collections.abc import Iterable

from rmsweb.mine.critical import history_before
from rmsweb.mine.states import state_id
from rmsweb.regime.accept import accepted
from rmsweb.regime.probe import ProbeState
from rmsweb.store.rows import EpisodeRecord


def val_failure_states(records: Iterable[EpisodeRecord], tau: float) -> list[ProbeState]:
    """The failure states of labelled episodes (module doc), deduplicated by state id."""
    found: dict[str, ProbeState] = {}
    for rec in sorted(records, key=lambda r: r.episode.episode_id):
        ep = rec.episode
        if ep.error:
            continue
        labels = {lab.step: lab for lab in rec.labels}
        source = "first"
        for st in rec.steps:
            label = labels.get(st.step)
            if label is None or not label.acceptable:
                continue
            where = f"val state {ep.episode_id} step {st.step}"
            if accepted(st.output_text, label.acceptable, label.boxes, tau, where):
                continue
            history = history_before(rec.steps, st.step)
            sid = state_id(ep.task_id, ep.instruction, st.obs_text, st.screenshot, history)
            where_in_episode, source = source, "later"
            if sid in found:
                continue
            found[sid] = ProbeState(
                state_id=sid,
                kind="val",
                source=where_in_episode,
                task_id=ep.task_id,
                seed=ep.seed,
                episode_id=ep.episode_id,
                step=st.step,
                instruction=ep.instruction,
                obs_text=st.obs_text,
                screenshot=st.screenshot,
                history=history,
                references=list(label.acceptable),
                boxes=list(label.boxes),
                policy_output=st.output_text,
            )
    return list(found.values())
