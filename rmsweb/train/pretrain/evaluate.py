"""Greedy next-action accuracy per skill on held-out synthetic examples (exact match)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from rmsweb.agents.prompt import PromptConfig
from rmsweb.env.actions import parse_action
from rmsweb.env.types import Action

from .synthetic import Example, messages


def greedy_outputs(
    model: Any,
    tokenizer: Any,
    examples: Sequence[Example],
    prompt: PromptConfig,
    batch_size: int = 64,
    max_new_tokens: int = 32,
) -> list[str]:
    """The model's greedy output for each example's prompt (as the hf policy generates)."""
    import torch

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    tokenizer.padding_side = "left"
    was_training = model.training
    model.eval()
    outputs: list[str] = []
    for start in range(0, len(examples), batch_size):
        batch = examples[start : start + batch_size]
        texts = [
            tokenizer.apply_chat_template(
                messages(ex, prompt, count), tokenize=False, add_generation_prompt=True
            )
            for ex in batch
        ]
        enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        enc = {k: v.to(model.device) for k, v in enc.items()}
        with torch.inference_mode():
            out = model.generate(
                **enc,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
        new = out[:, enc["input_ids"].shape[1] :]
        outputs += [t.strip() for t in tokenizer.batch_decode(new, skip_special_tokens=True)]
    if was_training:
        model.train()
    return outputs


def _target(text: str) -> tuple[str, str | None] | None:
    action = parse_action(text)
    return (action.type, action.target) if isinstance(action, Action) else None


def accuracy(
    model: Any,
    tokenizer: Any,
    examples: Sequence[Example],
    prompt: PromptConfig,
    batch_size: int = 64,
) -> tuple[dict[str, float], dict[str, float]]:
    """Per skill: the share of examples whose greedy output is exactly the right completion,
    and the share with the right action type and element (the typed value aside: what a
    model gets before it can copy)."""
    outputs = greedy_outputs(model, tokenizer, examples, prompt, batch_size)
    exact: dict[str, list[bool]] = defaultdict(list)
    target: dict[str, list[bool]] = defaultdict(list)
    for ex, out in zip(examples, outputs, strict=True):
        exact[ex.skill].append(out == ex.completion)
        target[ex.skill].append(_target(out) == _target(ex.completion))
    return _shares(exact), _shares(target)


def _shares(right: dict[str, list[bool]]) -> dict[str, float]:
    return {skill: round(sum(r) / len(r), 4) for skill, r in sorted(right.items())}
