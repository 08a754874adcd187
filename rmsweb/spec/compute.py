"""Compute config: what SkyPilot provisions for this experiment."""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from .common import SpecFieldError, SpecModel
from .secret_scan import secret_like_name

_ACCELERATOR = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(:[0-9]+)?$")


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
    checkpoint_bucket: str | None = Field(
        None,
        description="Bucket name mounted at /checkpoints for managed-job recovery "
        "(null: rmsweb-ckpt-<experiment>).",
    )
    dvc_remote: str | None = Field(
        None, description="DVC remote URL (s3://..., gs://...) used by dvc pull/push on the node."
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
    def _multi_node(self) -> ComputeSpec:
        if self.num_nodes > 1 and self.accelerators is None:
            raise SpecFieldError(
                "num_nodes",
                f"num_nodes is {self.num_nodes} but accelerators is null; multi-node stages run "
                "distributed GPU training. Fix: set accelerators (e.g. H100:8) or num_nodes: 1.",
            )
        return self
