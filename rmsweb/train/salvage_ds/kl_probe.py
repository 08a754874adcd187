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
"""

from __future__ import annotations

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


def exact_kl(logits: Any, ref_logits: Any, mask: Any) -> float:
    """Mean over masked positions of sum_v p (log p - log q); logits (B, T, V), mask (B, T)."""
    import torch

    logp = torch.log_softmax(logits.float(), dim=-1)
    logq = torch.log_softmax(ref_logits.float(), dim=-1)
    per_pos = (logp.exp() * (logp - logq)).sum(dim=-1)
    n = float(mask.sum())
    return float((per_pos * mask).sum() / n) if n else float("nan")


def exact_entropy(logits: Any, mask: Any) -> float:
    """Mean over masked positions of -sum_v p log p; logits (B, T, V), mask (B, T)."""
    import torch

    logp = torch.log_softmax(logits.float(), dim=-1)
    per_pos = -(logp.exp() * logp).sum(dim=-1)
    n = float(mask.sum())
    return float((per_pos * mask).sum() / n) if n else float("nan")


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
) -> dict[str, float]:
    """The module's KL and entropy on `indices`: `sample` returns a batch of the policy's
    completions (with loss_mask) for them; `reference(batch)` the SFT policy's completion
    logits (None: no reference, the KL is NaN)."""
    import torch

    nan = float("nan")
    if not indices:
        return {"kl_to_sft": nan, "entropy": nan}
    batch, mask = sample(indices)
    with torch.no_grad():
        logits = completion_logits(policy, batch)
        ref = reference(batch) if reference is not None else None
    return {
        "kl_to_sft": exact_kl(logits, ref, mask) if ref is not None else nan,
        "entropy": exact_entropy(logits, mask),
    }


def kl_to_sft(trainer: Any) -> float:
    """The KL of a SalvageDSTrainer's current policy to its start (NaN when off)."""
    return probe_policy(trainer)["kl_to_sft"]


def probe_policy(trainer: Any) -> dict[str, float]:
    """KL to SFT (NaN without a reference) and entropy of a SalvageDSTrainer's current
    policy on its probe states (both NaN when rl.kl_probe_states is 0)."""
    import torch

    h = trainer.h
    nan = float("nan")
    if not h.kl_probe_states:
        return {"kl_to_sft": nan, "entropy": nan}
    has_ref = trainer.ref_model is not None or trainer.is_peft
    indices = probe_indices(len(trainer.states), h.kl_probe_states, derived_seed(h.seed, "kl"))

    def sample(idx: Sequence[int]) -> tuple[dict[str, Any], Any]:
        prompts = [trainer.encode(i) for i in idx]
        batch = trainer.collate(prompts)
        batch.pop("n_completion")
        torch.manual_seed(derived_seed(h.seed, "kl-sample"))  # the same draws each time
        trainer.model.eval()
        with torch.inference_mode():
            seqs = trainer.model.generate(
                **batch,
                max_new_tokens=h.max_new_tokens,
                do_sample=True,
                temperature=1.0,
                top_k=0,
                top_p=1.0,
                pad_token_id=trainer.tokenizer.pad_token_id,
                eos_token_id=sorted(trainer.stop_ids),
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

    return measure(sample, trainer.model, reference if has_ref else None, indices)
