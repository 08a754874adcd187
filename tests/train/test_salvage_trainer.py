"""The trainer's group handling per kind: gate, resampling, anchor, logs, never stalling.

Generation is scripted (each state has a set chance of a correct action), so the tests
pin what the trainer does with groups, independently of what a tiny random model
happens to sample; losses and updates still run through the real model.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from rmsweb.train.salvage_ds.trainer import RLHyper, SalvageDSTrainer, TrainResult, algorithm


@pytest.fixture
def run(script_generation: Any) -> Any:
    def run_(
        model: Any, tok: Any, states: list, tmp: Path, p: list[float], kind: str, **algo: Any
    ) -> TrainResult:
        return _run(script_generation, model, tok, states, tmp, p, kind, **algo)

    return run_


def _run(
    script: Any,
    model: Any,
    tok: Any,
    states: list,
    tmp: Path,
    p: list[float],
    kind: str,
    **algo: Any,
) -> TrainResult:
    hyper = RLHyper(
        steps=3,
        group_size=4,
        batch_size=8,  # 2 groups a step
        learning_rate=1e-3,
        algorithm=algorithm(kind, **algo),
        min_std=0.1,
        competence_min=0.25,
        competence_max=0.75,
        save_steps=10,
    )
    trainer = SalvageDSTrainer(model, tok, states, hyper, tmp)
    script(trainer, p)
    return trainer.train()


def test_grpo_uses_every_group(
    run: Any, tiny_model: Any, tiny_tokenizer: Any, make_states: Any, tmp_path: Path
) -> None:
    result = run(tiny_model, tiny_tokenizer, make_states(6), tmp_path, [0.0, 0.5] * 3, "grpo")
    assert [r["samples_generated"] for r in result.curve] == [8, 8, 8]
    assert {g["reason"] for g in result.groups} == {"ungated"}
    assert all(g["pg_loss"] is not None and g["anchor_loss"] is None for g in result.groups)
    assert len(result.groups) == 6 and all(r["accepted_fraction"] == 1.0 for r in result.curve)


def test_dapo_resamples_the_shortfall_and_drops_rejected_groups(
    run: Any, tiny_model: Any, tiny_tokenizer: Any, make_states: Any, tmp_path: Path
) -> None:
    # States 0-3 never right (rejected: all_wrong); 4-5 right half the time.
    p = [0.0, 0.0, 0.0, 0.0, 0.5, 0.5]
    result = run(tiny_model, tiny_tokenizer, make_states(6), tmp_path, p, "dapo_ds", max_resample=2)
    for row in result.curve:
        groups = [g for g in result.groups if g["rl_step"] == row["step"]]
        assert row["samples_generated"] == 4 * len(groups)
        assert row["accepted"] <= 2 and row["groups"] == len(groups)
        assert max(g["resample_round"] for g in groups) == row["resample_rounds"]
        assert row["resample_rounds"] > 0 or row["accepted"] == 2
        states = [g["state_id"] for g in groups]
        assert len(states) == len(set(states))  # distinct states within a step
    for g in result.groups:
        assert g["accepted"] == (g["reason"] == "accepted")
        assert g["anchor_loss"] is None  # DAPO throws rejected groups away
        assert (g["pg_loss"] is None) == (not g["accepted"])
    assert any(row["samples_generated"] > 8 for row in result.curve)


def test_dapo_without_accepted_groups_makes_no_update_but_does_not_stall(
    run: Any, tiny_model: Any, tiny_tokenizer: Any, make_states: Any, tmp_path: Path
) -> None:
    before = [p.detach().clone() for p in tiny_model.parameters()]
    result = run(
        tiny_model, tiny_tokenizer, make_states(4), tmp_path, [0.0] * 4, "dapo_ds", max_resample=1
    )
    assert [r["step"] for r in result.curve] == [1, 2, 3]
    assert [r["updated"] for r in result.curve] == [0, 0, 0]
    assert all(math.isnan(r["pg_loss"]) for r in result.curve)
    assert all(torch.equal(a, b) for a, b in zip(before, tiny_model.parameters(), strict=True))


def test_salvage_anchors_every_rejected_group(
    run: Any, tiny_model: Any, tiny_tokenizer: Any, make_states: Any, tmp_path: Path
) -> None:
    before = [p.detach().clone() for p in tiny_model.parameters()]
    result = run(
        tiny_model,
        tiny_tokenizer,
        make_states(4),
        tmp_path,
        [0.0] * 4,
        "salvage_ds",
        anchor_weight=0.5,
    )
    # Nothing passes the gate, yet every step updates from the anchor: no state wasted.
    assert [r["samples_generated"] for r in result.curve] == [8, 8, 8]
    assert [r["updated"] for r in result.curve] == [1, 1, 1]
    assert all(g["reason"] == "all_wrong" and g["anchor_loss"] > 0 for g in result.groups)
    assert all(r["anchor_loss"] > 0 and math.isnan(r["pg_loss"]) for r in result.curve)
    assert any(not torch.equal(a, b) for a, b in zip(before, tiny_model.parameters(), strict=True))


def test_salvage_with_resampling_anchors_rejected_groups_of_every_round(
    run: Any, tiny_model: Any, tiny_tokenizer: Any, make_states: Any, tmp_path: Path
) -> None:
    p = [0.0, 1.0, 0.0, 0.5, 0.0, 0.5]
    result = run(
        tiny_model,
        tiny_tokenizer,
        make_states(6),
        tmp_path,
        p,
        "salvage_ds",
        anchor_weight=0.5,
        max_resample=2,
    )
    reasons = {g["reason"] for g in result.groups}
    assert {"all_wrong", "all_right"} & reasons
    for g in result.groups:
        assert (g["anchor_loss"] is not None) == (not g["accepted"])
        assert (g["pg_loss"] is not None) == g["accepted"]
    assert any(g["resample_round"] > 0 and not g["accepted"] for g in result.groups)


def test_competence_gate_reasons_with_larger_groups(
    script_generation: Any, tiny_model: Any, tiny_tokenizer: Any, make_states: Any, tmp_path: Path
) -> None:
    hyper = RLHyper(
        steps=2,
        group_size=8,
        batch_size=32,
        learning_rate=1e-3,
        algorithm=algorithm("salvage_ds", anchor_weight=0.5),
        competence_min=0.2,
        competence_max=0.8,
    )
    trainer = SalvageDSTrainer(tiny_model, tiny_tokenizer, make_states(4), hyper, tmp_path)
    # 1/8 right: both signs present, but 0.125 < competence_min; 7/8 > competence_max.
    script_generation(trainer, [0.125, 0.5, 0.875, 0.5], exact=True)
    result = trainer.train()
    expected = {"s0-0": "too_hard", "s0-1": "accepted", "s0-2": "too_easy", "s0-3": "accepted"}
    assert len(result.groups) == 8
    assert all(g["reason"] == expected[g["state_id"]] for g in result.groups)
    rows = result.curve
    assert all(r["reason_accepted"] + r["rejected"] == r["groups"] for r in rows)


def test_weighted_draw(
    tiny_model: Any, tiny_tokenizer: Any, make_states: Any, tmp_path: Path
) -> None:
    states = make_states(4)
    states[0].weight, states[1].weight, states[2].weight, states[3].weight = 0.0, 1.0, 1.0, 8.0
    hyper = RLHyper(
        steps=1, group_size=2, batch_size=4, learning_rate=1e-3, algorithm=algorithm("grpo")
    )
    trainer = SalvageDSTrainer(tiny_model, tiny_tokenizer, states, hyper, tmp_path)
    draws = [trainer.draw_states(step, 0, 2, set()) for step in range(400)]
    counts = [sum(i in d for d in draws) for i in range(4)]
    assert counts[0] == 0  # weight 0: never
    assert all(len(set(d)) == 2 for d in draws)  # without replacement
    assert counts[3] > 350 and counts[1] + counts[2] + counts[3] == 800
    # Deterministic per (seed, step, round); states already used this step come last.
    assert trainer.draw_states(7, 1, 2, set()) == trainer.draw_states(7, 1, 2, set())
    assert trainer.draw_states(7, 1, 3, {3})[:2] != [3, 3]
    assert 3 not in trainer.draw_states(7, 1, 2, {3})
