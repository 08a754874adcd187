"""The `rl` stage end to end on a tiny text model: model folder, rl_groups, curves, metrics."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from rmsweb.env.types import HistoryItem
from rmsweb.spec import ExperimentSpec
from rmsweb.stage_io import StageIO
from rmsweb.store.reader import read_rows
from rmsweb.store.rows import MinedStateRow
from rmsweb.store.writer import TableWriter
from rmsweb.train.salvage_ds.stage import hyper_from_spec, main
from rmsweb.train.salvage_ds.trainer import CURVE_COLUMNS

RL = {
    "steps": 3,
    "group_size": 2,
    "batch_size": 4,
    "save_steps": 2,
    "learning_rate": 1e-3,
    "torch_threads": 1,
}
# max_new_tokens 6 (shrunk): a random tiny model never stops early.
MODEL = {"kind": "tiny", "prompt": {"system": "none", "max_new_tokens": 6}}


def _spec(rl: dict[str, Any]) -> ExperimentSpec:
    return ExperimentSpec.model_validate({"name": "rl-test", "model": MODEL, "rl": rl})


def test_spec_kinds_become_trainer_settings() -> None:
    grpo = hyper_from_spec(_spec({**RL, "kind": "grpo"}).rl, _spec(RL).model, 0).algorithm
    assert (grpo.gate, grpo.anchor_weight, grpo.max_resample) == (False, 0.0, 0)
    dapo = hyper_from_spec(_spec({**RL, "kind": "dapo_ds"}).rl, _spec(RL).model, 0).algorithm
    assert (dapo.gate, dapo.anchor_weight, dapo.max_resample) == (True, 0.0, 3)
    salvage = _spec({**RL, "kind": "salvage_ds", "max_resample": 2, "gate": False})
    algo = hyper_from_spec(salvage.rl, salvage.model, 0).algorithm
    assert (algo.gate, algo.anchor_weight, algo.max_resample) == (False, 0.5, 2)
    default = _spec({})
    assert default.rl.kind == "salvage_ds" and default.rl.max_resample == 0


def _mined(run_dir: Path) -> None:
    rows = []
    for k, (word, target) in enumerate([("ok", 2), ("cancel", 3), ("next", 4)]):
        obs = '[2] button "ok"\n[3] button "cancel"\n[4] button "next"'
        rows.append(
            MinedStateRow(
                state_id=f"e{k}/1",
                episode_id=f"e{k}",
                step=1,
                obs_text=obs,
                screenshot=None,
                history=[HistoryItem("Action: click(2)", "click(2)", None)],
                reference_actions=[f"click({target})"],
                policy_action="click(2)",
                failure_mode="wrong_element",
                weight=1.0,
                task_id="click-button",
                instruction=f'Click on the "{word}" button.',
            )
        )
    with TableWriter(run_dir, "mined_states") as w:
        w.write_many(rows)


def test_rl_stage_writes_model_groups_curves_and_metrics(
    tiny_text_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rmsweb.models.load import load_model

    monkeypatch.delenv("RMSWEB_CHECKPOINT_DIR", raising=False)
    mine, sft, out = tmp_path / "mine", tmp_path / "sft", tmp_path / "out"
    _mined(mine)
    shutil.copytree(tiny_text_dir, sft / "model")
    metrics = tmp_path / "metrics" / "rl-test.json"
    io = StageIO(
        "rl-test",
        _spec({**RL, "kind": "salvage_ds"}),
        {"mine": mine, "sft": sft},
        out,
        metrics,
    )
    main(io)

    loaded = load_model(out / "model")  # eval's checkpoint policy loads it like SFT's
    assert not loaded.is_vl
    groups = read_rows(out, "rl_groups")
    assert len(groups) == 3 * 2 and {g.rl_step for g in groups} == {1, 2, 3}
    assert all(len(g.rewards) == 2 for g in groups)
    for g in groups:  # a random model is always wrong: every group anchored
        assert (g.reason, g.accepted, g.pg_loss) == ("all_wrong", False, None)
        assert g.anchor_loss is not None and g.anchor_loss > 0
    with (tmp_path / "metrics" / "rl-test.curves.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == CURVE_COLUMNS
    assert [r["step"] for r in rows] == ["1", "2", "3"]
    assert all(r["pg_loss"] == "" and float(r["anchor_loss"]) > 0 for r in rows)
    values = json.loads(metrics.read_text())
    assert values["kind"] == "salvage_ds" and values["steps"] == 3 and values["states"] == 3
    assert values["samples_generated"] == 12 and values["reasons"]["all_wrong"] == 6
    assert 0 < values["generate_fraction"] < 1
    assert not (out / "checkpoints").exists()  # deleted: DVC must not cache them


def test_rl_stage_without_mined_states_is_a_user_error(tiny_text_dir: Path, tmp_path: Path) -> None:
    from rmsweb.errors import UserError

    (tmp_path / "mine").mkdir()
    shutil.copytree(tiny_text_dir, tmp_path / "sft" / "model")
    io = StageIO(
        "rl-test",
        _spec(RL),
        {"mine": tmp_path / "mine", "sft": tmp_path / "sft"},
        tmp_path / "out",
        tmp_path / "m.json",
    )
    with pytest.raises(UserError, match="no mined states"):
        main(io)


def test_continued_sft_and_canary_run_through_the_stage(
    tiny_text_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The two controls of a study are RL stages too: same inputs, same outputs."""
    monkeypatch.delenv("RMSWEB_CHECKPOINT_DIR", raising=False)
    mine, sft = tmp_path / "mine", tmp_path / "sft"
    _mined(mine)
    shutil.copytree(tiny_text_dir, sft / "model")
    runs = {
        "sft": {**RL, "kind": "continued_sft", "kl_probe_states": 2},
        "canary": {**RL, "kind": "salvage_ds", "reward": {"invert": True}},
    }
    for name, rl in runs.items():
        metrics = tmp_path / "metrics" / f"{name}.json"
        io = StageIO("rl-test", _spec(rl), {"mine": mine, "sft": sft}, tmp_path / name, metrics)
        main(io)
        values = json.loads(metrics.read_text())
        assert (tmp_path / name / "model" / "config.json").is_file()
        if name == "sft":
            assert values["kind"] == "continued_sft" and values["samples_generated"] == 0
            assert values["kl_to_sft_final"] > 0 and values["groups"] == 0
        else:
            assert values["reward_inverted"] is True
            groups = read_rows(tmp_path / name, "rl_groups")
            assert all(set(g.rewards) == {1.0} for g in groups)  # always wrong, inverted


