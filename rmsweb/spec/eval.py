"""Eval config: which policies run on which held-out tasks.

Without `suites`, every policy runs on the training suite's own held-out splits (the
offline studies). With `suites`, each policy runs on each evaluation suite instead: a
benchmark apart from the one the policies were trained on, with its own judge, split
and step limit (`rmsweb validate` refuses an evaluation task the training suite holds).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from .collect import ExpertTeacher, OpenAIEndpoint
from .common import Name, SpecFieldError, SpecModel
from .prices import TokenPrices
from .suite import LiveSuiteSpec

Split = Literal["val", "test", "train"]


class _Policy(SpecModel):
    splits: list[Split] | None = Field(
        None,
        min_length=1,
        description="This policy's seed splits (null: eval.splits). Policies nothing is "
        "tuned for (expert, teacher, random) need no val split.",
    )


class ExpertPolicy(_Policy):
    """The suite's scripted expert (error-free unless the mistake rates say otherwise)."""

    kind: Literal["expert"] = "expert"
    name: Name = Field("expert", description="Policy name in tables and reports.")
    mistakes: ExpertTeacher = Field(
        default_factory=ExpertTeacher, description="Mistake model (rates 0: the gold expert)."
    )


class TeacherPolicy(_Policy):
    """The collect stage's teacher (`collect.teacher`) with its own mistake model: how
    good the teacher that collected the data is on held-out seeds (one attempt each)."""

    kind: Literal["teacher"] = "teacher"
    name: Name = Field("teacher", description="Policy name in tables and reports.")


class RandomPolicy(_Policy):
    """Uniform over valid actions on visible elements: the floor."""

    kind: Literal["random"] = "random"
    name: Name = Field("random", description="Policy name in tables and reports.")


class CheckpointPolicy(_Policy):
    """A checkpoint this experiment trains: `sft` or `rl`, rolled out by model.backend."""

    kind: Literal["checkpoint"] = "checkpoint"
    name: Name = Field(..., description="Policy name in tables and reports.")
    source: Literal["sft", "rl"] = Field(..., description="Which stage's checkpoint.")
    prices: TokenPrices = Field(
        default_factory=TokenPrices,
        description="Token prices of serving this checkpoint, for the report's cost per task.",
    )
    every_checkpoint: bool | list[int] = Field(
        False,
        description="RL only: also evaluate SFT (step 0) and every RL checkpoint "
        "(rl.save_steps) on the val split, for the report's 'val success per RL "
        "checkpoint'. true: every training seed; a list: those training seeds only (each "
        "one of `seeds`; a study that adds seeds for its intervals need not pay for their "
        "curves). Its own stage (evalckpt) replays the RL run to keep the checkpoints: per "
        "seed one more RL run plus one val eval per checkpoint.",
    )

    def checkpoint_seeds(self, seeds: list[int]) -> list[int]:
        """The training seeds (of `seeds`, the experiment's) whose RL curve is evaluated."""
        if self.every_checkpoint is True:
            return list(seeds)
        if self.every_checkpoint is False:
            return []
        return [s for s in seeds if s in self.every_checkpoint]

    @model_validator(mode="after")
    def _every_checkpoint_is_rl(self) -> CheckpointPolicy:
        if isinstance(self.every_checkpoint, list) and (
            not self.every_checkpoint
            or len(set(self.every_checkpoint)) != len(self.every_checkpoint)
        ):
            raise SpecFieldError(
                "every_checkpoint",
                "a list names the training seeds whose RL curve is evaluated: give at least "
                "one, each once (or true for every seed, false for none).",
            )
        if self.every_checkpoint is not False and self.source != "rl":
            raise SpecFieldError(
                "every_checkpoint",
                "only an rl policy has checkpoints to evaluate (SFT's curve is its loss, "
                "and SFT is step 0 of the RL curve). Fix: set it on the rl policy.",
            )
        return self


class OpenAIPolicy(OpenAIEndpoint, _Policy):
    """Any model behind an OpenAI-compatible endpoint (teachers, hosted baselines)."""

    kind: Literal["openai"] = "openai"
    name: Name = Field(..., description="Policy name in tables and reports.")
    prices: TokenPrices = Field(
        default_factory=TokenPrices,
        description="Token prices of the endpoint, for the report's cost per task.",
    )


PolicySpec = Annotated[
    ExpertPolicy | TeacherPolicy | RandomPolicy | CheckpointPolicy | OpenAIPolicy,
    Field(discriminator="kind"),
]


