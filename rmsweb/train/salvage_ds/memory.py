"""Memory of the RL update: activation (gradient) checkpointing around the backward only.

Sampling needs the KV cache, which checkpointing turns off, so it is switched on for
the loss-and-backward passes and back off after (the model is left as it was found).
Micro-batching (RLHyper.micro_batch_size) bounds the rest: one generate call and one
forward/backward hold micro_batch_size sequences, not the whole step's batch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


def _is_on(model: Any) -> bool:
    for name in ("is_activation_checkpointing", "is_gradient_checkpointing"):
        value = getattr(model, name, None)
        if value is not None:
            return bool(value)
    return False


@contextlib.contextmanager
def update_checkpointing(model: Any, on: bool) -> Iterator[None]:
    """Recompute activations in backward while inside (non-reentrant: LoRA's frozen
    inputs need no requires_grad hook); restore the model's own setting after."""
    if not on or _is_on(model):
        yield
        return
    config = getattr(model, "config", None)
    use_cache = getattr(config, "use_cache", None)
    kwargs = {"use_reentrant": False}
    # transformers 5.2x names it activation_checkpointing; older (the GPU pin) gradient_.
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    try:
        yield
    finally:
        if hasattr(model, "activation_checkpointing_disable"):
            model.activation_checkpointing_disable()
        else:
            model.gradient_checkpointing_disable()
        if config is not None and use_cache is not None:
            config.use_cache = use_cache
