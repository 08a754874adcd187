"""compute.sharding fsdp: the policy sharded over the torchrun ranks with PyTorch FSDP2.

`torch.distributed.fsdp.fully_shard` is applied to every decoder layer and then to the
whole model (the root unit: embeddings, LM head, final norm and the vision tower). Each
rank then holds 1/N of every parameter, frozen base and LoRA adapters alike; a unit's
parameters are all-gathered when its forward (or backward) runs and freed after it.
Names of parameters do not change, so checkpoints written from a sharded model (the
gathered, whole tensors: `full_trainable`) load into an unsharded one and back.

Why the vision tower is not a unit of its own: a forward over a text-only batch never
calls it, and under FSDP every rank must run the same all-gathers; in the root unit it is
gathered with every forward, images or not.

Rules the trainers keep (ranks.py's two rules, which FSDP makes binding):
- every rank runs the same forward and backward calls (padding passes included);
- generation runs inside `gathered(model)`: the whole model is gathered once and nothing
  is freed after a forward, so HF generate makes no collective call and ranks may stop
  after different numbers of tokens;
- gradients are summed over the ranks (`gradient divide factor` 1): the trainers
  normalise their losses by the step-wide token count themselves (ranks.sum_gradients
  does the same for unsharded data parallelism);
- collectives that read or write whole tensors (`full_trainable`, `load_trainable`,
  the optimizer state) run on every rank; only rank 0 writes files.
With one process (no torchrun) FSDP2 still works: a mesh of one rank.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

SHARDINGS = ("none", "fsdp")


def check(sharding: str) -> str:
    if sharding not in SHARDINGS:
        raise ValueError(f"sharding {sharding!r}: one of {', '.join(SHARDINGS)}")
    return sharding


def decoder_layers(model: Any) -> list[Any]:
    """The text decoder layers of a Qwen3 / Qwen3-VL model (PEFT-wrapped or not)."""
    return [m for m in model.modules() if type(m).__name__.endswith("DecoderLayer")]


def fsdp_modules(model: Any) -> list[Any]:
    from torch.distributed.fsdp import FSDPModule

    return [m for m in model.modules() if isinstance(m, FSDPModule)]


def is_sharded(model: Any) -> bool:
    return bool(fsdp_modules(model))


def root_of(model: Any) -> Any:
    """The module sharded as FSDP's root: a PEFT model's inner Hugging Face model.

    HF generate calls the inner model's forward, not the PEFT wrapper's; FSDP needs its
    root's forward to run first (lazy init), so the root is the module every path runs.
    """
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def shard(model: Any, mixed_precision: Any = None) -> Any:
    """Shard `model` in place over every rank of the default process group (FSDP2).

    Every rank must hold the same whole weights before (the same loaded folder and the
    same seeded LoRA init): each keeps its own 1/N of them, on its GPU where there is one
    (load the model on CPU: it is moved unit by unit). `mixed_precision`: an FSDP2
    MixedPrecisionPolicy, or None (compute in the parameters' dtypes).
    """
    import os

    import torch
    from torch.distributed.fsdp import fully_shard

    from rmsweb.train.salvage_ds import ranks

    ranks.init_from_env()
    import torch.distributed as dist

    if not dist.is_initialized():  # one process, no torchrun: a group of one (in memory)
        backend = "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    if torch.cuda.is_available() and "LOCAL_RANK" in os.environ:
        # fully_shard moves each unit to the mesh's device (this rank's GPU) as it shards
        # it: a model loaded on CPU reaches the GPU 1/N at a time, never whole.
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    kwargs: dict[str, Any] = {"reshard_after_forward": True}
    if mixed_precision is not None:
        kwargs["mp_policy"] = mixed_precision
    layers = decoder_layers(model)
    if not layers:
        raise ValueError(
            f"{type(model).__name__}: no decoder layers found to shard (FSDP units); "
            "compute.sharding fsdp supports Qwen3 and Qwen3-VL models."
        )
    for layer in layers:
        fully_shard(layer, **kwargs)
    fully_shard(root_of(model), **kwargs)
    for m in fsdp_modules(model):  # sums, as ranks.sum_gradients: the losses are normalised
        m.set_gradient_divide_factor(1.0)
        # a plain SUM (gloo has no PREMUL_SUM; with factor 1 there is nothing to scale)
        m.set_force_sum_reduction_for_comms(True)
    return model


@contextmanager
def gathered(model: Any) -> Iterator[None]:
    """The whole model on every rank for the block (generation): one all-gather per unit
    on entry, none inside, the shards back on exit. A no-op for an unsharded model."""
    if not is_sharded(model):
        yield
        return
    units = fsdp_modules(model)
    for m in units:
        m.set_reshard_after_forward(False, recurse=False)
    for m in units:
        m.unshard()
    try:
        yield
    finally:
        for m in units:
            m.reshard()
            m.set_reshard_after_forward(True, recurse=False)


def _local(t: Any) -> Any:
    from torch.distributed.tensor import DTensor

    return t.full_tensor() if isinstance(t, DTensor) else t


def full_trainable(model: Any) -> dict[str, Any]:
    """name -> whole CPU tensor of every trainable parameter (a collective when sharded:
    every rank calls it and gets the same dict)."""
    return {
        n: _local(p.detach()).cpu().contiguous()
        for n, p in model.named_parameters()
        if p.requires_grad
    }


def load_trainable(model: Any, weights: dict[str, Any]) -> None:
    """Copy whole tensors into the (maybe sharded) parameters of the same names; each
    rank keeps its own shard. Every rank calls it with the same `weights`."""
    import torch
    from torch.distributed.tensor import DTensor, distribute_tensor

    params = dict(model.named_parameters())
    with torch.no_grad():
        for n, w in weights.items():
            p = params[n]
            if isinstance(p, DTensor):
                local = distribute_tensor(
                    w.to(p.dtype), p.device_mesh, p.placements, src_data_rank=None
                ).to_local()
                p.to_local().copy_(local)
            else:
                p.copy_(w)


def optimizer_state(model: Any, optimizer: Any) -> dict[str, Any]:
    """The optimizer's state with whole tensors, keyed by parameter name (a collective)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    return get_optimizer_state_dict(
        model, optimizer, options=StateDictOptions(full_state_dict=True)
    )


