"""The regime section of a spec: when the stage is wanted, and what it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from rmsweb.spec import ExperimentSpec, SpecFieldError, load_experiment
from rmsweb.spec.regime import regime_enabled

SFT_ONLY = {"policies": [{"kind": "checkpoint", "name": "sft", "source": "sft"}]}


def spec(**fields) -> ExperimentSpec:
    return ExperimentSpec.model_validate({"name": "x", **fields})


def test_on_by_default_where_an_rl_policy_is_evaluated() -> None:
    assert regime_enabled(spec())  # the default policies evaluate rl
    assert not regime_enabled(spec(eval=SFT_ONLY))
    assert regime_enabled(spec(eval=SFT_ONLY, regime={"enabled": True}))
    assert not regime_enabled(spec(regime={"enabled": False}))
    assert spec().regime.val_seeds_per_task is None


def test_bad_values_are_refused() -> None:
    with pytest.raises(ValidationError, match="val_seeds_per_task"):
        spec(regime={"val_seeds_per_task": 0})
    with pytest.raises(ValidationError, match=r"regime\.val_seeds"):
        spec(regime={"val_seeds": 3})


def test_a_suite_without_an_expert_has_no_regime_unless_asked_and_then_says_why(
    repo_root: Path,
) -> None:
    live = load_experiment(repo_root / "experiments" / "paper-8b-rehearsal.yaml")
    assert any(p.kind == "checkpoint" and p.source == "rl" for p in live.eval.policies)
    assert not regime_enabled(live)
    forced = live.model_copy(update={"regime": live.regime.model_copy(update={"enabled": True})})
    with pytest.raises(SpecFieldError, match="scripted expert") as err:
        regime_enabled(forced)
    assert err.value.field == "regime.enabled"
