"""How far RL has moved the policy from SFT: the exact KL on the policy's own samples.

On a fixed set of probe states (drawn once, seeded), the current policy samples one
completion per state at temperature 1; at every completion position the KL between the
two next-token distributions is summed over the whole vocabulary,
    KL_t = sum_v p(v) (log p(v) - log q(v)),   p: current policy, q: the SFT policy,
and the result is the mean over all completion tokens. Exact per position (not the k3
estimate the loss uses), so a small drift is not lost in sampling noise; the contexts
are the policy's own, as the reverse KL the loss penalises.

The SFT policy is the trainer's reference: the adapters switched off (LoRA) or a frozen
copy (full fine-tune). The same samples also give the policy's exact per-token entropy,
    H_t = -sum_v p(v) log p(v),
averaged the same way (at temperature 1): a collapsing policy shows as entropy falling
towards 0, a policy kept near SFT by the KL as entropy staying near its start. The
entropy needs no reference, so it is measured also when the KL is off.

Memory: the probe samples and scores in micro-batches of rl.micro_batch_size states (all
at once only when that is unset), so its peak is one micro-batch's KV cache and two
completion logits, not the whole probe set's (64 states of 13k tokens at once would
hold ~117 GiB of KV cache on paper-8b). Under torchrun the micro-batches are dealt to
the ranks (ranks.py: every rank makes the same number of calls) and the sums of KL,
entropy and tokens are all-reduced, so every rank gets the same figures.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import Any

from rmsweb.train.salvage_ds.batch import cut_at_stop
from rmsweb.train.salvage_ds.seeds import derived_seed


def probe_indices(n_states: int, k: int, seed: int) -> list[int]:
    """k state indices (all when k >= n_states), the same for the whole run."""
    if k >= n_states:
        return list(range(n_states))
    return sorted(random.Random(seed).sample(range(n_states), k))


def kl_sums(logits: Any, ref_logits: Any, mask: Any) -> tuple[float, float]:
    """(sum over masked positions of sum_v p (log p - log q), positions); logits (B, T, V)."""
    import torch

    logp = torch.log_softmax(logits.float(), dim=-1)
    logq = torch.log_softmax(ref_logits.float(), dim=-1)
    per_pos = (logp.exp() * (logp - logq)).sum(dim=-1)
    return float((per_pos * mask).sum()), float(mask.sum())


def entropy_sums(logits: Any, mask: Any) -> tuple[float, float]:
    """(sum over masked positions of -sum_v p log p, positions); logits (B, T, V)."""
    import torch

    logp = torch.log_softmax(logits.float(), dim=-1)
    per_pos = -(logp.exp() * logp).sum(dim=-1)
    return float((per_pos * mask).sum()), float(mask.sum())


def exact_kl(logits: Any, ref_logits: Any, mask: Any) -> float:
    """Mean over masked positions of sum_v p (log p - log q); logits (B, T, V), mask (B, T)."""
    total, n = kl_sums(logits, ref_logits, mask)
    return total / n if n else float("nan")


def exact_entropy(logits: Any, mask: Any) -> float:
    """Mean over masked positions of -sum_v p log p; logits (B, T, V), mask (B, T)."""
    total, n = entropy_sums(logits, mask)
    return total / n if n else float("nan")


def completion_logits(model: Any, batch: dict[str, Any]) -> Any:
    """Logits predicting each completion token (B, Tc, V), as completion_logps slices them."""
    n = batch["n_completion"]
    inputs = {k: v for k, v in batch.items() if k not in ("loss_mask", "n_completion")}
    out = model(**inputs, logits_to_keep=n + 1, use_cache=False)
    return out.logits[:, :-1, :]


def measure(
    sample: Callable[[Sequence[int]], tuple[dict[str, Any], Any]],
    policy: Any,
    reference: Callable[[dict[str, Any]], Any] | None,
    indices: Sequence[int],
    micro_batch: int | None = None,
) -> dict[str, float]:
    """The module's KL and entropy on `indices`: `sample` returns a batch of the policy's
    completions (with loss_mask) for some of them; `reference(batch)` the SFT policy's
    completion logits (None: no reference, the KL is NaN). In micro-batches of
    `micro_batch` indices (None: all at once), dealt to the ranks; the sums are
    all-reduced on every rank, whatever its share."""
    import torch

    from rmsweb.train.salvage_ds import ranks

    nan = float("nan")
    if not indices:
        return {"kl_to_sft": nan, "entropy": nan}
    world = ranks.rank_world()[1]
    chunk = micro_batch or math.ceil(len(indices) / world)
    starts = list(range(0, len(indices), chunk))
    sums = [0.0, 0.0, 0.0]  # KL sum, entropy sum, positions
    for c in ranks.my_chunks(len(starts)):
        first = starts[c] if c is not None else 0  # None: a padding call, dropped
        batch, mask = sample(indices[first : first + chunk])
        with torch.no_grad():
            logits = completion_logits(policy, batch)
            ref = reference(batch) if reference is not None else None
        if c is None:
            continue
        ent, n = entropy_sums(logits, mask)
        sums[1] += ent
        sums[2] += n
        if ref is not None:
            sums[0] += kl_sums(logits, ref, mask)[0]
        del logits, ref
    kl, ent, n = ranks.sum_floats(*sums)  # unconditional: every rank
    return {
        "kl_to_sft": kl / n if n and reference is not None else nan,
        "entropy": ent / n if n else nan,
    }


def kl_to_sft(trainer: Any) -> float:
    """The KL of a SalvageDSTrainer's current policy to its start (NaN when off)."""
    return probe_policy(trainer)["kl_to_sft"]


