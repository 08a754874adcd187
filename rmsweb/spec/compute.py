"""Compute config: what SkyPilot provisions for this experiment."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from .common import SpecFieldError, SpecModel
from .secret_scan import secret_like_name

_ACCELERATOR = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(:[0-9]+)?$")
# The one variable bucket names and remote URLs may use: a per-user/project prefix given at
# launch (`--env RMSWEB_BUCKET_PREFIX=alice-lab`), so two users never share a bucket name.
BUCKET_PREFIX_VAR = "RMSWEB_BUCKET_PREFIX"
_VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")
_REMOTE = re.compile(r"^[a-z][a-z0-9+]*://[^/\s]+")


def _only_prefix_variable(value: str) -> None:
    for name in _VARIABLE.findall(value):
        if name != BUCKET_PREFIX_VAR:
            raise ValueError(
                f"{value!r} uses ${name}; only ${{{BUCKET_PREFIX_VAR}}} is filled in at launch. "
                f"Fix: write the value out or use ${{{BUCKET_PREFIX_VAR}}}."
            )


class ComputeSpec(SpecModel):
    cloud: str | None = Field(None, description="Cloud name (aws, gcp, ...); null: any enabled.")
    region: str | None = Field(None, description="Region; null: any.")
    accelerators: str | None = Field(
        None, description="GPUs per node as NAME:COUNT (e.g. H100:8); null: CPU only."
    )
    cpus: str | None = Field("4+", description="vCPUs per node (SkyPilot syntax, e.g. 8+).")
    memory: str | None = Field(None, description="Memory per node in GB (e.g. 64+).")
    use_spot: bool = Field(
        False, description="Prefer spot instances, falling back to on-demand (any_of)."
    )
    disk_size: int = Field(256, ge=50, description="Boot disk in GB.")
    num_nodes: int = Field(1, ge=1, le=256, description="Nodes; > 1 runs sft/rl with torchrun.")
    image_id: str | None = Field(None, description="Machine image; null: the cloud default.")
    sharding: Literal["none", "fsdp"] | None = Field(
        None,
        description="How the sft and rl trainers hold the model across ranks: none (data "
        "parallel, the whole model on every rank) or fsdp (PyTorch FSDP2: the frozen base and "
        "the LoRA adapters sharded over the ranks, layers gathered when used). Null: fsdp where "
        "`rmsweb plan` finds the whole model does not fit one GPU, else none.",
    )
    checkpoint_bucket: str | None = Field(
        None,
        description="Bucket mounted on every node for checkpoints and multi-node rendezvous, "
        "kept across managed-job recoveries; may use ${RMSWEB_BUCKET_PREFIX} (given at launch "
        "with --env). Null: ${RMSWEB_BUCKET_PREFIX}-rmsweb-ckpt, one bucket per user/project.",
    )
    dvc_remote: str | None = Field(
        None,
        description="DVC remote URL (s3://..., gs://..., azure://...) that every stage's outputs "
        "are pushed to on the node; may use ${RMSWEB_BUCKET_PREFIX}. Required for GPU, spot and "
        "multi-node specs: without it a recovery or a finished run loses its results.",
    )
    max_restarts_on_errors: int = Field(
        0,
        ge=0,
        le=100,
        description="Managed jobs (`sky jobs launch`): restarts after a failure of the job itself "
        "(preemptions are always recovered). Every stage resumes from what it pushed.",
    )
    envs: dict[str, str] = Field(
        default_factory=dict, description="Extra non-secret environment variables."
    )

    @field_validator("accelerators")
    @classmethod
    def _accelerators(cls, v: str | None) -> str | None:
        if v is not None and not _ACCELERATOR.match(v):
            raise ValueError(
                f"{v!r} is not NAME or NAME:COUNT; SkyPilot expects e.g. H100:8 or L4:1."
            )
        return v

    @field_validator("checkpoint_bucket")
    @classmethod
    def _bucket(cls, v: str | None) -> str | None:
        if v is not None:
            _only_prefix_variable(v)
        return v

    @field_validator("dvc_remote")
    @classmethod
    def _remote(cls, v: str | None) -> str | None:
        if v is None:
            return v
        _only_prefix_variable(v)
        if not _REMOTE.match(v):
            raise ValueError(
                f"{v!r} is not a remote URL; a node's local folder is lost with the node. "
                "Fix: use a bucket URL such as s3://${RMSWEB_BUCKET_PREFIX}-rmsweb-dvc."
            )
        return v

    @property
    def needs_cloud(self) -> bool:
        """GPUs, spot capacity or several nodes: this spec only runs on a cloud."""
        return self.accelerators is not None or self.use_spot or self.num_nodes > 1

    @field_validator("envs")
    @classmethod
    def _no_secrets(cls, envs: dict[str, str]) -> dict[str, str]:
        for key in envs:
            if secret_like_name(key):
                raise ValueError(
                    f"{key} looks like a secret; secrets must not be written into specs "
                    "(they are copied into params.yaml and sky/*.yaml). Fix: remove it and "
                    f"pass it at launch time (`sky launch --secret {key}`, or `export {key}=...`)."
                )
        return envs

    @model_validator(mode="after")
    def _cloud(self) -> ComputeSpec:
        if self.num_nodes > 1 and self.accelerators is None:
            raise SpecFieldError(
                "num_nodes",
                f"num_nodes is {self.num_nodes} but accelerators is null; multi-node stages run "
                "distributed GPU training. Fix: set accelerators (e.g. H100:8) or num_nodes: 1.",
            )
        if self.needs_cloud and self.dvc_remote is None:
            asks = [
                what
                for what, on in (
                    (f"accelerators {self.accelerators}", self.accelerators is not None),
                    ("use_spot", self.use_spot),
                    (f"num_nodes {self.num_nodes}", self.num_nodes > 1),
                )
                if on
            ]
            raise SpecFieldError(
                "dvc_remote",
                f"this spec runs on a cloud ({', '.join(asks)}) but dvc_remote is null; stage "
                "outputs live on the node's disk, so a preemption loses every finished stage and "
                "the final `dvc push` fails. Fix: set dvc_remote, e.g. "
                "s3://${RMSWEB_BUCKET_PREFIX}-rmsweb-dvc (create the bucket once).",
            )
        return self
