"""The SFT loss with the LM head applied at the completion positions only.

The causal-LM loss only reads the logits where a label is set: the completion's ~10-30
tokens of a 300-500-token step prompt. Projecting every position to the vocabulary and
then discarding 95% of it made the head, its float upcast and its softmax as costly as
the tiny model's two decoder layers on CPU (benchmarks/completion_loss.py measures the
ratio). This computes the same number as the model's own loss (token-summed NLL over
the labelled positions, divided by `num_items_in_batch` when the Trainer passes it,
else by the batch's labelled-token count) from the decoder's hidden states.

Only a bare causal LM in a single process takes this path (`supports_completion_loss`):
under several ranks a DDP or FSDP wrapper must see its own forward (its gradient hooks;
FSDP2 unshards the root's embedding and head there, and its wrapper class does not live
in torch.nn.parallel), and PEFT and VL models route their inputs differently; they keep
the model's own loss.
"""

from __future__ import annotations

from typing import Any

IGNORE = -100


def supports_completion_loss(model: Any) -> bool:
    """Whether `model` is a bare text causal LM with a decoder and an output head."""
    import torch.distributed as dist
    from torch import nn

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return False
    if type(model).__module__.startswith(("torch.nn.parallel", "peft")):
        return False
    config = getattr(model, "config", None)
    if config is None or getattr(config, "vision_config", None) is not None:
        return False
    if getattr(config, "final_logit_softcapping", None):  # a transform the head path skips
        return False
    get_decoder = getattr(model, "get_decoder", None)
    get_head = getattr(model, "get_output_embeddings", None)
    if get_decoder is None or get_head is None:
        return False
    try:
        decoder, head = get_decoder(), get_head()
    except (AttributeError, NotImplementedError):
        return False
    return isinstance(decoder, nn.Module) and isinstance(head, nn.Linear)


def completion_loss(model: Any, inputs: dict[str, Any], num_items_in_batch: Any = None) -> Any:
    """The causal-LM loss of `inputs` (with `labels`, IGNORE on the prompt and padding),
    projecting only the positions whose next token is labelled."""
    import torch.nn.functional as F

    labels = inputs["labels"]
    features = {k: v for k, v in inputs.items() if k not in ("labels", "completion_mask")}
    hidden = model.get_decoder()(**features, use_cache=False).last_hidden_state
    # Position t predicts token t + 1 (the shift the model's own loss makes).
    targets = labels[:, 1:]
    keep = targets != IGNORE
    own_head = getattr(model, "completion_log_probs", None)
    if own_head is not None:  # a head that is more than the output projection (copy_head.py)
        attention_mask = features.get("attention_mask")
        logits = own_head(hidden, features["input_ids"], attention_mask, keep)
    else:
        logits = model.get_output_embeddings()(hidden[:, :-1][keep]).float()
    total = F.cross_entropy(logits, targets[keep], reduction="sum")
    if num_items_in_batch is None:
        return total / keep.sum().clamp(min=1)
    if hasattr(num_items_in_batch, "to"):
        num_items_in_batch = num_items_in_batch.to(total.device)
    return total / num_items_in_batch
