"""The mine stage end to end: its outputs, metrics and resume, on synthetic collect data.

- mode none: uniform routine states from the SFT data, no rollouts, no model;
- mode oracle: a tiny random model (its outputs rarely parse) rolled out in the
  browser; its failures are mined as critical states with their reference actions.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmsweb.mine.stage import main
from rmsweb.spec import ExperimentSpec
from rmsweb.stage_io import StageIO
from rmsweb.store.reader import read_records, read_rows
from rmsweb.store.synthetic import write_collect_run


def stage_io(tmp_path: Path, spec: dict, inputs: dict[str, Path]) -> StageIO:
    return StageIO(
        exp=spec["name"],
        spec=ExperimentSpec.model_validate(spec),
        inputs=inputs,
        out=tmp_path / "runs" / "mine" / spec["name"],
        metrics=tmp_path / "metrics" / "mine" / f"{spec['name']}.json",
    )


def test_mode_none_draws_uniform_sft_states(tmp_path: Path) -> None:
    collect = write_collect_run(tmp_path / "runs", "x")
    spec = {"name": "x", "mine": {"mode": "none", "max_states": 7}}
    io = stage_io(tmp_path, spec, {"collect": collect})  # no sft: nothing is rolled out
    main(io)
    rows = read_rows(io.out, "mined_states")
    assert len(rows) == 7 and {r.source for r in rows} == {"routine"}
    assert all(r.failure_mode is None and r.weight == 1.0 and r.reference_actions for r in rows)
    assert len({r.state_id for r in rows}) == 7
    metrics = json.loads(io.metrics.read_text())
    assert metrics["mode"] == "none" and metrics["rollouts"] == 0
    assert metrics["by_source"] == {"critical": 0, "fragile": 0, "routine": 7}
    main(io)  # a rerun rewrites the table, it does not add to it
    assert [r.state_id for r in read_rows(io.out, "mined_states")] == [r.state_id for r in rows]


def test_mode_none_leaves_a_worker_node_idle(tmp_path: Path, monkeypatch) -> None:
    """On a multi-node task only the head draws uniform states: a worker node (rank 1)
    has no rollouts to share and must write nothing (no table, no metrics)."""
    collect = write_collect_run(tmp_path / "runs", "x")
    spec = {"name": "x", "mine": {"mode": "none", "max_states": 7}}
    io = stage_io(tmp_path, spec, {"collect": collect})
    monkeypatch.setenv("SKYPILOT_NUM_NODES", "2")
    monkeypatch.setenv("SKYPILOT_NODE_RANK", "1")
    main(io)
    assert not io.out.exists() and not io.metrics.exists()
    monkeypatch.setenv("SKYPILOT_NODE_RANK", "0")  # the control: the head does the work
    main(io)
    assert len(read_rows(io.out, "mined_states")) == 7 and io.metrics.exists()


@pytest.mark.browser
def test_mode_oracle_mines_a_random_models_failures(tmp_path: Path) -> None:
    import torch

    from rmsweb.models.config import TinySize
    from rmsweb.models.tiny import save_tiny_model

    torch.manual_seed(0)
    texts = [
        f'Task: click the "ok" button\n[{i}] button "ok"\nAction: click({i})' for i in range(50)
    ]
    save_tiny_model(tmp_path / "sft" / "model", "qwen3", texts, 300, TinySize(), seed=0)
    collect = write_collect_run(tmp_path / "runs", "x")
    spec = {
        "name": "x",
        "suite": {
            "tasks": ["click-button", "enter-text"],
            "train": {"start": 0, "count": 2},
            "mine": {"start": 200_000, "count": 2},  # shrunk: 2 seeds show every path
            "max_steps": 2,  # shrunk: a random model fails every episode anyway
        },
        "model": {"prompt": {"max_new_tokens": 8}},
        "mine": {"mode": "oracle", "samples_per_task": 2, "fragile_k": 2},
    }
    io = stage_io(tmp_path, spec, {"collect": collect, "sft": tmp_path / "sft"})
    main(io)
    records = read_records(io.out)
    assert len(records) == 2 * 2 * 2  # tasks x seeds x samples
    assert all(len(r.labels) == len(r.steps) for r in records)  # every state labelled
    rows = read_rows(io.out, "mined_states")
    critical = [r for r in rows if r.source == "critical"]
    assert critical and all(r.reference_actions and r.failure_mode for r in critical)
    # The 2 samples of a (task, seed) start in the same state: stored once.
    assert len({r.state_id for r in rows}) == len(rows)
    metrics = json.loads(io.metrics.read_text())
    assert metrics["rollouts"] == 8 and metrics["found"]["critical"] >= len(critical)
    assert metrics["probes_per_state"] == 2 and metrics["generations_now"] >= 2 * 8
    # Rerun: nothing is rolled out again, the same states come out.
    main(io)
    again = json.loads(io.metrics.read_text())
    assert again["rollout_episodes_now"] == 0 and again["rollouts"] == 8
    assert {r.state_id for r in read_rows(io.out, "mined_states")} == {r.state_id for r in rows}


@pytest.mark.browser
def test_the_floor_gives_failing_tasks_more_mine_seeds(tmp_path: Path) -> None:
    """A random model fails everything: with a floor it cannot reach, every task gets
    rounds of one seed until the cap (2), all from the mine range, never train seeds."""
    from rmsweb.models.config import TinySize
    from rmsweb.models.tiny import save_tiny_model

    texts = [f'[{i}] button "ok"\nAction: click({i})' for i in range(30)]
    save_tiny_model(tmp_path / "sft" / "model", "qwen3", texts, 300, TinySize(), seed=0)
    spec = {
        "name": "x",
        "suite": {
            "tasks": ["click-button"],
            "train": {"start": 0, "count": 2},
            "mine": {"start": 200_000, "count": 5},
            "max_steps": 1,  # shrunk: one step shows the rounds
        },
        "model": {"prompt": {"max_new_tokens": 4}},
        "mine": {
            "mode": "oracle",
            "samples_per_task": 1,
            "fragile_k": 0,
            "seeds_per_task": 1,
            "min_failures_per_task": 1000,
            "max_seeds_per_task": 2,
        },
    }
    io = stage_io(
        tmp_path,
        spec,
        {"collect": write_collect_run(tmp_path / "runs", "x"), "sft": tmp_path / "sft"},
    )
    main(io)
    records = read_records(io.out)
    assert sorted(r.episode.seed for r in records) == [200_000, 200_001]
    assert {r.episode.split for r in records} == {"mine"}
    metrics = json.loads(io.metrics.read_text())
    assert metrics["seeds_per_task"] == {"click-button": 2}
    assert metrics["per_task"]["click-button"]["failure_rate"] == 1.0
