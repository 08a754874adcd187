"""The probed states and their G samples as one Parquet file, for DuckDB.

<run>/regime_states.parquet, one row per probed state:

    SELECT task_id, kind, avg(reached::int) AS reach, count(*) AS states
    FROM 'runs/regime/<experiment>/s0/regime_states.parquet' GROUP BY ALL;

Columns: state_id, kind (mined | val), source (critical | fragile for mined states;
first | later for val ones: the episode's first wrong step, or one after it), task_id,
seed, episode_id and step (where the state comes from: the mine run's episode for a
mined state, this run's greedy episode for a val one), instruction, obs_text,
history_actions (the earlier steps' actions, null where one did not parse),
references (acceptable actions), policy_output (what the policy did there: its greedy
output for val states), samples (the G outputs at the RL temperature), samples_ok
(each one's verdict under RL's reward), n_ok, reached (n_ok >= 1), samples_on_target
(each one has a reference's action type and element, value aside), reached_target.
A file beside the store's tables (not one of them), rewritten whole on every run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rmsweb.regime.probe import ProbeState

FILE = "regime_states.parquet"


def write_states(run_dir: Path, states: Sequence[ProbeState]) -> Path:
    import pyarrow as pa

    from rmsweb.store.writer import write_parquet_atomic

    text, ints = pa.string(), pa.int64()
    schema = pa.schema(
        [
            ("state_id", text),
            ("kind", text),
            ("source", text),
            ("task_id", text),
            ("seed", ints),
            ("episode_id", text),
            ("step", ints),
            ("instruction", text),
            ("obs_text", text),
            ("history_actions", pa.list_(text)),
            ("references", pa.list_(text)),
            ("policy_output", text),
            ("samples", pa.list_(text)),
            ("samples_ok", pa.list_(pa.bool_())),
            ("n_ok", ints),
            ("reached", pa.bool_()),
            ("samples_on_target", pa.list_(pa.bool_())),
            ("reached_target", pa.bool_()),
        ]
    )
    rows = [
        {
            "state_id": s.state_id,
            "kind": s.kind,
            "source": s.source,
            "task_id": s.task_id,
            "seed": s.seed,
            "episode_id": s.episode_id,
            "step": s.step,
            "instruction": s.instruction,
            "obs_text": s.obs_text,
            "history_actions": [h.action_text for h in s.history],
            "references": list(s.references),
            "policy_output": s.policy_output,
            "samples": list(s.samples),
            "samples_ok": list(s.samples_ok),
            "n_ok": sum(s.samples_ok),
            "reached": s.reached,
            "samples_on_target": list(s.samples_on_target),
            "reached_target": s.reached_target,
        }
        for s in states
    ]
    path = Path(run_dir) / FILE
    write_parquet_atomic(path, pa.Table.from_pylist(rows, schema=schema))
    return path
