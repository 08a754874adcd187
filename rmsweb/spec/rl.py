"""RL config: grpo, dapo_ds and Salvage-DS (recipe part S) share one trainer."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from .common import SpecFieldError, SpecModel, check_range


class RewardSpec(SpecModel):
    kind: Literal["polarized", "partial", "format_plus_match"] = Field(
        "polarized",
        description="polarized: +1 semantically correct, -1 otherwise (RMSWeb); partial: credit "
        "per matching component; format_plus_match: format bonus + match.",
    )
    similarity_tau: float = Field(
        1.0,
        gt=0,
        le=1,
        description="Text arguments match when normalized similarity >= tau (1.0: exact).",
    )
    format_bonus: float = Field(
        0.1, ge=0, le=1, description="Bonus for a parseable action (format_plus_match only)."
    )
    invert: bool = Field(
        False,
        description="Canary: multiply every reward by -1 (right actions are punished). A "
        "study's control that must come out worse than SFT, or the study cannot see RL.",
    )


class HFSamplerSpec(SpecModel):
    """Sample the groups with transformers generate on the model being trained (CPU or GPU)."""

    kind: Literal["hf"] = "hf"


class VLLMSamplerSpec(SpecModel):
    """Sample the groups with vLLM on the SFT model plus the current LoRA adapter, saved and
    passed with every sampling call (GPU, the `gpu` extra; train/salvage_ds/vllm_sampler.py)."""

    kind: Literal["vllm"] = "vllm"
    gpu_memory_utilization: float = Field(
        0.3,
        gt=0,
        lt=1,
        description="Share of each GPU's memory the engine takes (its weights and KV cache), "
        "beside the trainer's model, adapters and activations: `rmsweb plan` adds both.",
    )
    max_model_len: int = Field(16384, ge=512, description="Context length of the engine.")
    enforce_eager: bool = Field(
        False, description="No CUDA graphs: starts faster, samples slower (tests, debugging)."
    )


SamplerSpec = Annotated[HFSamplerSpec | VLLMSamplerSpec, Field(discriminator="kind")]


def _is_hf(sampler: HFSamplerSpec | VLLMSamplerSpec) -> bool:
    return sampler.kind == "hf"


class _RLBase(SpecModel):
    steps: int = Field(200, ge=1, description="Optimizer steps.")
    group_size: int = Field(8, ge=2, description="Completions sampled per state (G).")
    batch_size: int = Field(
        64, ge=2, description="Completions per optimizer step; a multiple of group_size."
    )
    learning_rate: float = Field(1e-5, gt=0, lt=1, description="Learning rate.")
    warmup_ratio: float = Field(0.0, ge=0, lt=1, description="Share of steps spent warming up.")
    epsilon: float = Field(0.2, gt=0, lt=1, description="Lower PPO clip range.")
    epsilon_high: float = Field(
        0.28, gt=0, lt=1, description="Upper clip range (clip-higher); >= epsilon."
    )
    beta: float = Field(0.0, ge=0, description="KL coefficient (0: no reference model).")
    temperature: float = Field(1.0, gt=0, le=2, description="Sampling temperature of the group.")
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient clipping norm.")
    reward: RewardSpec = Field(default_factory=RewardSpec, description="Reward function.")
    save_steps: int = Field(50, ge=1, description="Checkpoint every N steps (resume point).")
    micro_batch_size: int | None = Field(
        32,
        ge=1,
        description="Sequences per forward/backward and per generate call (null: the whole "
        "batch, whose KV cache and activations are unbounded at scale: `rmsweb plan` shows "
        "what one micro-batch needs). Lower it when memory runs out; the gradient stays the "
        "same (token-level sums over one step-wide normaliser).",
    )
    gradient_checkpointing: bool = Field(
        False,
        description="Recompute activations in the update's backward (trade compute for "
        "memory); sampling keeps its KV cache. Same gradients either way.",
    )
    torch_threads: int | None = Field(
        None,
        ge=1,
        description="CPU threads for torch (null: all cores). On a shared or small CPU use 1: "
        "token-by-token sampling is overhead-bound and extra threads only contend.",
    )
    adam_beta1: float = Field(0.9, ge=0, lt=1, description="AdamW beta1.")
    adam_beta2: float = Field(0.999, ge=0, lt=1, description="AdamW beta2.")
    adam_eps: float = Field(1e-8, gt=0, description="AdamW epsilon.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    freeze_embeddings: bool = Field(
        False,
        description="Keep the token embeddings fixed (with tied embeddings, as in the tiny "
        "models, the LM head too): RL then moves the transformer blocks only.",
    )
    sampler: SamplerSpec = Field(
        default_factory=HFSamplerSpec,
        # Left out of params.yaml while it is the default, so adding the field left every
        # committed RL stage's params (and its run key) as they were.
        exclude_if=_is_hf,
        description="What samples the groups: hf (transformers generate; CPU or GPU) or vllm "
        "(GPU, LoRA only: the current adapter is passed with every sampling call).",
    )
    kl_probe_states: int = Field(
        64,
        ge=0,
        description="States on which the KL to the SFT policy is measured at every checkpoint "
        "and at the end (exact per-token KL on the policy's own samples; 0: off). Full "
        "fine-tunes keep a frozen copy of the SFT model for it; LoRA switches adapters off.",
    )

    @model_validator(mode="after")
    def _shapes(self) -> _RLBase:
        if self.batch_size % self.group_size:
            raise SpecFieldError(
                "batch_size",
                f"batch_size ({self.batch_size}) is not a multiple of group_size "
                f"({self.group_size}); each state needs a whole group of completions. "
                f"Fix: use batch_size {self.group_size * max(1, self.batch_size // self.group_size)}.",
            )
        check_range(
            "epsilon",
            self.epsilon,
            "epsilon_high",
            self.epsilon_high,
            "the upper clip bound must not be tighter than the lower one.",
        )
        return self


class _GateMixin(SpecModel):
    min_std: float = Field(0.1, ge=0, description="Contrast: minimum reward std within a group.")
    competence_min: float = Field(
        0.125, ge=0, le=1, description="Competence: lowest accepted fraction of correct samples."
    )
    competence_max: float = Field(
        0.875, ge=0, le=1, description="Competence: highest accepted fraction of correct samples."
    )

    def _check_gate(self) -> None:
        check_range(
            "competence_min",
            self.competence_min,
            "competence_max",
            self.competence_max,
            "no group could pass the competence gate.",
        )


class GRPO(_RLBase):
    """Plain GRPO: every group is used, no gate, no anchor."""

    kind: Literal["grpo"] = "grpo"


class DAPODynamicSampling(_RLBase, _GateMixin):
    """DAPO-style dynamic sampling: gated groups are dropped and replaced by resampling."""

    kind: Literal["dapo_ds"] = "dapo_ds"
    max_resample: int = Field(
        3, ge=0, description="Resampling rounds to refill a batch with accepted groups."
    )

    @model_validator(mode="after")
    def _gate(self) -> DAPODynamicSampling:
        self._check_gate()
        return self


class SalvageDS(_RLBase, _GateMixin):
    """Salvage-DS: gated groups feed the PG loss; rejected ones the action-only anchor."""

    kind: Literal["salvage_ds"] = "salvage_ds"
    gate: bool = Field(True, description="Apply the contrast-and-competence gate.")
    anchor_weight: float = Field(
        0.5, ge=0, description="Weight of the action-only NLL on rejected groups (0: off)."
    )
    max_resample: int = Field(
        0,
        ge=0,
        description="Resampling rounds to refill a batch with accepted groups (0: anchor only; "
        "rejected groups of every round are anchored).",
    )

    @model_validator(mode="after")
    def _gate(self) -> SalvageDS:
        self._check_gate()
        return self


class SalvageDSExpert(SalvageDS):
    """Salvage-DS with an expert member: a group none of whose G samples is right gets its
    state's first reference action in place of its last sample, before the gate (as
    BREAD, LUFFY and ReLIFT put expert solutions into groups the policy cannot solve).
    Such a group then has contrast (1 right of G: within the default competence bounds at
    G = 8), so the reference is pushed up and the sampled wrong actions down; without the
    member it would be rejected as all_wrong and only anchored. The reference is the mined
    state's label, the one the anchor and continued SFT already train on."""

    kind: Literal["salvage_ds_expert"] = "salvage_ds_expert"

    @model_validator(mode="after")
    def _member_passes(self) -> SalvageDSExpert:
        # A group with the member holds exactly 1 right of group_size: if the competence
        # gate rejects that share, every member is thrown away again (as too_hard).
        if self.gate and 1 / self.group_size < self.competence_min:
            raise SpecFieldError(
                "competence_min",
                f"a group with an expert member has 1 right of group_size {self.group_size} "
                f"({1 / self.group_size:.3f}), below competence_min {self.competence_min:g}, "
                "so the gate would reject every such group. Fix: competence_min <= "
                f"{1 / self.group_size:.3f}, or a smaller group_size.",
            )
        return self


class ContinuedSFT(_RLBase):
    """Control: the RL stage's states and draws, trained with the SFT loss on their
    reference actions instead of sampled rewards (is RL more than more supervised data?).

    Each step draws batch_size / group_size states exactly as the RL kinds do (same
    weights, same seeds) and takes one optimizer step on the NLL of each state's first
    reference action (the whole completion, as SFT). Nothing is sampled."""

    kind: Literal["continued_sft"] = "continued_sft"

    @model_validator(mode="after")
    def _no_kl(self) -> ContinuedSFT:
        # The SFT loss has no KL term: a beta here would be silently ignored, and a
        # control copied from the full recipe (beta 0.04) would look KL-regularised.
        if self.beta != 0:
            raise SpecFieldError(
                "beta",
                "continued_sft trains with the SFT loss, which has no KL term, so beta would "
                "be ignored. Fix: set beta: 0 (tune the control's learning_rate instead).",
            )
        return self


RLSpec = Annotated[
    GRPO | DAPODynamicSampling | SalvageDS | SalvageDSExpert | ContinuedSFT,
    Field(discriminator="kind"),
]
