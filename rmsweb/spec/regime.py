"""Regime config: where the recipe stands before RL (issue "The recipe in its regime").

The regime stage measures, per training seed, what RL on top of SFT has to work with:
the headroom (expert − SFT on val), the reach (the SFT policy's pass@G at the RL
temperature on failure states) and the length of the tasks (the expert's steps).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .common import SpecFieldError, SpecModel


class RegimeSpec(SpecModel):
    enabled: bool | None = Field(
        None,
        description="Run the regime stage (one per training seed). null: when an rl policy "
        "is evaluated and the suite has a scripted expert (MiniWoB), which labels the val "
        "failure states and sets the headroom's ceiling.",
    )
    val_seeds_per_task: int | None = Field(
        None,
        ge=1,
        description="Val seeds per task the expert and the greedy SFT policy play (the "
        "first ones of suite.val); null: all of suite.val.",
    )
    max_mined_states: int | None = Field(
        None,
        ge=1,
        description="Mined states (critical and fragile) probed for reach, drawn uniformly "
        "(seeded by the training seed); null: all of them.",
    )


def regime_enabled(spec: Any) -> bool:
    """Whether the experiment gets regime stages (`regime.enabled`, or its default).

    Raises SpecFieldError (a ValueError) naming the fix when `enabled: true` asks for a
    suite without a scripted expert: there is nothing to label val failure states with."""
    has_expert = getattr(spec.suite, "kind", None) == "miniwob"
    wanted = spec.regime.enabled
    if wanted is None:
        rl_evaluated = any(
            p.kind == "checkpoint" and getattr(p, "source", None) == "rl"
            for p in spec.eval.policies
        )
        return rl_evaluated and has_expert
    if wanted and not has_expert:
        raise SpecFieldError(
            "regime.enabled",
            f"the regime stage labels val failure states with the suite's "
            f"scripted expert, and suite kind {spec.suite.kind} has none. Fix: set "
            "regime.enabled: false (or leave it null).",
        )
    return wanted
