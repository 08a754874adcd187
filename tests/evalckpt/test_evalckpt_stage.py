"""The `evalckpt` stage for real on a tiny run: the rl stage trains 3 steps (checkpoints at
steps 2 and 3), then evalckpt replays it and evaluates SFT (step 0) and both checkpoints
on the val split in a real browser."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from rmsweb.env.types import HistoryItem
from rmsweb.spec import ExperimentSpec
from rmsweb.stage_io import StageIO
from rmsweb.store.rows import MinedStateRow
from rmsweb.store.writer import TableWriter

SPEC = {
    "name": "ck",
    "seeds": [0],
    "suite": {
        "tasks": ["click-button"],
        "val": {"start": 50_000, "count": 2},  # shrunk: 2 val seeds per checkpoint
        "max_steps": 2,  # shrunk: a random tiny model fails every episode anyway
    },
    # max_new_tokens 6 (shrunk): a random tiny model never stops early
    "model": {"kind": "tiny", "prompt": {"system": "none", "max_new_tokens": 6}},
    # 3 steps, save_steps 2: checkpoints at steps 2 and 3 (the last step always saves)
    "rl": {
        "steps": 3,
        "group_size": 2,
        "batch_size": 4,
        "save_steps": 2,
        "learning_rate": 1e-3,
        "torch_threads": 1,
    },
    "eval": {
        "splits": ["test"],  # the curve is on val whatever eval.splits says
        "policies": [
            {"kind": "checkpoint", "name": "rl", "source": "rl", "every_checkpoint": True}
        ],
    },
}


def _mined(run_dir: Path) -> None:
    rows = [
        MinedStateRow(
            state_id=f"e{k}/1",
            episode_id=f"e{k}",
            step=1,
            obs_text='[2] button "ok"\n[3] button "cancel"\n[4] button "next"',
            screenshot=None,
            history=[HistoryItem("Action: click(2)", "click(2)", None)],
            reference_actions=[f"click({target})"],
            policy_action="click(2)",
            failure_mode="wrong_element",
            weight=1.0,
            task_id="click-button",
            instruction=f'Click on the "{word}" button.',
        )
        for k, (word, target) in enumerate([("ok", 2), ("cancel", 3), ("next", 4)])
    ]
    with TableWriter(run_dir, "mined_states") as w:
        w.write_many(rows)


@pytest.mark.browser
def test_one_row_per_checkpoint_on_val_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    from rmsweb.evalckpt.stage import main
    from rmsweb.models.config import TinySize
    from rmsweb.models.tiny import save_tiny_model
    from rmsweb.store.reader import read_records, read_rows
    from rmsweb.train.salvage_ds.stage import main as rl_main

    monkeypatch.delenv("RMSWEB_CHECKPOINT_DIR", raising=False)
    torch.manual_seed(0)
    texts = [f'Click on the "ok" button.\n[{i}] button "ok"\nAction: click({i})' for i in range(30)]
    # hidden 32 (shrunk): the mechanics, not learning
    save_tiny_model(
        tmp_path / "sft" / "model",
        "qwen3",
        texts,
        300,
        TinySize(hidden_size=32, intermediate_size=64),
        seed=0,
    )
    _mined(tmp_path / "mine")
    spec = ExperimentSpec.model_validate(SPEC)
    inputs = {"sft": tmp_path / "sft", "mine": tmp_path / "mine"}
    rl_main(
        StageIO("ck", spec, inputs, tmp_path / "rl", tmp_path / "metrics/rl/ck-s0.json", seed=0)
    )

    metrics = tmp_path / "metrics" / "evalckpt" / "ck-rl-s0.json"
    io = StageIO(
        "ck",
        spec,
        {**inputs, "rl": tmp_path / "rl"},
        tmp_path / "runs" / "evalckpt" / "ck" / "rl" / "s0",
        metrics,
        policy="rl",
        seed=0,
    )
    main(io)

    values = json.loads(metrics.read_text())
    assert values["split"] == "val" and values["steps"] == [0, 2, 3]
    assert values["episodes_per_step"] == 2
    # The replay is the rl stage's run: the same weights at the end, to the bit.
    assert values["replay"]["max_abs_weight_diff"] == 0.0 and values["replay"]["same_as_rl"]
    with metrics.with_suffix(".curve.csv").open() as f:
        curve = list(csv.DictReader(f))
    assert [int(r["step"]) for r in curve] == [0, 2, 3]
    assert all(int(r["episodes"]) == 2 for r in curve)
    with metrics.with_suffix(".tasks.csv").open() as f:
        tasks = list(csv.DictReader(f))
    assert [(r["step"], r["task_id"]) for r in tasks] == [
        ("0", "click-button"),
        ("2", "click-button"),
        ("3", "click-button"),
    ]
    records = read_records(io.out)
    assert {r.episode.split for r in records} == {"val"}
    assert {r.episode.seed for r in records} == {50_000, 50_001}
    assert sorted({r.episode.policy for r in records}) == ["rl-step-0", "rl-step-2", "rl-step-3"]
    evals = read_rows(io.out, "evals")
    assert {e.split for e in evals} == {"val"} and len(evals) == 3 * 2  # task + overall rows
    # Weights are not cached by DVC: the kept policies and the replay's checkpoints go.
    assert not (io.out / "snapshots").exists() and not (io.out / "checkpoints").exists()


def test_weights_diff_sees_a_different_model(tmp_path: Path) -> None:
    """The control of the replay check: two different models are not 0 apart."""
    import torch

    from rmsweb.evalckpt.replay import weights_diff
    from rmsweb.models.config import TinySize
    from rmsweb.models.tiny import save_tiny_model

    texts = [f'[{i}] button "ok"\nAction: click({i})' for i in range(20)]
    size = TinySize(hidden_size=32, intermediate_size=64)  # shrunk: only the weights matter
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        torch.manual_seed(seed)
        save_tiny_model(tmp_path / name, "qwen3", texts, 300, size, seed=seed)
    assert weights_diff(tmp_path / "a", tmp_path / "b") == 0.0
    assert weights_diff(tmp_path / "a", tmp_path / "c") > 0.0
    assert weights_diff(tmp_path / "a", tmp_path / "missing") is None


def test_checkpoint_steps_are_the_trainers() -> None:
    from rmsweb.evalckpt.replay import checkpoint_steps

    assert checkpoint_steps(60, 20) == [20, 40, 60]
    assert checkpoint_steps(3, 2) == [2, 3]  # the last step always saves
    assert checkpoint_steps(5, 10) == [5]


def test_a_policy_that_is_not_rl_is_refused(tmp_path: Path) -> None:
    from rmsweb.evalckpt.stage import main
    from rmsweb.stage_io import StageInputError

    spec = ExperimentSpec.model_validate(
        {**SPEC, "eval": {"policies": [{"kind": "checkpoint", "name": "sft", "source": "sft"}]}}
    )
    io = StageIO("ck", spec, {}, tmp_path / "out", tmp_path / "m.json", policy="sft", seed=0)
    with pytest.raises(StageInputError, match="not one"):
        main(io)
    assert not (tmp_path / "out").exists()  # refused before any work
