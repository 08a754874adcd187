"""The model stage with model.pretrain: one model whatever the budget and training seed."""

from __future__ import annotations

import json
from pathlib import Path

from rmsweb.spec import ExperimentSpec
from rmsweb.spec.loader import load_experiment
from rmsweb.stage_io import StageIO
from rmsweb.train.tiny import stage as model_stage
from rmsweb.train.tiny.corpus import budget_free

ROOT = Path(__file__).resolve().parents[2]


def _spec(count: int, pretrain: dict | None) -> ExperimentSpec:
    data = load_experiment(ROOT / "experiments" / "miniwob-cpu.yaml").model_dump(mode="json")
    data["suite"]["train"] = {"start": 0, "count": count}
    data["seeds"] = [0, 1]
    data["model"]["vocab_size"] = 400
    if pretrain is not None:
        data["model"]["pretrain"] = pretrain
    return ExperimentSpec.model_validate(data)


def test_the_corpus_seeds_do_not_depend_on_the_budget() -> None:
    a = budget_free(_spec(50, None).suite, 30)
    b = budget_free(_spec(600, None).suite, 30)
    assert a == b and (a.train.start, a.train.count) == (0, 30)


def test_model_stage_shares_one_model_across_budgets_and_seeds(tmp_path: Path, monkeypatch) -> None:
    seen: list[tuple[int, int]] = []

    def corpus(suite: object, n: int) -> tuple[list[str], list[str]]:  # the browser, stubbed
        seen.append((suite.train.start, suite.train.count))
        return ["Enter the code now.", '[1] textbox "Code"', 'Action: fill(1, "x")'], [
            "Enter the code now."
        ]

    monkeypatch.setattr(model_stage, "suite_corpus_and_instructions", corpus)
    weights = []
    for count, seed in ((50, 0), (600, 1)):
        out = tmp_path / f"m{count}"
        io = StageIO("x", _spec(count, {"seed": 3}), {}, out, tmp_path / f"{count}.json", seed=seed)
        model_stage.main(io)
        assert (out / "suite_instructions.txt").read_text() == "Enter the code now.\n"
        weights.append((out / "model" / "model.safetensors").read_bytes())
        metrics = json.loads(io.metrics.read_text())
        assert metrics["synthetic_texts"] >= 1500 and metrics["suite_texts"] == 3
    assert weights[0] == weights[1]  # pretrain.seed, not the training seed or the budget
    assert seen == [(0, 50), (0, 50)]  # corpus_seeds_per_task (50) from train.start
