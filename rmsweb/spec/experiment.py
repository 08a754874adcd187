"""The experiment: one model per stage config, composed."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from .collect import CollectSpec
from .common import Name, SpecFieldError, SpecModel, default_kind
from .compute import ComputeSpec
from .eval import EvalSpec
from .grid import GridSpec
from .mine import MineSpec
from .miniwob_tasks import MINIWOB_EXPERT_TASKS
from .model import ModelSpec, TinyModel
from .regime import RegimeSpec, regime_enabled
from .report import ReportSpec
from .rl import RLSpec, SalvageDS
from .serve import local_port
from .sft import SFTSpec
from .suite import MiniWoBSuite, SuiteSpec
from .sweep import Metric, SweepSpec


class ExperimentSpec(SpecModel):
    """One RMSWeb experiment: suite -> collect -> sft -> mine -> rl -> eval -> report."""

    name: Name = Field(..., description="Experiment name; names stages, runs and report rows.")
    description: str = Field("", description="What this experiment tests, in a sentence.")
    seed: int = Field(
        0,
        ge=0,
        description="Data seed: the teacher's mistakes, the random policy and the other draws "
        "that do not depend on a training run.",
    )
    seeds: list[int] = Field(
        default_factory=lambda: [0],
        min_length=1,
        max_length=32,
        description="Training seeds: model init, SFT, mining samples, RL and the eval of the "
        "trained policies run once per seed (one DVC stage each); the report gives means with "
        "intervals over seeds. Stages that do not train (collect, expert/random eval) are shared.",
    )
    suite: SuiteSpec = Field(default_factory=MiniWoBSuite, description="Tasks and browser.")
    model: ModelSpec = Field(default_factory=TinyModel, description="Policy model.")
    collect: CollectSpec = Field(default_factory=CollectSpec, description="Teacher collection (R).")
    sft: SFTSpec = Field(default_factory=SFTSpec, description="Supervised fine-tuning.")
    mine: MineSpec = Field(default_factory=MineSpec, description="Failure-mode mining (M).")
    rl: RLSpec = Field(default_factory=SalvageDS, description="RL on mined states (S).")
    regime: RegimeSpec = Field(
        default_factory=RegimeSpec,
        description="Headroom, reach and length before RL (the regime stage, per seed).",
    )
    eval: EvalSpec = Field(default_factory=EvalSpec, description="Held-out evaluation.")
    report: ReportSpec = Field(default_factory=ReportSpec, description="Report and viewer.")
    compute: ComputeSpec = Field(default_factory=ComputeSpec, description="SkyPilot resources.")
    sweep: dict[Name, SweepSpec] = Field(
        default_factory=dict,
        description="Named grids over this spec, run on val and ranked by one metric; each "
        "point compiles into its own stages beside the spec's (rmsweb/spec/sweep.py).",
    )
    grid: GridSpec | None = Field(
        None,
        description="The study run again at other values of a few settings (e.g. the "
        "demonstrations per task): variants <name>-<label> on the spec's own splits, "
        "reported cell by cell (rmsweb/spec/grid.py). Inherited by `extends:`; null: none.",
    )

    @model_validator(mode="before")
    @classmethod
    def _default_kinds(cls, data: Any) -> Any:
        data = default_kind(data, "suite", "miniwob")
        data = default_kind(data, "model", "tiny")
        return default_kind(data, "rl", "salvage_ds")

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, seeds: list[int]) -> list[int]:
        if any(s < 0 for s in seeds):
            raise ValueError("training seeds are non-negative integers.")
        if len(set(seeds)) != len(seeds):
            raise ValueError("a training seed is listed twice; list each seed once.")
        return seeds

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
            if policy.kind == "openai" and policy.serve and self.eval.suites:
                raise SpecFieldError(
                    f"eval.policies.{i}.serve",
                    "a served policy endpoint is not started around the eval.suites stages "
                    "yet. Fix: serve it elsewhere (serve: null) and give its base_url.",
                )
            if policy.kind == "expert" and self.eval.suites:
                raise SpecFieldError(
                    f"eval.policies.{i}.kind",
                    "an expert policy exists only for offline suites, and eval.suites are "
                    "live benchmarks. Fix: remove it or evaluate an openai policy.",
                )
            if policy.kind == "expert" and not offline:
                raise SpecFieldError(
                    f"eval.policies.{i}.kind",
                    f"an expert policy exists only for offline suites, not {self.suite.kind}. "
                    "Fix: remove it or evaluate an openai policy.",
                )
        for i, ev in enumerate(self.eval.suites or []):
            if ev.suite.judge.serve is not None:
                raise SpecFieldError(
                    f"eval.suites.{i}.suite.judge.serve",
                    "an evaluation suite's judge is not started by the sky task yet (only "
                    "suite.judge is). Fix: serve it elsewhere (serve: null) and give its "
                    "base_url.",
                )
        if isinstance(self.suite, MiniWoBSuite):
            self._experts_exist(self.suite)
        regime_enabled(self)  # regime.enabled: true on a suite without an expert fails here
        budget, train = self.sft.demos_per_task, getattr(self.suite, "train", None)
        if budget is not None and train is None:
            raise SpecFieldError(
                "sft.demos_per_task",
                f"sft.demos_per_task counts train seeds per task, and a {self.suite.kind} "
                "suite has one episode per task. Fix: remove it (null).",
            )
        if budget is not None and train is not None and budget > train.count:
            raise SpecFieldError(
                "sft.demos_per_task",
                f"sft.demos_per_task ({budget}) exceeds the train seeds collected per task "
                f"(suite.train.count {train.count}). Fix: lower it, or raise "
                "suite.train.count.",
            )
        if self.sft.replay is not None and getattr(self.model, "pretrain", None) is None:
            raise SpecFieldError(
                "sft.replay",
                "sft.replay mixes in samples of the pretraining generator, and this model has "
                "no pretraining (model.pretrain). Fix: remove sft.replay (null), or set "
                "model.pretrain on a tiny model.",
            )
        if self.model.prompt.screenshot and not self.suite.browser.screenshots:
            raise SpecFieldError(
                "model.prompt.screenshot",
                "the prompt asks for screenshots but suite.browser.screenshots is false, so none "
                "are captured. Fix: set suite.browser.screenshots: true.",
            )
        return self

    @model_validator(mode="after")
    def _curve_seeds_are_training_seeds(self) -> ExperimentSpec:
        for i, policy in enumerate(self.eval.policies):
            listed = getattr(policy, "every_checkpoint", False)
            if isinstance(listed, list) and not set(listed) <= set(self.seeds):
                extra = sorted(set(listed) - set(self.seeds))
                raise SpecFieldError(
                    f"eval.policies.{i}.every_checkpoint",
                    f"seeds {extra} are not training seeds of this experiment (seeds: "
                    f"{self.seeds}), so they have no RL run to evaluate. Fix: list training "
                    "seeds only, or true for all of them.",
                )
        return self

    @model_validator(mode="after")
    def _sweep_metric_policy(self) -> ExperimentSpec:
        names = [p.name for p in self.eval.policies]
        for name, sweep in self.sweep.items():
            policy = Metric(sweep.metric).policy
            if policy is not None and policy not in names:
                raise SpecFieldError(
                    f"sweep.{name}.metric",
                    f"eval policy {policy!r} is not one of this spec's eval.policies "
                    f"({', '.join(names)}). Fix: name one of them.",
                )
        return self

    @model_validator(mode="after")
    def _sampler_has_lora(self) -> ExperimentSpec:
        if self.rl.sampler.kind == "vllm" and not self.model.lora.enabled:
            raise SpecFieldError(
                "rl.sampler.kind",
                "rl.sampler vllm samples with the current LoRA adapter, and model.lora is off "
                "(a full fine-tune's weights would have to be copied into vLLM every step). "
                "Fix: set model.lora.enabled: true, or use rl.sampler {kind: hf}.",
            )
        if self.rl.sampler.kind == "vllm" and getattr(self.model, "copy_head", False):
            raise SpecFieldError(
                "rl.sampler.kind",
                "rl.sampler vllm does not know model.copy_head's model class. "
                "Fix: use rl.sampler {kind: hf}, or set model.copy_head: false.",
            )
        return self

    def served_endpoints(self) -> list[tuple[str, Any]]:
        """(dotted key, endpoint) of every endpoint whose `vllm serve` the task starts."""
        found: list[tuple[str, Any]] = []
        if self.collect.teacher.kind == "openai" and self.collect.teacher.serve:
            found.append(("collect.teacher", self.collect.teacher))
        judge = getattr(self.suite, "judge", None)
        if judge is not None and judge.serve:
            found.append(("suite.judge", judge))
        for i, policy in enumerate(self.eval.policies):
            if policy.kind == "openai" and policy.serve:
                found.append((f"eval.policies.{i}", policy))
        return found

    @model_validator(mode="after")
    def _servers_agree(self) -> ExperimentSpec:
        # One port, one server: endpoints that share a port must ask for the same one.
        first: dict[int, tuple[str, Any]] = {}
        for key, endpoint in self.served_endpoints():
            port = local_port(endpoint.base_url)
            if port not in first:
                first[port] = (key, endpoint)
                continue
            other_key, other = first[port]
            if (endpoint.model, endpoint.serve) != (other.model, other.serve):
                raise SpecFieldError(
                    f"{key}.serve",
                    f"{key} and {other_key} both serve on port {port} but ask for different "
                    "servers (model or serve settings differ); one port runs one `vllm serve`. "
                    "Fix: make them identical, or give one another port in its base_url.",
                )
        return self

    def _experts_exist(self, suite: MiniWoBSuite) -> None:
        """Every stage that runs the scripted expert needs one for every task."""
        missing = [t for t in suite.tasks if t not in MINIWOB_EXPERT_TASKS]
        if not missing:
            return
        users = []  # (key, what needs the expert, the alternative)
        if self.collect.teacher.kind == "expert":
            users.append(("collect.teacher.kind", "the expert teacher", "teacher kind openai"))
        if self.mine.mode == "oracle":
            users.append(("mine.mode", "oracle mining", "mine.mode reference"))
        for i, policy in enumerate(self.eval.policies):
            if policy.kind == "expert":
                users.append(
                    (f"eval.policies.{i}.kind", f"eval policy {policy.name!r}", "no expert policy")
                )
        if not users:
            return
        raise SpecFieldError(
            users[0][0],
            f"no scripted expert for task(s) {', '.join(missing)}, but "
            f"{_and([u[1] for u in users])} need one for every task. Fix: drop these tasks "
            f"(`rmsweb suite list miniwob` marks the {len(MINIWOB_EXPERT_TASKS)} with an "
            f"expert), or use {_and([u[2] for u in users])}.",
        )


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def stage_sections() -> tuple[str, ...]:
    """Names of the top-level sections, in pipeline order."""
    skip = {"name", "description", "seed", "seeds", "sweep"}
    return tuple(n for n in ExperimentSpec.model_fields if n not in skip)
