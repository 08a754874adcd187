"""The experiment: one model per stage config, composed."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from .collect import CollectSpec
from .common import Name, SpecFieldError, SpecModel, default_kind
from .compute import ComputeSpec
from .eval import EvalSpec
from .mine import MineSpec
from .model import ModelSpec, TinyModel
from .report import ReportSpec
from .rl import RLSpec, SalvageDS
from .sft import SFTSpec
from .suite import MiniWoBSuite, SuiteSpec


class ExperimentSpec(SpecModel):
    """One RMSWeb experiment: suite -> collect -> sft -> mine -> rl -> eval -> report."""

    name: Name = Field(..., description="Experiment name; names stages, runs and report rows.")
    description: str = Field("", description="What this experiment tests, in a sentence.")
    seed: int = Field(0, ge=0, description="Global seed (sampling, shuffles, model init).")
    suite: SuiteSpec = Field(default_factory=MiniWoBSuite, description="Tasks and browser.")
    model: ModelSpec = Field(default_factory=TinyModel, description="Policy model.")
    collect: CollectSpec = Field(default_factory=CollectSpec, description="Teacher collection (R).")
    sft: SFTSpec = Field(default_factory=SFTSpec, description="Supervised fine-tuning.")
    mine: MineSpec = Field(default_factory=MineSpec, description="Failure-mode mining (M).")
    rl: RLSpec = Field(default_factory=SalvageDS, description="RL on mined states (S).")
    eval: EvalSpec = Field(default_factory=EvalSpec, description="Held-out evaluation.")
    report: ReportSpec = Field(default_factory=ReportSpec, description="Report and viewer.")
    compute: ComputeSpec = Field(default_factory=ComputeSpec, description="SkyPilot resources.")

    @model_validator(mode="before")
    @classmethod
    def _default_kinds(cls, data: Any) -> Any:
        data = default_kind(data, "suite", "miniwob")
        data = default_kind(data, "model", "tiny")
        return default_kind(data, "rl", "salvage_ds")

    @model_validator(mode="after")
    def _suite_fits(self) -> ExperimentSpec:
        offline = isinstance(self.suite, MiniWoBSuite)
        if self.collect.teacher.kind == "expert" and not offline:
            raise SpecFieldError(
                "collect.teacher.kind",
                f"the scripted expert teacher exists only for offline suites, not "
                f"{self.suite.kind}. Fix: use teacher kind openai (an LLM endpoint).",
            )
        if self.mine.mode == "oracle" and not offline:
            raise SpecFieldError(
                "mine.mode",
                f"mine.mode oracle needs a suite with a scripted expert; {self.suite.kind} has "
                "none. Fix: use mode reference or judge.",
            )
        if self.mine.mode == "judge" and self.mine.judge is None and offline:
            raise SpecFieldError(
                "mine.judge",
                "mine.mode judge needs an LLM endpoint, and the offline suite has no success "
                "judge to borrow. Fix: set mine.judge (base_url, model) or use mode oracle.",
            )
        for i, policy in enumerate(self.eval.policies):
            if policy.kind == "expert" and not offline:
                raise SpecFieldError(
                    f"eval.policies.{i}.kind",
                    f"an expert policy exists only for offline suites, not {self.suite.kind}. "
                    "Fix: remove it or evaluate an openai policy.",
                )
        if self.model.prompt.screenshot and not self.suite.browser.screenshots:
            raise SpecFieldError(
                "model.prompt.screenshot",
                "the prompt asks for screenshots but suite.browser.screenshots is false, so none "
                "are captured. Fix: set suite.browser.screenshots: true.",
            )
        return self


def stage_sections() -> tuple[str, ...]:
    """Names of the top-level sections, in pipeline order."""
    return tuple(n for n in ExperimentSpec.model_fields if n not in {"name", "description", "seed"})