def test_rl_stage_logs_its_curves_with_dvclive_while_it_trains(
    tiny_text_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """metrics/<kind>/<stem>.dvclive/: one TSV per curve, a row per optimizer step
    (entropy and the KL to SFT at the probe steps), and no dvc.yaml of its own."""
    monkeypatch.delenv("RMSWEB_CHECKPOINT_DIR", raising=False)
    mine, sft = tmp_path / "mine", tmp_path / "sft"
    _mined(mine)
    shutil.copytree(tiny_text_dir, sft / "model")
    rl = {**RL, "kind": "salvage_ds", "kl_probe_states": 2}
    metrics = tmp_path / "metrics" / "rl" / "demo-s0.json"
    io = StageIO("rl-test", _spec(rl), {"mine": mine, "sft": sft}, tmp_path / "out", metrics)
    main(io)
    live = metrics.with_name("demo-s0.dvclive")
    curves = live / "plots" / "metrics" / "rl"
    steps = json.loads(metrics.read_text())["steps"]
    rewards = (curves / "reward_mean.tsv").read_text().splitlines()
    assert rewards[0].split("\t") == ["step", "reward_mean"]
    assert [int(r.split("\t")[0]) for r in rewards[1:]] == list(range(1, steps + 1))
    entropy = (curves / "entropy.tsv").read_text().splitlines()[1:]
    assert entropy and all(float(r.split("\t")[1]) > 0 for r in entropy)
    assert (curves / "kl_to_sft.tsv").is_file()
    assert json.loads((live / "metrics.json").read_text())["step"] == steps
    assert not (live / "dvc.yaml").exists()