EVAL_SUITE_NAME = r"^[a-z0-9]+$"  # no '-': the eval stage's variant is "<suite>-<policy>"


class EvalSuite(SpecModel):
    """One evaluation benchmark: a live suite section (its judge, step limit, filters)
    and the split of it the policies are evaluated on."""

    name: str = Field(
        ...,
        pattern=EVAL_SUITE_NAME,
        max_length=24,
        description="Column name in the report's table and part of the eval stage's name "
        "(eval-<name>-<policy>); lowercase letters and digits only.",
    )
    split: Literal["all", "test", "val"] = Field(
        "all",
        description="all: every task of the suite (after its sites/levels/categories/limit "
        "filters) is evaluated, as test: the benchmark's full test set, which the policies "
        "never trained on. test/val: only the suite's own hash split (test_fraction, "
        "val_fraction), e.g. val for choosing.",
    )
    suite: LiveSuiteSpec = Field(
        ...,
        description="The benchmark: a live suite section, its judge and step limit as the "
        "benchmark defines them (judge.protocol suite: the benchmark's own judge).",
    )

    @property
    def eval_split(self) -> str:
        """The split label its episodes and metrics carry."""
        return "test" if self.split == "all" else self.split


class EvalSpec(SpecModel):
    policies: list[PolicySpec] = Field(
        default_factory=lambda: [
            ExpertPolicy(),
            RandomPolicy(),
            CheckpointPolicy(name="sft", source="sft"),
            CheckpointPolicy(name="rl", source="rl"),
        ],
        min_length=1,
        description="Policies evaluated, each its own DVC stage.",
    )
    splits: list[Split] = Field(
        default_factory=lambda: ["test"],
        min_length=1,
        description="Seed splits each policy is evaluated on: val for choosing, test for "
        "reporting (the report labels every number with its split).",
    )
    seeds_per_task: int | None = Field(
        None, ge=1, description="Seeds per task (null: the whole split)."
    )
    temperature: float = Field(0.0, ge=0, le=2, description="Sampling temperature (0: greedy).")
    suites: list[EvalSuite] | None = Field(
        None,
        min_length=1,
        description="Evaluation benchmarks apart from the training suite: each policy is "
        "evaluated on each (one stage per policy, suite and training seed), by the suite's "
        "own judge, split and step limit; the training suite is then not evaluated. null: "
        "the policies run on the training suite's `splits`.",
    )

    @model_validator(mode="after")
    def _unique_suites(self) -> EvalSpec:
        names = [s.name for s in self.suites or []]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise SpecFieldError(
                    f"suites.{i}.name",
                    f"evaluation suite name {name!r} is used twice; each names a column of "
                    "the report's table. Fix: give each a distinct name.",
                )
        return self

    def variant(self, suite: EvalSuite, policy: PolicySpec) -> str:
        """The eval stage's variant of `policy` on evaluation suite `suite`."""
        return f"{suite.name}-{policy.name}"

    def variants(self) -> list[str]:
        """Every eval stage variant: policy names, or <suite>-<policy> with `suites`."""
        if not self.suites:
            return [p.name for p in self.policies]
        return [self.variant(s, p) for s in self.suites for p in self.policies]

    def resolve(self, variant: str) -> tuple[EvalSuite | None, PolicySpec]:
        """The (evaluation suite or None, policy) an eval stage's variant names."""
        for suite in self.suites or []:
            for p in self.policies:
                if self.variant(suite, p) == variant:
                    return suite, p
        for p in self.policies:
            if not self.suites and p.name == variant:
                return None, p
        raise KeyError(variant)

    @model_validator(mode="after")
    def _unique_names(self) -> EvalSpec:
        if len(set(self.splits)) != len(self.splits):
            raise SpecFieldError("splits", "a split is listed twice; list each split once.")
        seen: set[str] = set()
        for i, p in enumerate(self.policies):
            if p.splits is not None and len(set(p.splits)) != len(p.splits):
                raise SpecFieldError(
                    f"policies.{i}.splits", "a split is listed twice; list each split once."
                )
            if p.name in seen:
                raise SpecFieldError(
                    f"policies.{i}.name",
                    f"policy name {p.name!r} is used twice; each policy becomes its own stage "
                    "and table rows. Fix: give each policy a distinct name.",
                )
            seen.add(p.name)
        return self

    def splits_of(self, policy: PolicySpec) -> list[str]:
        """The splits `policy` is evaluated on: its own list, else eval.splits."""
        return list(policy.splits if policy.splits is not None else self.splits)
