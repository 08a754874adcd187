"""sft.replay: synthetic pretraining samples mixed into SFT, so few demos do not erase skills."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rmsweb.agents.prompt import PromptConfig, approx_tokens
from rmsweb.compile.graph import plan_experiment
from rmsweb.spec import ExperimentSpec
from rmsweb.train.pretrain.run import HELD_OUT_OFFSET, PretrainSettings
from rmsweb.train.pretrain.synthetic import generate, to_sample
from rmsweb.train.sft.replay import replay_count, replay_samples


def _spec(pretrain: dict | None, **sft: object) -> dict:
    return {
        "name": "replay",
        "suite": {"kind": "miniwob", "tasks": ["click-button"]},
        "model": {"kind": "tiny", "arch": "qwen3", "pretrain": pretrain},
        "sft": sft,
    }


def test_replay_needs_pretraining_and_a_share_below_one() -> None:
    spec = ExperimentSpec.model_validate(_spec({"steps": 10}, replay=0.25))
    assert spec.sft.replay == 0.25
    with pytest.raises(ValidationError, match=r"model\.pretrain"):
        ExperimentSpec.model_validate(_spec(None, replay=0.25))
    for bad in (0, 1, 1.5):
        with pytest.raises(ValidationError):
            ExperimentSpec.model_validate(_spec({"steps": 10}, replay=bad))


def _sft_stage(spec: dict):
    stages = plan_experiment(ExperimentSpec.model_validate(spec))
    return next(s for s in stages if s.kind == "sft")


def test_replay_is_read_by_sft_only_when_set() -> None:
    off = _sft_stage(_spec({"steps": 10}))
    on = _sft_stage(_spec({"steps": 10}, replay=0.25))
    assert "sft.replay" not in off.params  # null leaves params and identity as before
    assert "sft.replay" in on.params
    assert on.identity != off.identity


def test_replay_count_makes_the_share() -> None:
    assert replay_count(300, 0.25) == 100  # 100 of 400
    assert replay_count(300, 0.5) == 300
    n = replay_count(1537, 0.2)
    assert abs(n / (1537 + n) - 0.2) < 1e-3


def _keys(samples: list) -> set[str]:
    return {x.completion + repr(x.messages) for x in samples}


def test_replay_samples_are_fresh_draws_of_the_pretraining_skills() -> None:
    s = PretrainSettings(samples=20, eval_per_skill=4, seed=3)
    prompt = PromptConfig(system="none")
    samples = replay_samples(24, s, prompt, approx_tokens, train_seed=0)
    assert len(samples) == 24
    assert {x.task_id for x in samples} == {f"synthetic/{k}" for k in s.skills}
    # not the pretraining set's draws nor its held-out set's
    for seed in (s.seed, s.seed + HELD_OUT_OFFSET):
        drawn = [to_sample(ex, i, prompt, approx_tokens) for i, ex in enumerate(generate(24, seed))]
        assert not _keys(samples) & _keys(drawn)
    # reproducible, and a draw of its own for each training seed
    assert _keys(replay_samples(24, s, prompt, approx_tokens, train_seed=0)) == _keys(samples)
    assert _keys(replay_samples(24, s, prompt, approx_tokens, train_seed=1)) != _keys(samples)
