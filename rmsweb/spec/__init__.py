"""Experiment specs: Pydantic models, YAML loading with `extends:` and overrides, JSON Schema.

Imports nothing else from rmsweb, and nothing heavy: `rmsweb validate` stays fast.
"""

from .collect import CollectSpec, ExpertTeacher, OpenAITeacher
from .common import SeedRange, SpecFieldError
from .compute import ComputeSpec
from .eval import (
    CheckpointPolicy,
    EvalSpec,
    ExpertPolicy,
    OpenAIPolicy,
    RandomPolicy,
    TeacherPolicy,
)
from .experiment import ExperimentSpec
from .loader import (
    Located,
    Pos,
    SpecError,
    SpecErrors,
    load_from_params,
    load_located,
)
from .mine import MineSpec
from .model import LoraSpec, PretrainedModel, PromptSpec, TinyModel
from .points import load_experiment  # with the sweeps' points checked
from .report import ReportSpec
from .rl import GRPO, DAPODynamicSampling, RewardSpec, SalvageDS
from .sft import SFTSpec
from .suite import BrowserSpec, MiniWoBSuite

__all__ = [
    "GRPO",
    "BrowserSpec",
    "CheckpointPolicy",
    "CollectSpec",
    "ComputeSpec",
    "DAPODynamicSampling",
    "EvalSpec",
    "ExperimentSpec",
    "ExpertPolicy",
    "ExpertTeacher",
    "Located",
    "LoraSpec",
    "MineSpec",
    "MiniWoBSuite",
    "OpenAIPolicy",
    "OpenAITeacher",
    "Pos",
    "PretrainedModel",
    "PromptSpec",
    "RandomPolicy",
    "ReportSpec",
    "RewardSpec",
    "SFTSpec",
    "SalvageDS",
    "SeedRange",
    "SpecError",
    "SpecErrors",
    "SpecFieldError",
    "TeacherPolicy",
    "TinyModel",
    "load_experiment",
    "load_from_params",
    "load_located",
]
