"""The continued-SFT control: RL's states and draws, the SFT loss instead of rewards.

Is the RL stage more than extra supervised data? This control trains on exactly what
the RL arm sees, minus the sampling:
1. Each step draws batch_size / group_size states with the RL trainer's own weighted
   draw (same weights, same seeds: at step k it holds the states the RL arm samples
   groups for at step k, first round).
2. The loss is SFT's: the mean NLL over the tokens of each state's first reference
   action completion ("Action: <reference>" + end of turn), at temperature 1.
3. Same optimizer, learning-rate schedule, clipping, checkpoints and KL probe as RL;
   nothing is generated, so the curve's reward and gate columns stay empty.
"""

from __future__ import annotations

import math
import time
from typing import Any

from rmsweb.env.actions import format_action
from rmsweb.train.salvage_ds.batch import anchor_completion
from rmsweb.train.salvage_ds.seeds import derived_seed
from rmsweb.train.salvage_ds.trainer import CURVE_COLUMNS, SalvageDSTrainer


class ContinuedSFTTrainer(SalvageDSTrainer):
    """SalvageDSTrainer with train_step replaced by supervised steps (module doc)."""

    def sft_backward(self, indices: list[int], backward: bool = True) -> tuple[float, float]:
        """Accumulate the gradient of the mean completion NLL (backward=False: only
        compute it); (loss, tokens)."""
        from rmsweb.train.salvage_ds.loss import action_anchor

        seqs = []
        for i in indices:
            ids, _ = anchor_completion(self.tokenizer, format_action(self.references[i][0]))
            seqs.append((i, ids))
        tokens = float(sum(len(ids) for _, ids in seqs))
        chunk = self.h.micro_batch_size or len(seqs)
        total = 0.0
        self.model.train()
        for start in range(0, len(seqs), chunk):
            part = seqs[start : start + chunk]
            batch = self.collate(
                [self.encode(i) for i, _ in part],
                [ids for _, ids in part],
                [[1.0] * len(ids) for _, ids in part],  # the whole completion, as SFT
            )
            logps = self._logps(self.model, batch, temperature=1.0)
            nll, _ = action_anchor(logps, batch["loss_mask"], normalizer=tokens)
            if backward:
                nll.backward()
            total += float(nll.detach())
        return total, tokens

    def train_step(self, step: int) -> dict[str, Any]:
        import torch

        h = self.h
        t0 = time.perf_counter()
        indices = self.draw_states(step, 0, h.groups_per_step, set())
        self.optimizer.zero_grad(set_to_none=True)
        torch.manual_seed(derived_seed(h.seed, "train", step))
        loss, _ = self.sft_backward(indices)
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.params, h.max_grad_norm))
        lr = self.learning_rate(step)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        t1 = time.perf_counter()
        self.train_s += t1 - t0
        row: dict[str, Any] = {c: math.nan for c in CURVE_COLUMNS}
        row.update(
            step=step,
            groups=len(indices),
            accepted=0,
            rejected=0,
            anchor_loss=loss,
            loss=loss,
            grad_norm=grad_norm,
            samples_generated=0,
            resample_rounds=0,
            updated=1,
            learning_rate=lr,
            generate_s=0.0,
            train_s=round(t1 - t0, 4),
        )
        for reason in [c for c in CURVE_COLUMNS if c.startswith("reason_")]:
            row[reason] = 0
        self.curve.append(row)
        return row
