"""sft.demos_per_task: SFT on the first N train seeds of each task of one collection."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from rmsweb.spec import ExperimentSpec
from rmsweb.train.sft.samples import within_budget


def _spec(**sft: object) -> dict:
    return {
        "name": "budget",
        "suite": {"kind": "miniwob", "tasks": ["click-button"], "train": {"count": 40}},
        "sft": sft,
    }


def test_a_budget_above_the_collected_seeds_is_refused() -> None:
    assert ExperimentSpec.model_validate(_spec(demos_per_task=40)).sft.demos_per_task == 40
    with pytest.raises(ValidationError, match=r"suite\.train\.count 40"):
        ExperimentSpec.model_validate(_spec(demos_per_task=41))


def _record(task: str, seed: int) -> SimpleNamespace:
    return SimpleNamespace(episode=SimpleNamespace(task_id=task, seed=seed))


def test_within_budget_keeps_each_task_s_first_seeds() -> None:
    records = [_record(t, s) for t in ("a", "b") for s in range(10, 20)]
    kept = within_budget(records, start=10, demos_per_task=3)
    assert sorted((r.episode.task_id, r.episode.seed) for r in kept) == [
        (t, s) for t in ("a", "b") for s in (10, 11, 12)
    ]
    assert within_budget(records, start=10, demos_per_task=None) is records
