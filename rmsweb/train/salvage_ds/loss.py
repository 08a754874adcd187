"""The two loss terms of Salvage-DS and the log-probabilities they are computed from.

    loss = PG(accepted groups) + anchor_weight * NLL_action(rejected groups)

PG is GRPO's clipped surrogate with group-normalised advantages, aggregated over tokens
(every completion token of the accepted groups weighs the same: DAPO's "token-level"
aggregation, TRL's loss_type="dapo"), plus an optional k3 KL to a frozen reference.
NLL_action is the mean negative log-likelihood of the reference action's tokens only.

Both terms are sums over tokens divided by a `normalizer` the caller passes: the token
count of the whole step, so that a step split into micro-batches accumulates exactly the
gradient of the unsplit step (sum of parts / total = mean of the whole). Each function
returns the loss tensor and detached diagnostics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

ADV_EPS = 1e-4  # as TRL: advantages = (r - mean) / (std + 1e-4)


def group_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """(groups, G) rewards -> (groups, G) advantages (r - mean_group) / (std_group + 1e-4).

    std is Bessel-corrected (TRL's nanstd). A group whose rewards are all equal gets
    advantages 0: it adds tokens to the normaliser but no gradient (plain GRPO).
    """
    mean = rewards.mean(dim=1, keepdim=True)
    std = rewards.std(dim=1, keepdim=True)  # unbiased, like TRL
    return (rewards - mean) / (std + ADV_EPS)


@dataclass(frozen=True)
class PGStats:
    """Detached sums over the masked tokens; divide by `tokens` for means."""

    per_sequence_loss: torch.Tensor  # (B,) sum of per-token losses of each sequence
    per_sequence_tokens: torch.Tensor  # (B,)
    tokens: float
    clipped_tokens: float  # tokens where the clip was active (TRL's clip_ratio/region)
    kl_sum: float  # sum of per-token k3 KL (0 when there is no reference)


def clipped_surrogate(
    logps: torch.Tensor,
    old_logps: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    epsilon: float,
    epsilon_high: float,
    normalizer: float,
    beta: float = 0.0,
    ref_logps: torch.Tensor | None = None,
    kl_rows: torch.Tensor | None = None,
) -> tuple[torch.Tensor, PGStats]:
    """Token-level clipped surrogate (+ beta * KL) of one micro-batch.

    logps, old_logps, ref_logps, mask: (B, T) over completion positions; advantages (B,).
    Per token, with ratio r = exp(logp - logp_old) and advantage A:
        loss_t = -min(r * A, clip(r, 1 - epsilon, 1 + epsilon_high) * A) + beta * r * kl_t
        kl_t   = exp(ref - logp) - (ref - logp) - 1      (k3: unbiased, >= 0)
    and the returned loss is sum_t(mask * loss_t) / normalizer.

    Why r * kl_t: the tokens were sampled from the policy itself, so the KL's gradient
    has a score-function part, kl_t * grad(logp), that differentiating k3 alone misses.
    Multiplying by r (value 1 on-policy, gradient r * grad(logp)) adds exactly that part:
    grad(r * kl_t) = grad(kl_t) + kl_t * grad(logp) at r = 1, the unbiased gradient of
    reverse KL (DeepSeek-V3.2; TRL's default use_bias_correction_kl=True).

    kl_rows (B,), 1 or 0: the rows the KL term applies to (None: all). k3 estimates the KL
    from tokens the policy sampled; on a row it did not sample (salvage_ds_expert's
    reference member) exp(ref - logp) is unbounded where the policy has moved away from
    a token the reference model liked (measured: a loss of 9e7 at step 98).
    """
    import torch

    adv = advantages.unsqueeze(1)
    ratio = torch.exp(logps - old_logps)
    clipped_ratio = torch.clamp(ratio, 1 - epsilon, 1 + epsilon_high)
    per_token = -torch.min(ratio * adv, clipped_ratio * adv)
    kl = torch.zeros_like(logps)
    if beta != 0.0:
        if ref_logps is None:
            raise ValueError("beta > 0 needs the reference model's log-probabilities")
        delta = ref_logps - logps
        kl = torch.exp(delta) - delta - 1
        if kl_rows is not None:
            kl = kl * kl_rows.to(kl.dtype).unsqueeze(1)
        per_token = per_token + beta * kl * ratio
    masked = per_token * mask
    loss = masked.sum() / normalizer
    # The clip binds (zero gradient) where the ratio left the trust region in the
    # direction the advantage pushes it.
    clipped = ((ratio < 1 - epsilon) & (adv < 0)) | ((ratio > 1 + epsilon_high) & (adv > 0))
    stats = PGStats(
        per_sequence_loss=masked.detach().sum(dim=1),
        per_sequence_tokens=mask.detach().sum(dim=1),
        tokens=float(mask.sum()),
        clipped_tokens=float((clipped.float() * mask).sum()),
        kl_sum=float((kl.detach() * mask).sum()),
    )
    return loss, stats


@dataclass(frozen=True)
class AnchorStats:
    per_sequence_nll: torch.Tensor  # (B,) summed NLL of each sequence's action tokens
    per_sequence_tokens: torch.Tensor  # (B,)
    tokens: float


def action_anchor(
    logps: torch.Tensor, action_mask: torch.Tensor, *, normalizer: float
) -> tuple[torch.Tensor, AnchorStats]:
    """Negative log-likelihood of the action tokens: -sum(mask * logp) / normalizer.

    The mask covers the reference action's tokens only: not the prompt, not a thought,
    not the "Action:" marker, not the end-of-turn token (see trainer.anchor_completion).
    """
    nll = -(logps * action_mask)
    stats = AnchorStats(
        per_sequence_nll=nll.detach().sum(dim=1),
        per_sequence_tokens=action_mask.detach().sum(dim=1),
        tokens=float(action_mask.sum()),
    )
    return nll.sum() / normalizer, stats


def completion_logps(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    n_completion: int,
    temperature: float,
    **model_inputs: Any,
) -> torch.Tensor:
    """Per-token log-probabilities of the last `n_completion` tokens of each row.

    Logits are divided by the sampling temperature (as TRL does), so the ratio compares
    the distribution the completions were actually drawn from. Only the last
    n_completion + 1 positions are projected to the vocabulary (`logits_to_keep`).
    """
    import torch

    out = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        logits_to_keep=n_completion + 1,
        use_cache=False,
        **model_inputs,
    )
    # Position t predicts token t + 1: drop the last position's logits.
    logits = out.logits[:, :-1, :].float() / temperature
    targets = input_ids[:, -n_completion:]
    picked = torch.gather(logits, -1, targets.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)