def load_optimizer_state(model: Any, optimizer: Any, state: dict[str, Any]) -> None:
    """Put `optimizer_state`'s whole tensors back, each rank its shard (a collective)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    set_optimizer_state_dict(
        model, optimizer, optim_state_dict=state, options=StateDictOptions(full_state_dict=True)
    )


def clip_grad_norm(params: Iterable[Any], max_norm: float) -> float:
    """torch's clip_grad_norm_ (DTensor gradients: the norm over the whole tensors)."""
    import torch

    norm = torch.nn.utils.clip_grad_norm_(list(params), max_norm)
    return float(_local(norm))


def unsharded(model: Any, weights: dict[str, Any], lora: dict[str, Any] | None) -> Any:
    """`model` (the start, unsharded, e.g. loaded on CPU) with trained `weights` (whole
    tensors, by the names the trained model gives them: `full_trainable`), the LoRA
    adapters merged in: a plain model that eval and vLLM load."""
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", **lora))
    params = dict(model.named_parameters())
    unknown = sorted(set(weights) - set(params))
    if unknown:
        raise ValueError(f"trained weights not in the model: {unknown[:3]}")
    load_trainable(model, weights)
    return model.merge_and_unload() if lora else model


def accelerate_fsdp_on_cpu() -> None:
    """Let accelerate's FSDP2 run on CPU ranks (gloo), for the CPU rehearsals of the SFT
    stage. accelerate 1.15 turns an FSDP plugin on only for GPU-like distributed types:
    on CPU (MULTI_CPU) it drops it silently and the Trainer runs DDP. This sets the state
    to FSDP as on GPUs, so accelerate's own FSDP2 preparation (fully_shard of the model,
    sharded checkpoints, resume) runs on the CPU ranks. Idempotent; GPUs need none of it.
    """
    from accelerate.state import AcceleratorState, DistributedType

    if getattr(AcceleratorState.__init__, "_rmsweb_cpu_fsdp", False):
        return
    init = AcceleratorState.__init__

    def patched(self: Any, *args: Any, fsdp_plugin: Any = None, **kwargs: Any) -> None:
        init(self, *args, fsdp_plugin=fsdp_plugin, **kwargs)
        if fsdp_plugin is not None and self.distributed_type == DistributedType.MULTI_CPU:
            self.distributed_type = DistributedType.FSDP
            self.fsdp_plugin = fsdp_plugin

    patched._rmsweb_cpu_fsdp = True  # type: ignore[attr-defined]
    AcceleratorState.__init__ = patched
