"""A local `vllm serve` for an OpenAI-compatible endpoint (teacher, judge, eval policy).

When an endpoint has `serve:`, the SkyPilot task starts `vllm serve` on the node
for the stages that call that endpoint, waits until it answers, and stops it
after them (so the GPUs are free again for training). The endpoint's `model`
is what vLLM loads and the name requests use; its `base_url` fixes the port.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import Field

from .common import SpecModel

LOCAL_HOSTS = ("127.0.0.1", "localhost")


class VLLMServer(SpecModel):
    tensor_parallel_size: int = Field(
        1,
        ge=1,
        le=64,
        description="GPUs the server shards the model over (vllm --tensor-parallel-size).",
    )
    gpu_memory_utilization: float = Field(
        0.9,
        gt=0,
        le=1,
        description="Share of each GPU's memory vLLM may take; leave room for a policy engine "
        "that runs beside it in the same stage.",
    )
    max_model_len: int | None = Field(
        None, ge=512, description="Context length (null: the model's own)."
    )
    extra_args: list[str] = Field(
        default_factory=list,
        description="More `vllm serve` arguments, e.g. ['--limit-mm-per-prompt', '{\"image\": 15}'].",
    )
    ready_timeout_s: float = Field(
        1800.0, gt=0, description="How long to wait for the server to answer (weights download)."
    )


def local_port(base_url: str) -> int:
    """The port of a local endpoint URL; ValueError (with the fix) if the URL is not local."""
    parts = urlsplit(base_url)
    if parts.hostname not in LOCAL_HOSTS or parts.port is None:
        raise ValueError(
            f"serve: is set but base_url {base_url!r} is not http://127.0.0.1:PORT/v1; the "
            "server started for this endpoint listens on this node only. Fix: point base_url at "
            "http://127.0.0.1:<port>/v1, or remove serve: to use a remote endpoint."
        )
    return parts.port
