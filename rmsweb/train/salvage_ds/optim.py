"""The RL optimizer and which parameters it moves.

RL starts a fresh AdamW (the SFT run's moments are gone with its checkpoints) on the
trainable parameters. `freeze_embeddings` keeps the token embeddings fixed: in the tiny
models they are tied to the LM head and hold about half of all parameters, so RL on a
few hundred states would otherwise rewrite the output layer of every token.
"""

from __future__ import annotations

from typing import Any


def freeze_embeddings(model: Any) -> int:
    """Stop gradients to the input embeddings (and a tied LM head); returns their size."""
    weight = model.get_input_embeddings().weight
    weight.requires_grad_(False)
    return weight.numel()


def trainable(model: Any) -> list[Any]:
    return [p for p in model.parameters() if p.requires_grad]


def adamw(
    params: list[Any],
    *,
    learning_rate: float,
    betas: tuple[float, float],
    eps: float,
    weight_decay: float,
) -> Any:
    import torch

    if not params:
        raise ValueError("no trainable parameters left (is everything frozen?)")
    return torch.optim.AdamW(
        params, lr=learning_rate, betas=betas, eps=eps, weight_decay=weight_decay
    )