def probe_policy(trainer: Any) -> dict[str, float]:
    """KL to SFT (NaN without a reference) and entropy of a SalvageDSTrainer's current
    policy on its probe states (both NaN when rl.kl_probe_states is 0), in micro-batches
    of rl.micro_batch_size states."""
    import torch

    h = trainer.h
    nan = float("nan")
    if not h.kl_probe_states:
        return {"kl_to_sft": nan, "entropy": nan}
    has_ref = trainer.ref_model is not None or trainer.is_peft
    indices = probe_indices(len(trainer.states), h.kl_probe_states, derived_seed(h.seed, "kl"))
    position = {i: k for k, i in enumerate(indices)}

    def sample(idx: Sequence[int]) -> tuple[dict[str, Any], Any]:
        prompts = [trainer.encode(i) for i in idx]
        batch = trainer.collate(prompts)
        batch.pop("n_completion")
        # The same draws each time; each micro-batch seeded by its first state's position.
        k = position.get(idx[0], 0)
        torch.manual_seed(derived_seed(h.seed, "kl-sample", *((k,) if k else ())))
        trainer.model.eval()
        from rmsweb.train.sharding import gathered

        with gathered(trainer.model), torch.inference_mode():  # fsdp: no collective inside
            seqs = trainer.model.generate(
                **batch,
                max_new_tokens=h.max_new_tokens,
                do_sample=True,
                temperature=1.0,
                top_k=0,
                top_p=1.0,
                pad_token_id=trainer.tokenizer.pad_token_id,
                eos_token_id=sorted(trainer.stop_ids),
                suppress_tokens=trainer.vision_ids or None,  # trainer.vision_token_ids
            )
        new = seqs[:, batch["input_ids"].shape[1] :].tolist()
        comps = [cut_at_stop(ids, trainer.stop_ids) for ids in new]
        full = trainer.collate(prompts, comps, [[1.0] * len(c) for c in comps])
        return full, full["loss_mask"]

    def reference(batch: dict[str, Any]) -> Any:
        if trainer.is_peft:
            with trainer.model.disable_adapter():
                return completion_logits(trainer.model, batch)
        return completion_logits(trainer.ref_model, batch)

    return measure(
        sample,
        trainer.model,
        reference if has_ref else None,
        indices,
        micro_batch=h.micro_batch_size,
    )
