"""Mine config: failure-mode mining of critical and fragile states (recipe part M)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .collect import OpenAIEndpoint
from .common import SpecFieldError, SpecModel

FailureMode = Literal[
    "wrong_element",
    "wrong_type",
    "wrong_argument",
    "premature_answer",
    "missed_answer",
    "loop",
    "parse_error",
    "navigation_error",
]


class MineSpec(SpecModel):
    mode: Literal["oracle", "reference", "judge", "none"] = Field(
        "oracle",
        description="Where acceptable actions come from: oracle (scripted expert labels), "
        "reference (divergence from a successful trajectory), judge (LLM first-error label), "
        "none (baseline: uniform states from the SFT data).",
    )
    samples_per_task: int = Field(4, ge=1, description="SFT-policy rollouts per task and seed.")
    seeds_per_task: int | None = Field(
        16,
        ge=1,
        description="Seeds rolled out per task in the first round, from the suite's mine range "
        "(live suites: their train tasks' seeds); null: the whole range.",
    )
    min_failures_per_task: int = Field(
        0,
        ge=0,
        description="Floor: a task with fewer mined failure states (critical + fragile) than "
        "this, whose rollouts fail at least floor_failure_rate of the time, gets another "
        "round of seeds_per_task seeds, until max_seeds_per_task (0: one round only).",
    )
    floor_failure_rate: float = Field(
        0.1,
        ge=0,
        le=1,
        description="The floor applies to tasks whose rollouts fail at least this often.",
    )
    max_seeds_per_task: int | None = Field(
        None, ge=1, description="Most seeds one task is rolled out on (null: the whole range)."
    )
    temperature: float = Field(1.0, ge=0, le=2, description="Rollout sampling temperature.")
    fragile_k: int = Field(
        4, ge=0, description="Sampled actions per visited state to find fragile states (0: off)."
    )
    routine_fraction: float = Field(
        0.3, ge=0, lt=1, description="Share of routine SFT states mixed into the mined set."
    )
    max_states: int = Field(5000, ge=1, description="Cap on written states (highest weight first).")
    mode_weights: dict[FailureMode, float] = Field(
        default_factory=dict,
        description="Criticality weight per failure mode (missing modes weigh 1.0).",
    )
    judge: OpenAIEndpoint | None = Field(
        None,
        description="mode judge: the LLM that names each failed rollout's first wrong step "
        "and the right action there (null: the suite's success judge endpoint).",
    )

    @model_validator(mode="after")
    def _weights(self) -> MineSpec:
        if self.min_failures_per_task and self.seeds_per_task is None:
            raise SpecFieldError(
                "min_failures_per_task",
                "a floor needs rounds: seeds_per_task is null, so the first round already "
                "takes the whole mine range. Fix: set seeds_per_task (e.g. 16).",
            )
        for mode, w in self.mode_weights.items():
            if w < 0:
                raise SpecFieldError(
                    f"mode_weights.{mode}",
                    f"weight {w} is negative; weights scale how often a state is sampled. "
                    "Fix: use a value >= 0.",
                )
        return self
