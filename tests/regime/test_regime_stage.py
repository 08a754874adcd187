"""The regime stage end to end: 1 MiniWoB task, 2 val seeds, the tiny random model.

The model is untrained, so its greedy actions fail and its states are val failure
states; the mine run is constructed (two failure states and a routine one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmsweb.regime.stage import main
from rmsweb.regime.table import FILE
from rmsweb.spec import ExperimentSpec
from rmsweb.stage_io import StageIO
from rmsweb.store.reader import read_records
from rmsweb.store.rows import MinedStateRow
from rmsweb.store.writer import TableWriter

G = 4


def mined_row(i: int, source: str) -> MinedStateRow:
    return MinedStateRow(
        state_id=f"m{i}",
        episode_id=f"mine-e{i}",
        step=0,
        obs_text=f'[{i}] button "ok"',
        screenshot=None,
        history=[],
        reference_actions=[f"click({i})"],
        policy_action=None,
        failure_mode="wrong_element" if source != "routine" else None,
        weight=1.0,
        task_id="click-button",
        instruction='Click on the "ok" button.',
        seed=200_000 + i,
        source=source,
    )


@pytest.mark.browser
@pytest.mark.slow  # ~90 s on a loaded 2-core machine: model load, browser, 2 x 2 episodes
def test_regime_stage_on_one_task_and_two_val_seeds(tmp_path: Path) -> None:
    import duckdb
    import torch

    from rmsweb.models.config import TinySize
    from rmsweb.models.tiny import save_tiny_model

    torch.manual_seed(0)
    texts = [f'[{i}] button "ok"\nAction: click({i})' for i in range(40)]
    save_tiny_model(tmp_path / "sft" / "model", "qwen3", texts, 300, TinySize(), seed=0)
    mine = tmp_path / "runs" / "mine" / "x" / "s0"
    with TableWriter(mine, "mined_states") as w:
        w.write_many([mined_row(1, "critical"), mined_row(2, "fragile"), mined_row(3, "routine")])
    spec = ExperimentSpec.model_validate(
        {
            "name": "x",
            "suite": {
                "tasks": ["click-button"],
                "val": {"start": 50_000, "count": 5},
                "max_steps": 2,
            },
            "model": {"prompt": {"max_new_tokens": 8}},
            "rl": {"group_size": G, "temperature": 0.7, "batch_size": 8},
            "regime": {"val_seeds_per_task": 2},
        }
    )
    io = StageIO(
        exp="x",
        spec=spec,
        inputs={"sft": tmp_path / "sft", "mine": mine},
        out=tmp_path / "runs" / "regime" / "x" / "s0",
        metrics=tmp_path / "metrics" / "regime" / "x-s0.json",
        seed=0,
    )
    main(io)
    m = json.loads(io.metrics.read_text())
    assert (m["group_size"], m["temperature"], m["val_seeds_per_task"]) == (G, 0.7, 2)
    task = m["per_task"]["click-button"]
    assert task["expert_success_val"] == 1.0 and task["expert_episodes"] == 2
    assert task["expert_steps"] == 1.0  # click-button: one click
    assert task["sft_episodes"] == 2
    assert task["headroom"] == round(1.0 - task["sft_success_val"], 4)
    assert task["reach_val_states"] >= 1  # an untrained model fails somewhere
    assert task["reach_mined_states"] == 2  # critical + fragile, not routine
    assert m["mined_states_available"] == 2
    records = read_records(io.out)
    assert sorted((r.episode.policy, r.episode.seed) for r in records) == [
        ("expert", 50_000),
        ("expert", 50_001),
        ("sft", 50_000),
        ("sft", 50_001),
    ]
    assert {r.episode.split for r in records} == {"val"} and {r.episode.stage for r in records} == {
        "regime"
    }
    sft = [r for r in records if r.episode.policy == "sft"]
    assert all(len(r.labels) == len(r.steps) for r in sft)  # every visited state labelled
    # The states table: every probed state with G samples, queryable with DuckDB
    path = io.out / FILE
    con = duckdb.connect()
    rows = con.execute(
        f"SELECT kind, task_id, len(samples) AS g, len(samples_ok) AS k, reached, n_ok "
        f"FROM '{path}'"
    ).fetchall()
    kinds = [r[0] for r in rows]
    assert kinds.count("mined") == 2 and kinds.count("val") == task["reach_val_states"]
    assert all(g == G and k == G and reached == (n_ok > 0) for _, _, g, k, reached, n_ok in rows)
    assert m["generations"] == G * len(rows)
    (reach_val,) = con.execute(
        f"SELECT avg(reached::int) FROM '{path}' WHERE kind = 'val'"
    ).fetchone()
    if task["reach_val_states"]:
        assert round(reach_val, 4) == task["reach_val"]
    assert m["pooled"]["headroom"] == task["headroom"]
    # Rerun: the val episodes are stored, nothing is played again
    main(io)
    again = json.loads(io.metrics.read_text())
    assert again["expert_episodes_now"] == 0 and again["sft_episodes_now"] == 0
    assert again["per_task"]["click-button"]["sft_success_val"] == task["sft_success_val"]
