"""Data-parallel RL over torchrun ranks (gloo on CPU, nccl for CUDA tensors), no DDP wrapper.

Sampling is done once and sharded: a step's sequences are cut into global chunks of
`micro_batch_size` (chunk c seeded by (seed, step, round, c), as one process cuts and
seeds them), chunk c is sampled by rank c mod N, and every rank gathers every chunk's
completions (`gather`). So each rank scores and gates the same groups, yet no rank relies
on another sampling bit-identically: what a rank trains on is what was sampled once. With
micro_batch_size set the samples do not depend on the number of ranks.

Then each rank computes the loss-and-backward of its own share of the step's sequences
(rank r: sequences r, r + N, ...) with the step-wide token normaliser every rank knows;
summing the gradients over the ranks gives the single-process gradient, so every rank
takes the same optimizer step and the weights stay equal. The loss logs are summed the
same way. Only rank 0 writes (checkpoints, the stage's outputs). With rl.sampler vllm,
rank 0's engine samples and `broadcast`s the completions.

Two rules keep N ranks in step (a rank that skips a collective hangs all of them until
the NCCL timeout):
1. Every collective is unconditional: it runs on every rank whatever that rank's data
   (no `if groups:` around a sum).
2. Every rank makes the same number of forward (and generate) calls: `rounds(n)` of
   them for n chunks; a rank whose share ran out runs a padding call whose result is
   dropped (`padded_shares`), as sharded training (FSDP, ZeRO-3: parameters gathered
   in every forward) will need.
With one process (no torchrun) every function here is a no-op or the identity.
"""

from __future__ import annotations

import math
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


def rounds(n: int) -> int:
    """Calls every rank makes for n chunks dealt round-robin (the same on every rank)."""
    return math.ceil(n / rank_world()[1]) if n > 0 else 0


def my_chunks(n: int) -> list[int | None]:
    """This rank's chunk indices among n chunks (chunk c: rank c mod N), padded with None
    to `rounds(n)` entries: a None is a padding call, so every rank calls equally often."""
    rank, world = rank_world()
    return [c if c < n else None for c in (k * world + rank for k in range(rounds(n)))]


def padded_shares(n: int, chunk: int) -> list[list[int]]:
    """This rank's positions among n sequences (`share`) in micro-batches of `chunk`,
    padded to the same number of micro-batches on every rank; [] is a padding pass."""
    _, world = rank_world()
    mine = share(n)
    chunk = max(1, chunk)
    calls = math.ceil(math.ceil(n / world) / chunk) if n > 0 else 0
    return [mine[k * chunk : (k + 1) * chunk] for k in range(calls)]


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


def gather(parts: dict[Any, Any]) -> dict[Any, Any]:
    """The union of every rank's dict (disjoint keys: each rank sends its own chunks or
    sequences); any picklable values, sent over gloo."""
    dist = _dist()
    if dist is None:
        return dict(parts)
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, parts)
    return {k: v for d in gathered for k, v in d.items()}


def merge(parts: dict[int, float]) -> dict[int, float]:
    """`gather` of per-sequence logs (kept under its old name)."""
    return gather(parts)


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


def all_reduce_check(device: Any = None) -> tuple[int, float]:
    """(world size, sum over the ranks of 1.0): a collective every rank must join; the
    preflight's cross-node check (the sum equals the world size when every rank took part)."""
    import torch

    world = rank_world()[1]
    t = torch.ones(1, dtype=torch.float32, device=device)
    dist = _dist()
    if dist is not None:
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return world, float(t.item())
