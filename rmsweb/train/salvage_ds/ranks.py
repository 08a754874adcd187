"""Data-parallel RL over torchrun ranks (gloo on CPU, nccl for CUDA tensors), no DDP wrapper.

Every rank samples the same groups (same seeds, same weights), then each computes the
loss-and-backward of its own share of the step's sequences (rank r: sequences r, r + N,
...) with the step-wide token normaliser every rank knows. Summing the gradients over
the ranks gives exactly the single-process gradient, so every rank takes the same
optimizer step and the weights stay equal. The loss logs are summed the same way. Only
rank 0 writes (checkpoints, the stage's outputs). Sampling itself is not split yet
(with rl.sampler vllm, rank 0 samples and `broadcast`s the completions).
With one process (no torchrun) every function here is a no-op.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any


def _dist() -> Any:
    import torch.distributed as dist

    return dist if dist.is_available() and dist.is_initialized() else None


def init_from_env() -> None:
    """Join torchrun's process group (WORLD_SIZE > 1) if not joined yet."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or _dist() is not None:
        return
    import torch
    import torch.distributed as dist

    # Gradients live on the GPU (nccl); the loss logs are CPU tensors (gloo).
    dist.init_process_group("cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")


def rank_world() -> tuple[int, int]:
    dist = _dist()
    return (dist.get_rank(), dist.get_world_size()) if dist else (0, 1)


def is_writer() -> bool:
    return rank_world()[0] == 0


def share(n: int) -> list[int]:
    """This rank's positions among n sequences."""
    rank, world = rank_world()
    return list(range(rank, n, world))


def sum_(values: Iterable[Any]) -> None:
    """All-reduce (sum) tensors in place."""
    dist = _dist()
    if dist is None:
        return
    for v in values:
        dist.all_reduce(v, op=dist.ReduceOp.SUM)


def sum_floats(*values: float) -> list[float]:
    if _dist() is None:
        return list(values)
    import torch

    t = torch.tensor(values, dtype=torch.float64)
    sum_([t])
    return t.tolist()


def sum_gradients(params: Iterable[Any]) -> None:
    """Sum every trainable parameter's gradient over the ranks (a missing one counts 0)."""
    if _dist() is None:
        return
    import torch

    grads = []
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        grads.append(p.grad)
    sum_(grads)


def merge(parts: dict[int, float]) -> dict[int, float]:
    """The union of every rank's dict (disjoint keys: each rank logs its own sequences)."""
    dist = _dist()
    if dist is None:
        return parts
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, parts)
    return {k: v for d in gathered for k, v in d.items()}


def sum_entries(log: dict[str, Any], *keys: str) -> None:
    """Sum the float entries `keys` of a log dict over the ranks, in place."""
    for key, value in zip(keys, sum_floats(*(log[k] for k in keys)), strict=True):
        log[key] = value


def broadcast(value: Any) -> Any:
    """Rank 0's `value` on every rank (any picklable object, sent over gloo)."""
    dist = _dist()
    if dist is None:
        return value
    import torch

    box = [value]
    dist.broadcast_object_list(box, src=0, device=torch.device("cpu"))
    return box[0]
