"""Token-level batches: encoded prompts, padded sequences, and the anchor's completion.

The layout is TRL's (GRPOTrainer): prompts padded on the left, completions on the right,
so the completion tokens of every row sit in the same last columns and the log-probs of
a batch are one slice of the logits. The same layout feeds generation (prompts only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rmsweb.agents.prompt import completion_text


@dataclass
class EncodedPrompt:
    """A state's prompt as model inputs (one row, no padding)."""

    input_ids: Any  # 1-D LongTensor
    mm_token_type_ids: Any = None  # 1-D, VL models (1 on image placeholder tokens)
    pixel_values: Any = None  # (patches, dim), when the prompt shows an image
    image_grid_thw: Any = None  # (1, 3)


def encode_prompt(
    tokenizer: Any, processor: Any, is_vl: bool, messages: list[dict], image: Any = None
) -> EncodedPrompt:
    """Chat template with the generation prompt, then the tokenizer (or the VL processor)."""
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    if is_vl:
        images = [image] if image is not None else None
        enc = processor(text=[text], images=images, return_tensors="pt")
    else:
        enc = tokenizer(text, add_special_tokens=False, return_tensors="pt")
    mm = enc.get("mm_token_type_ids")
    return EncodedPrompt(
        input_ids=enc["input_ids"][0],
        mm_token_type_ids=mm[0] if mm is not None else None,
        pixel_values=enc.get("pixel_values"),
        image_grid_thw=enc.get("image_grid_thw"),
    )


def collate(
    prompts: Sequence[EncodedPrompt],
    pad_id: int,
    device: Any,
    completions: Sequence[Sequence[int]] = (),
    masks: Sequence[Sequence[float]] = (),
) -> dict[str, Any]:
    """Left-padded prompts + right-padded completions as one batch.

    Returns the model inputs (input_ids, attention_mask, and for VL prompts
    mm_token_type_ids, pixel_values, image_grid_thw in row order) plus `n_completion`
    (the completion width Tc) and, given `masks`, `loss_mask` (B, Tc).
    """
    import torch

    p_len = max(len(p.input_ids) for p in prompts)
    c_len = max((len(c) for c in completions), default=0)
    rows, attn, mm, loss_mask = [], [], [], []
    for i, p in enumerate(prompts):
        n_pad = p_len - len(p.input_ids)
        comp = list(completions[i]) if completions else []
        c_pad = c_len - len(comp)
        rows.append([pad_id] * n_pad + p.input_ids.tolist() + comp + [pad_id] * c_pad)
        attn.append([0] * n_pad + [1] * len(p.input_ids) + [1] * len(comp) + [0] * c_pad)
        if p.mm_token_type_ids is not None:
            mm.append([0] * n_pad + p.mm_token_type_ids.tolist() + [0] * c_len)
        if masks:
            loss_mask.append(list(masks[i]) + [0] * c_pad)
    batch: dict[str, Any] = {
        "input_ids": torch.tensor(rows, device=device),
        "attention_mask": torch.tensor(attn, device=device),
    }
    if mm:
        batch["mm_token_type_ids"] = torch.tensor(mm, device=device)
    # Qwen-VL takes the patches of all images of a batch concatenated, in row order.
    with_images = [p for p in prompts if p.pixel_values is not None]
    if with_images:
        batch["pixel_values"] = torch.cat([p.pixel_values for p in with_images]).to(device)
        batch["image_grid_thw"] = torch.cat([p.image_grid_thw for p in with_images]).to(device)
    batch["n_completion"] = c_len
    if masks:
        batch["loss_mask"] = torch.tensor(loss_mask, dtype=torch.float32, device=device)
    return batch


def cut_at_stop(ids: list[int], stop_ids: set[int]) -> list[int]:
    """Tokens up to and including the first stop token (what TRL's completion mask keeps)."""
    for i, t in enumerate(ids):
        if t in stop_ids:
            return ids[: i + 1]
    return ids


def anchor_completion(tokenizer: Any, action_text: str) -> tuple[list[int], list[int]]:
    """Token ids of "Action: <action>" + end of turn, and the mask of the action's tokens.

    The completion is tokenized as a whole (how the policy would emit it), and a token is
    in the mask when its characters overlap the action's span; the "Action:" marker and
    the end-of-turn token are outside it. A thought is never part of the anchor: the
    reference is taught as a direct answer to the prompt.
    """
    text = completion_text(action_text)
    start = len(text) - len(action_text)
    eos = tokenizer.eos_token or ""
    enc = tokenizer(text + eos, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(enc["input_ids"])
    mask = [int(a < len(text) and b > start and b > a) for a, b in enc["offset_mapping"]]
    return ids, mask
