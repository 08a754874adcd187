"""SFT config: step-level supervised fine-tuning on the kept teacher trajectories."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .common import SpecFieldError, SpecModel


class SFTSpec(SpecModel):
    max_steps: int = Field(
        2000, ge=1, description="Optimizer steps. Tiny models learn in a late jump: plan thousands."
    )
    batch_size: int = Field(64, ge=1, description="Samples per device per micro-batch.")
    grad_accum: int = Field(
        1,
        ge=1,
        description="Micro-batches per optimizer step on one node. With compute.num_nodes > 1 "
        "each node runs grad_accum / num_nodes of them (a multiple is required), so the global "
        "batch stays batch_size x grad_accum x GPUs per node and more nodes run a step faster.",
    )
    epochs: float | None = Field(
        None,
        gt=0,
        description="Size the run by passes over the SFT samples: steps = ceil(epochs x "
        "samples / global batch), in place of max_steps (null: max_steps). `rmsweb plan` "
        "estimates the samples of live suites.",
    )
    demos_per_task: int | None = Field(
        None,
        ge=1,
        description="Demonstrations per task: SFT trains on the kept trajectories of the first "
        "N train seeds of each task only (null: every collected seed). Budgets of one "
        "collection share it: a budget study collects once, at its largest budget.",
    )
    replay: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="Share of the SFT samples drawn fresh from model.pretrain's synthetic "
        "generator (its skills; seeds disjoint from pretraining's and its held-out set's), "
        "so that many passes over a few demonstrations do not overwrite the generic skills "
        "pretraining taught (copying a value, matching a label). null: none. Needs "
        "model.pretrain.",
    )
    learning_rate: float = Field(1e-3, gt=0, lt=1, description="Peak learning rate.")
    lr_scheduler: Literal["cosine", "linear", "constant"] = Field(
        "cosine", description="Decay after warmup."
    )
    warmup_ratio: float = Field(0.03, ge=0, lt=1, description="Share of steps spent warming up.")
    min_lr_ratio: float = Field(
        0.1, ge=0, le=1, description="Final learning rate as a share of the peak (cosine)."
    )
    weight_decay: float = Field(0.01, ge=0, description="AdamW weight decay.")
    adam_beta1: float = Field(0.9, ge=0, lt=1, description="AdamW beta1.")
    adam_beta2: float = Field(0.95, ge=0, lt=1, description="AdamW beta2.")
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient clipping norm.")
    max_seq_len: int = Field(1024, ge=64, description="Longest training sequence in tokens.")
    save_steps: int = Field(500, ge=1, description="Checkpoint every N steps (resume point).")
    save_minutes: float | None = Field(
        None,
        gt=0,
        description="Also checkpoint once this many minutes have passed since the last "
        "checkpoint (a spot preemption loses at most that much); null: by save_steps only. "
        "`validate` warns when the plan puts more than 30 minutes between checkpoints.",
    )
    logging_steps: int = Field(20, ge=1, description="Log loss every N steps.")
    val_fraction: float = Field(
        0.02, ge=0, lt=0.5, description="Held-out share of samples for the eval loss."
    )
    precision: Literal["fp32", "bf16", "fp16"] = Field(
        "fp32", description="Training precision (bf16 gives no speed-up on small CPUs)."
    )
    gradient_checkpointing: bool = Field(False, description="Trade compute for memory.")
    torch_threads: int | None = Field(
        None, ge=1, description="CPU threads for torch (null: all cores)."
    )

    @model_validator(mode="after")
    def _steps(self) -> SFTSpec:
        if self.logging_steps > self.max_steps:
            raise SpecFieldError(
                "logging_steps",
                f"logging_steps ({self.logging_steps}) exceeds max_steps ({self.max_steps}); the "
                "loss curve would be empty. Fix: lower logging_steps.",
            )
        return self
