"""Salvage-DS: group-relative RL on mined web states; GRPO and DAPO-DS are settings of it.

How this departs from textbook GRPO (DeepSeekMath: per prompt sample G outputs, reward
them, normalise rewards within the group, maximise a clipped surrogate with a KL penalty,
mu inner updates per batch):

1. Reward: action-semantic and polarized (reward.py): +1 when the parsed action is
   semantically a reference action, -1 for anything else (unparseable included). No
   partial credit, so a well-formatted wrong click never outscores another wrong action.
2. Gate (gate.py): a group drives the policy gradient only with contrast (right and
   wrong samples, std >= min_std) and within the policy's competence (fraction correct
   in [competence_min, competence_max]). Every group is logged with its reason.
3. Anchor: a rejected group is not thrown away: its state adds anchor_weight x the NLL
   of the reference action's tokens (not the prompt, not a thought, not "Action:").
       loss = PG(accepted) + anchor_weight * NLL_action(rejected)   [+ beta * KL in PG]
4. Token-level aggregation (DAPO, TRL loss_type="dapo"): PG is a mean over all completion
   tokens of the accepted groups, not a mean of per-sequence means; clip-higher
   (epsilon_high > epsilon) as in DAPO.
5. Dynamic sampling (dapo_ds; salvage_ds when max_resample > 0): when fewer groups pass
   the gate than the batch holds, the shortfall is drawn again from new states, at most
   max_resample rounds. A step still short trains on what it has; with no usable group
   at all it makes no update but still counts: training never stalls (verl's DAPO filter
   raises once it runs out of generation batches).
6. On-policy, one optimizer step per generated batch (mu = 1, TRL's default): the old
   log-probabilities are the current ones detached, so the ratio is 1 at the update and
   the clip reports 0. The clip still matters once a batch is reused (mu > 1, not here).
7. Offline states: the environment is not stepped. A state is a mined (critical, fragile
   or routine) step with its reference action(s); one completion is one action. States
   are drawn by their criticality weight (weighted sampling without replacement within
   a step); a step's groups are distinct states while the pool allows.
8. The KL reference is the frozen start (the SFT checkpoint); with LoRA it is the same
   network with the adapters switched off, so it costs no second copy. KL is the k3
   estimator times the importance ratio (value 1, but its gradient adds the
   score-function term textbook GRPO drops; TRL's default). Logits are divided by the
   sampling temperature before log-softmax, as TRL does.

Settings per kind (`algorithm()`): grpo = no gate, no anchor, no resampling;
dapo_ds = gate, no anchor, resampling; salvage_ds = gate (may be off) + anchor, and
max_resample (default 0) so both readings of "gated dynamic sampling" run;
salvage_ds_expert = salvage_ds with an expert member: a group none of whose samples is
right gets its state's first reference action in place of its last sample, before the
gate (BREAD, LUFFY and ReLIFT put expert solutions into such groups). Where the policy
never samples the right action, the group then has contrast: the reference is pushed up
and the sampled wrong actions are pushed down, instead of the anchor's NLL alone. The
reference is the mined state's label, the same one the anchor and continued SFT train
on. With the gate off and anchor_weight 0, salvage_ds computes GRPO's loss exactly
(tests/train, against TRL's GRPOTrainer._compute_loss).

Determinism and resume: every random draw is seeded from (seed, step, round), and a
checkpoint (every save_steps) holds the trainable weights, optimizer, RNG
states and the logs so far; a run killed at any point resumes from the last checkpoint
and reproduces the same following losses. Under torchrun sampling is done once, each chunk
by one rank, and gathered; each rank backpropagates its share of the sequences and the
gradients are summed; every collective runs on every rank (ranks.py); rank 0 writes.
With sharding "fsdp" (compute.sharding) the model, LoRA adapters included, is sharded over
the ranks by FSDP2 (train/sharding.py): generation runs on the whole model gathered once,
the gradients are summed by FSDP's reduce-scatter, and checkpoints hold whole tensors.
"""

from __future__ import annotations

import copy
import math
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmsweb.env.actions import format_action
from rmsweb.train import sharding as fsdp
from rmsweb.train.salvage_ds import ranks
from rmsweb.train.salvage_ds.batch import (
    EncodedPrompt,
    anchor_completion,
    collate,
    cut_at_stop,
    encode_prompt,
)
from rmsweb.train.salvage_ds.checkpoint import load_checkpoint, save_checkpoint, sharded_state
from rmsweb.train.salvage_ds.gate import REASONS, GateDecision, GroupStats, gate, group_stats
from rmsweb.train.salvage_ds.kl_probe import probe_policy
from rmsweb.train.salvage_ds.memory import update_checkpointing
from rmsweb.train.salvage_ds.optim import adamw, freeze_embeddings, trainable
from rmsweb.train.salvage_ds.reward import Scored, invert, parse_references, score
from rmsweb.train.salvage_ds.seeds import derived_seed
from rmsweb.train.salvage_ds.states import RLState

KINDS: tuple[str, ...] = ("grpo", "dapo_ds", "salvage_ds", "salvage_ds_expert", "continued_sft")


@dataclass(frozen=True)
class Algorithm:
    """What a kind does with groups: gate them, anchor the rejected ones, resample."""

    kind: str
    gate: bool
    anchor_weight: float
    max_resample: int
    expert_member: bool = False  # all-wrong groups get the reference as a member


def algorithm(
    kind: str, *, gate: bool = True, anchor_weight: float = 0.0, max_resample: int = 0
) -> Algorithm:
    """The effective settings of a kind; a kind's fixed choices win over the arguments."""
    if kind == "grpo":
        return Algorithm(kind, gate=False, anchor_weight=0.0, max_resample=0)
    if kind == "dapo_ds":
        return Algorithm(kind, gate=True, anchor_weight=0.0, max_resample=max_resample)
    if kind in ("salvage_ds", "salvage_ds_expert"):
        return Algorithm(
            kind,
            gate=gate,
            anchor_weight=anchor_weight,
            max_resample=max_resample,
            expert_member=kind == "salvage_ds_expert",
        )
    if kind == "continued_sft":  # the control: no sampling at all (continued_sft.py)
        return Algorithm(kind, gate=False, anchor_weight=0.0, max_resample=0)
    raise ValueError(f"unknown RL kind {kind!r}; kinds: {', '.join(KINDS)}")


@dataclass(frozen=True)
class RLHyper:
    """Plain training arguments (the stage unpacks the spec into these)."""

    steps: int
    group_size: int
    batch_size: int  # completions per optimizer step (a multiple of group_size)
    learning_rate: float
    algorithm: Algorithm
    warmup_ratio: float = 0.0
    epsilon: float = 0.2
    epsilon_high: float = 0.28
    beta: float = 0.0
    temperature: float = 1.0
    max_grad_norm: float = 1.0
    reward_kind: str = "polarized"
    similarity_tau: float = 1.0
    format_bonus: float = 0.1
    min_std: float = 0.1
    competence_min: float = 0.125
    competence_max: float = 0.875
    save_steps: int = 50
    max_new_tokens: int = 48
    micro_batch_size: int | None = None  # sequences per forward/generate (None: all at once)
    gradient_checkpointing: bool = False  # in the update only (memory.py)
    reward_sign: float = 1.0  # -1: the canary, every reward inverted
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-8
    weight_decay: float = 0.0
    freeze_embeddings: bool = False
    kl_probe_states: int = 0  # states the KL to SFT is measured on (kl_probe.py; 0: off)
    seed: int = 0
    log_every: int = 0  # progress line every N steps on stderr (0: about 20 lines a run)

    def __post_init__(self) -> None:
        if self.group_size < 2 or self.batch_size % self.group_size:
            raise ValueError(
                f"batch_size {self.batch_size} must be a multiple of group_size "
                f"{self.group_size} >= 2"
            )

    @property
    def groups_per_step(self) -> int:
        return self.batch_size // self.group_size


# --------------------------------------------------------------------------- data


@dataclass
class Group:
    """The G completions of one state in one step, scored and gated."""

    state_index: int
    state_id: str
    prompt: EncodedPrompt
    completions: list[list[int]]  # sampled token ids, each ending with its stop token if any
    texts: list[str]
    scored: list[Scored]
    stats: GroupStats
    decision: GateDecision
    resample_round: int = 0
    anchor_ids: list[int] | None = None  # "Action: <reference>" + end of turn
    anchor_mask: list[int] | None = None  # 1 on the reference action's tokens only
    expert_member: bool = False  # its last member is the reference, not a sample
    sampled_rewards: list[float] | None = None  # the G samples' own (before the member)

    @property
    def rewards(self) -> list[float]:
        return [s.reward for s in self.scored]


@dataclass
class StepLosses:
    """What one loss-and-backward pass computed (floats; NaN where a term is absent)."""

    loss: float  # the value whose gradient was accumulated
    pg_loss: float
    anchor_loss: float  # unweighted mean NLL per action token
    kl: float  # mean per-token k3 KL over PG tokens (NaN when beta == 0)
    clip_fraction: float
    pg_tokens: float
    anchor_tokens: float
    group_pg_loss: dict[int, float] = field(default_factory=dict)  # by position in pg groups
    group_anchor_loss: dict[int, float] = field(default_factory=dict)


@dataclass
class TrainResult:
    curve: list[dict[str, Any]]  # one row per step (see CURVE_COLUMNS)
    groups: list[dict[str, Any]]  # one RLGroupRow-shaped dict per group
    resumed_from: int  # step of the checkpoint the run continued from (0: fresh)
    wall_s: float
    generate_s: float
    train_s: float


CURVE_COLUMNS: tuple[str, ...] = (
    "step",
    "reward_mean",
    "reward_std",
    "accepted_fraction",
    "groups",
    "accepted",
    "rejected",
    "pg_loss",
    "anchor_loss",
    "loss",
    "kl",
    "clip_fraction",
    "grad_norm",
    "samples_generated",
    "completion_tokens",
    "resample_rounds",
    "updated",
    "learning_rate",
    "generate_s",
    "train_s",
    "kl_to_sft",  # at checkpoints and the last step (kl_probe.py); empty elsewhere
    "entropy",  # the policy's exact token entropy on the probe states, as kl_to_sft
    "expert_members",  # groups whose last member is the reference (salvage_ds_expert)
    *(f"reason_{r}" for r in REASONS),
)


# --------------------------------------------------------------------------- trainer


# Tokens that stand for image patches. A sampled completion must never hold one: the
# next forward pass over prompt + completion would count it as an image token with no
# image feature behind it ("Image features and image tokens do not match"). A
# pretrained model does not emit them; a tiny random one sampling at temperature 1 can.
VISION_TOKENS = ("<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>")


def vision_token_ids(tokenizer: Any) -> list[int]:
    """The ids of VISION_TOKENS that `tokenizer` knows (none for a plain text tokenizer)."""
    vocab = tokenizer.get_vocab()
    return sorted({vocab[t] for t in VISION_TOKENS if t in vocab})


class SalvageDSTrainer:
    """Group-relative RL on a fixed list of states (see the module docstring).

    model/tokenizer/processor: a loaded policy (rmsweb.models.load.load_model); the model
    is trained in place (wrapped with LoRA adapters when `lora` is given). work_dir holds
    the checkpoints; a run finds the last one there and continues from it.
    """

    sampler: Any = None  # rl.sampler vllm: a VLLMSampler (vllm_sampler.py); None: HF generate

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        states: Sequence[RLState],
        hyper: RLHyper,
        work_dir: Path,
        *,
        processor: Any = None,
        is_vl: bool = False,
        lora: dict[str, Any] | None = None,
        on_step: Callable[[dict[str, Any]], None] | None = None,
        sharding: str = "none",
    ) -> None:
        import torch

        if not states:
            raise ValueError("no RL states to train on")
        self.tokenizer = tokenizer
        self.processor = processor if processor is not None else tokenizer
        self.is_vl = is_vl
        self.states = list(states)
        self.h = hyper
        self.work_dir = Path(work_dir)
        self.on_step = on_step
        self.references = [
            parse_references(s.references, f"state {s.state_id!r}") for s in self.states
        ]
        if lora:
            from peft import LoraConfig, get_peft_model

            torch.manual_seed(derived_seed(hyper.seed, "lora"))  # adapter init
            model = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", **lora))
        self.model = model
        self.is_peft = bool(lora)
        # The KL reference (loss and probe): the frozen start. LoRA: adapters off.
        self.ref_model = None
        if (hyper.beta > 0 or hyper.kl_probe_states) and not self.is_peft:
            self.ref_model = copy.deepcopy(model).eval()
            for p in self.ref_model.parameters():
                p.requires_grad_(False)
        if hyper.freeze_embeddings:
            freeze_embeddings(self.model)
        self.lora = dict(lora) if lora else None
        self.sharded = fsdp.check(sharding) == "fsdp"
        if self.sharded:  # FSDP2 over every rank (train/sharding.py); names unchanged
            fsdp.shard(self.model)
            if self.ref_model is not None:
                fsdp.shard(self.ref_model)
        self.params = trainable(self.model)
        self.optimizer = adamw(
            self.params,
            learning_rate=hyper.learning_rate,
            betas=(hyper.adam_beta1, hyper.adam_beta2),
            eps=hyper.adam_eps,
            weight_decay=hyper.weight_decay,
        )
        self.warmup_steps = int(hyper.warmup_ratio * hyper.steps)
        self._prompts: dict[int, EncodedPrompt] = {}
        self.step = 0
        self.curve: list[dict[str, Any]] = []
        self.group_log: list[dict[str, Any]] = []
        self.generate_s = 0.0
        self.train_s = 0.0
        stop = {tokenizer.eos_token_id, tokenizer.pad_token_id}
        eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        stop |= set(eos if isinstance(eos, list) else [eos])
        self.stop_ids = {t for t in stop if t is not None}
        self.vision_ids = vision_token_ids(tokenizer)  # never sampled (vision_token_ids)

    # ------------------------------------------------------------------ prompts

    def encode(self, index: int) -> EncodedPrompt:
        """The chat-templated prompt of a state as model inputs (cached)."""
        if index not in self._prompts:
            state = self.states[index]
            self._prompts[index] = encode_prompt(
                self.tokenizer, self.processor, self.is_vl, state.messages, state.image
            )
        return self._prompts[index]

    def collate(
        self,
        prompts: Sequence[EncodedPrompt],
        completions: Sequence[Sequence[int]] = (),
        masks: Sequence[Sequence[float]] = (),
    ) -> dict[str, Any]:
        return collate(prompts, self.tokenizer.pad_token_id, self._device(), completions, masks)

    def _device(self) -> Any:
        return next(self.model.parameters()).device

    # ------------------------------------------------------------------ sampling

    def draw_states(self, step: int, round_: int, n: int, exclude: set[int]) -> list[int]:
        """n state indices by weight, without replacement (Efraimidis-Spirakis keys).

        Each state gets key u^(1/w) with u ~ U(0, 1); the n largest keys are a weighted
        sample without replacement. States already used this step are drawn only when
        the pool has too few others; weight-0 states never.
        """
        rng = random.Random(derived_seed(self.h.seed, "states", step, round_))
        keys = []
        for i, s in enumerate(self.states):
            u = rng.random()
            if s.weight > 0:
                keys.append((i in exclude, -(u ** (1.0 / s.weight)), i))
        if not keys:
            raise ValueError("every RL state has weight 0: nothing can be drawn")
        keys.sort()
        picked = [i for _, _, i in keys[:n]]
        while len(picked) < n:  # a pool smaller than a batch: repeat states
            picked.append(keys[len(picked) % len(keys)][2])
        return picked

    def generate(self, indices: Sequence[int], step: int, round_: int) -> list[list[int]]:
        """group_size sampled completions per state index, in order (token ids)."""
        if self.sampler is not None:  # vLLM with the current LoRA adapter (vllm_sampler.py)
            return self.sampler.sample(self, indices, step, round_)
        import torch

        prompts = [self.encode(i) for i in indices for _ in range(self.h.group_size)]
        # Global chunks, seeded by their index (as one process cuts them); chunk c is
        # sampled by rank c mod N and every rank gathers them all (ranks.py).
        world = ranks.rank_world()[1]
        chunk = self.h.micro_batch_size or math.ceil(len(prompts) / world) or 1
        starts = list(range(0, len(prompts), chunk))
        tok = self.tokenizer
        mine: dict[int, list[list[int]]] = {}
        self.model.eval()
        for c in ranks.my_chunks(len(starts)):
            # None: a padding call (this rank's share ran out), so every rank generates
            # equally often; its samples are dropped.
            first = starts[c] if c is not None else 0
            batch = self.collate(prompts[first : first + chunk])
            batch.pop("n_completion")
            torch.manual_seed(derived_seed(self.h.seed, "generate", step, round_, c or 0))
            # fsdp: the whole model gathered once; generate then runs no collective.
            with fsdp.gathered(self.model), torch.inference_mode():
                seqs = self.model.generate(
                    **batch,
                    max_new_tokens=self.h.max_new_tokens,
                    do_sample=True,
                    temperature=self.h.temperature,
                    top_k=0,
                    top_p=1.0,
                    pad_token_id=tok.pad_token_id,
                    eos_token_id=sorted(self.stop_ids),
                    suppress_tokens=self.vision_ids or None,
                )
            if c is not None:
                new = seqs[:, batch["input_ids"].shape[1] :].tolist()
                mine[c] = [cut_at_stop(ids, self.stop_ids) for ids in new]
        gathered = ranks.gather(mine)  # every rank, every step: unconditional
        return [ids for c in range(len(starts)) for ids in gathered[c]]

    def rollout(self, indices: Sequence[int], step: int, round_: int) -> list[Group]:
        """Sample, score and gate one group per state index."""
        h = self.h
        completions = self.generate(indices, step, round_)
        groups = []
        for k, idx in enumerate(indices):
            comps = completions[k * h.group_size : (k + 1) * h.group_size]
            texts = [self.completion_text(c) for c in comps]
            scored = [self.score_text(idx, t) for t in texts]
            sampled = scored
            expert = h.algorithm.expert_member and not any(x.correct for x in scored)
            if expert:
                comps, texts, scored = self.with_expert_member(idx, comps, texts, scored)
            if h.reward_sign < 0:
                scored = [invert(x) for x in scored]
                sampled = [invert(x) for x in sampled]
            group = self.make_group(idx, comps, texts, scored, round_)
            group.expert_member = expert
            group.sampled_rewards = [x.reward for x in sampled]
            groups.append(group)
        return groups

    def with_expert_member(
        self, index: int, completions: list[list[int]], texts: list[str], scored: list[Scored]
    ) -> tuple[list[list[int]], list[str], list[Scored]]:
        """The group with its last sample replaced by the state's first reference action,
        tokenized as the policy would emit it ("Action: <reference>" + end of turn) and
        scored like any sample. The group keeps G members, so its advantages are
        normalised over the same count as every other group's."""
        reference = format_action(self.references[index][0])
        ids, _ = anchor_completion(self.tokenizer, reference)
        text = self.completion_text(ids)
        member = self.score_text(index, text)
        return [*completions[:-1], ids], [*texts[:-1], text], [*scored[:-1], member]

    def completion_text(self, ids: Sequence[int]) -> str:
        """A completion's text, without its stop token."""
        return self.tokenizer.decode(
            [t for t in ids if t not in self.stop_ids], skip_special_tokens=True
        ).strip()

    def score_text(self, index: int, text: str) -> Scored:
        """The reward and verdict of `text` as the action for state `index`."""
        h = self.h
        return score(
            text,
            self.references[index],
            kind=h.reward_kind,  # type: ignore[arg-type]
            elements=self.states[index].elements,
            tau=h.similarity_tau,
            format_bonus=h.format_bonus,
        )

    def make_group(
        self,
        index: int,
        completions: list[list[int]],
        texts: list[str],
        scored: list[Scored],
        round_: int = 0,
    ) -> Group:
        """Score statistics, gate decision and (if it will be anchored) the anchor tokens."""
        h, a = self.h, self.h.algorithm
        stats = group_stats([s.reward for s in scored], [s.correct for s in scored])
        decision = gate(
            stats,
            enabled=a.gate,
            min_std=h.min_std,
            competence_min=h.competence_min,
            competence_max=h.competence_max,
        )
        group = Group(
            index,
            self.states[index].state_id,
            self.encode(index),
            completions,
            texts,
            scored,
            stats,
            decision,
            round_,
        )
        if not decision.accepted and a.anchor_weight > 0:
            reference = format_action(self.references[index][0])
            group.anchor_ids, group.anchor_mask = anchor_completion(self.tokenizer, reference)
        return group

    def collect(self, step: int) -> tuple[list[Group], int]:
        """All groups of one step (first draw plus resampling rounds), and rounds used."""
        a, need = self.h.algorithm, self.h.groups_per_step
        groups: list[Group] = []
        used: set[int] = set()
        rounds = 0
        for round_ in range(a.max_resample + 1):
            missing = need - sum(g.decision.accepted for g in groups)
            if missing <= 0:
                break
            indices = self.draw_states(step, round_, missing, used)
            used.update(indices)
            groups.extend(self.rollout(indices, step, round_))
            rounds = round_
        return groups, rounds

    # ------------------------------------------------------------------ loss

    def loss_and_backward(
        self, pg_groups: Sequence[Group], anchor_groups: Sequence[Group]
    ) -> StepLosses:
        """Accumulate the gradient of PG(pg_groups) + anchor_weight * NLL(anchor_groups).

        Each term is a token mean over the whole step (its normaliser is the step's token
        count), computed in micro-batches of `micro_batch_size` sequences.
        """
        self.model.train()
        with update_checkpointing(self.model, self.h.gradient_checkpointing):
            pg = self._pg_backward(pg_groups)
            anchor = self._anchor_backward(anchor_groups)
        if not self.sharded:  # fsdp: its reduce-scatter summed them (sharding.py)
            ranks.sum_gradients(self.params)  # each rank did its share: the sum is the step's
        weight = self.h.algorithm.anchor_weight
        nan = math.nan
        return StepLosses(
            loss=(pg["loss"] if pg["tokens"] else 0.0)
            + (weight * anchor["loss"] if anchor["tokens"] else 0.0),
            pg_loss=pg["loss"] if pg["tokens"] else nan,
            anchor_loss=anchor["loss"] if anchor["tokens"] else nan,
            kl=pg["kl_sum"] / pg["tokens"] if pg["tokens"] and self.h.beta > 0 else nan,
            clip_fraction=pg["clipped"] / pg["tokens"] if pg["tokens"] else nan,
            pg_tokens=pg["tokens"],
            anchor_tokens=anchor["tokens"],
            group_pg_loss=pg["per_group"],
            group_anchor_loss=anchor["per_group"],
        )

    def _pg_backward(self, groups: Sequence[Group]) -> dict[str, Any]:
        """Clipped surrogate over every sampled completion of the given groups.

        Every rank runs the same number of micro-batches (a padding pass where its share
        ran out) and every collective, whatever its share (ranks.py, the two rules).
        """
        import torch

        from rmsweb.train.salvage_ds.loss import clipped_surrogate, group_advantages

        h = self.h
        out: dict[str, Any] = {"loss": 0.0, "tokens": 0.0, "kl_sum": 0.0, "clipped": 0.0}
        seqs = [(gi, c) for gi, g in enumerate(groups) for c in g.completions]
        # The KL term acts on the policy's own samples only: not on an expert member
        # (the last completion of its group), which the policy did not sample (loss.py).
        sampled = [
            not (g.expert_member and k == len(g.completions) - 1)
            for g in groups
            for k in range(len(g.completions))
        ]
        out["tokens"] = float(sum(len(c) for _, c in seqs))  # every completion token counts
        loss_sum = torch.zeros(len(groups))
        token_sum = torch.zeros(len(groups))
        advantages = None
        if seqs:
            rewards = torch.tensor([g.rewards for g in groups], dtype=torch.float32)
            advantages = group_advantages(rewards).reshape(-1).to(self._device())
        chunk = h.micro_batch_size or math.ceil(len(seqs) / ranks.rank_world()[1]) or 1
        for ids in ranks.padded_shares(len(seqs), chunk):
            part = [seqs[i] for i in ids] if ids else seqs[:1]  # []: a padding pass
            batch = self.collate(
                [groups[gi].prompt for gi, _ in part],
                [c for _, c in part],
                [[1.0] * len(c) for _, c in part],  # incl. the stop token, as TRL
            )
            logps = self._logps(self.model, batch)
            if not ids:
                (logps.sum() * 0.0).backward()  # takes part; adds nothing
                continue
            loss, stats = clipped_surrogate(
                logps,
                logps.detach(),  # on-policy: one update per generated batch
                advantages[ids],  # type: ignore[index]
                batch["loss_mask"],
                epsilon=h.epsilon,
                epsilon_high=h.epsilon_high,
                normalizer=out["tokens"],
                beta=h.beta,
                ref_logps=self._ref_logps(batch) if h.beta > 0 else None,
                kl_rows=torch.tensor([sampled[i] for i in ids]),
            )
            loss.backward()
            out["loss"] += float(loss.detach())
            out["kl_sum"] += stats.kl_sum
            out["clipped"] += stats.clipped_tokens
            index = torch.tensor([gi for gi, _ in part])
            loss_sum.index_add_(0, index, stats.per_sequence_loss.cpu())
            token_sum.index_add_(0, index, stats.per_sequence_tokens.cpu())
        ranks.sum_([loss_sum, token_sum])  # unconditional: every rank, every step
        ranks.sum_entries(out, "loss", "kl_sum", "clipped")
        out["per_group"] = {
            gi: float(loss_sum[gi] / token_sum[gi].clamp(min=1)) for gi in range(len(groups))
        }
        return out

    def _anchor_backward(self, groups: Sequence[Group]) -> dict[str, Any]:
        """anchor_weight x NLL of the reference action's tokens, one sequence per group."""
        from rmsweb.train.salvage_ds.loss import action_anchor

        weight = self.h.algorithm.anchor_weight
        anchored = [(i, g) for i, g in enumerate(groups) if g.anchor_ids is not None]
        out: dict[str, Any] = {"loss": 0.0, "per_group": {}}
        out["tokens"] = float(sum(sum(g.anchor_mask or []) for _, g in anchored))
        if not out["tokens"] or weight <= 0:
            out["tokens"] = 0.0
            anchored = []  # nothing to anchor; the collectives below still run
        world = ranks.rank_world()[1]
        chunk = self.h.micro_batch_size or math.ceil(len(anchored) / world) or 1
        for ids in ranks.padded_shares(len(anchored), chunk):  # this rank's share
            part = [anchored[i] for i in ids] if ids else anchored[:1]  # []: padding
            batch = self.collate(
                [g.prompt for _, g in part],
                [g.anchor_ids or [] for _, g in part],
                [g.anchor_mask or [] for _, g in part],
            )
            # A supervised term: at temperature 1, not the sampling temperature.
            logps = self._logps(self.model, batch, temperature=1.0)
            if not ids:
                (logps.sum() * 0.0).backward()  # takes part; adds nothing
                continue
            nll, stats = action_anchor(logps, batch["loss_mask"], normalizer=out["tokens"])
            (weight * nll).backward()
            out["loss"] += float(nll.detach())
            for k, (i, _) in enumerate(part):
                n = max(float(stats.per_sequence_tokens[k]), 1.0)
                out["per_group"][i] = float(stats.per_sequence_nll[k]) / n
        ranks.sum_entries(out, "loss")  # unconditional: every rank, every step
        out["per_group"] = ranks.merge(out["per_group"])
        return out

    def _logps(self, model: Any, batch: dict[str, Any], temperature: float | None = None) -> Any:
        from rmsweb.train.salvage_ds.loss import completion_logps

        inputs = {k: v for k, v in batch.items() if k not in ("loss_mask", "n_completion")}
        ids, attn = inputs.pop("input_ids"), inputs.pop("attention_mask")
        t = self.h.temperature if temperature is None else temperature
        return completion_logps(model, ids, attn, batch["n_completion"], t, **inputs)

    def _ref_logps(self, batch: dict[str, Any]) -> Any:
        import torch

        with torch.no_grad():
            if self.is_peft:
                with self.model.disable_adapter():
                    return self._logps(self.model, batch)
            return self._logps(self.ref_model, batch)

    # ------------------------------------------------------------------ the loop

    def learning_rate(self, step: int) -> float:
        """Linear warmup over warmup_ratio of the steps, then constant (step counts from 1).

        The schedule follows the step count, also across steps that could not update.
        """
        w = self.warmup_steps
        return self.h.learning_rate * (min(1.0, step / (w + 1)) if w else 1.0)

    def train_step(self, step: int) -> dict[str, Any]:
        """Collect groups, update once, log; returns the step's curve row."""
        import torch

        h = self.h
        t0 = time.perf_counter()
        groups, rounds = self.collect(step)
        t1 = time.perf_counter()
        pg_groups = [g for g in groups if g.decision.accepted]
        rejected = [g for g in groups if not g.decision.accepted]
        anchor_groups = rejected if h.algorithm.anchor_weight > 0 else []
        self.optimizer.zero_grad(set_to_none=True)
        torch.manual_seed(derived_seed(h.seed, "train", step))  # dropout, if any
        losses = self.loss_and_backward(pg_groups, anchor_groups)
        updated = bool(pg_groups or (anchor_groups and losses.anchor_tokens > 0))
        grad_norm = math.nan
        lr = self.learning_rate(step)
        if updated:
            grad_norm = fsdp.clip_grad_norm(self.params, h.max_grad_norm)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        t2 = time.perf_counter()
        self.generate_s += t1 - t0
        self.train_s += t2 - t1
        self._log_groups(step, groups, pg_groups, anchor_groups, losses)
        # The policy's own samples: an expert member is not what the policy drew.
        rewards = [r for g in groups for r in (g.sampled_rewards or g.rewards)]
        reasons = Counter(g.decision.reason for g in groups)
        row: dict[str, Any] = {
            "step": step,
            "reward_mean": sum(rewards) / len(rewards),
            "reward_std": statistics.pstdev(rewards),
            "accepted_fraction": len(pg_groups) / len(groups),
            "groups": len(groups),
            "accepted": len(pg_groups),
            "rejected": len(rejected),
            "pg_loss": losses.pg_loss,
            "anchor_loss": losses.anchor_loss,
            "loss": losses.loss,
            "kl": losses.kl,
            "clip_fraction": losses.clip_fraction,
            "grad_norm": grad_norm,
            "samples_generated": len(rewards),
            "completion_tokens": sum(len(c) for g in groups for c in g.completions) / len(rewards),
            "resample_rounds": rounds,
            "updated": int(updated),
            "learning_rate": lr,
            "generate_s": round(t1 - t0, 4),
            "train_s": round(t2 - t1, 4),
            "expert_members": sum(g.expert_member for g in groups),
            **{f"reason_{r}": reasons.get(r, 0) for r in REASONS},
        }
        self.curve.append(row)
        return row

    def _log_groups(
        self,
        step: int,
        groups: Sequence[Group],
        pg_groups: Sequence[Group],
        anchor_groups: Sequence[Group],
        losses: StepLosses,
    ) -> None:
        pg_pos = {id(g): i for i, g in enumerate(pg_groups)}
        anchor_pos = {id(g): i for i, g in enumerate(anchor_groups)}
        for g in groups:
            pg = losses.group_pg_loss.get(pg_pos.get(id(g), -1))
            anchor = losses.group_anchor_loss.get(anchor_pos.get(id(g), -1))
            self.group_log.append(
                {
                    "rl_step": step,
                    "state_id": g.state_id,
                    "rewards": g.rewards,
                    "mean": g.stats.mean,
                    "std": g.stats.std,
                    "accepted": g.decision.accepted,
                    "reason": g.decision.reason,
                    "pg_loss": pg,
                    "anchor_loss": anchor,
                    "resample_round": g.resample_round,
                    "frac_correct": g.stats.frac_correct,
                    "expert_member": g.expert_member,
                }
            )

    def train(self) -> TrainResult:
        """Run (or continue) training to `steps`; returns the logs of the whole run."""
        h = self.h
        resumed = self.resume()
        start = time.perf_counter()
        log_every = h.log_every or max(1, h.steps // 20)
        for step in range(self.step + 1, h.steps + 1):
            row = self.train_step(step)
            self.step = step
            if step % log_every == 0 or step == h.steps:
                print(
                    f"rl step {step}/{h.steps}: reward {row['reward_mean']:+.3f} "
                    f"accepted {row['accepted']}/{row['groups']} "
                    f"pg {row['pg_loss']:.4f} anchor {row['anchor_loss']:.4f}",
                    file=sys.stderr,
                    flush=True,
                )
            if step % h.save_steps == 0 or step == h.steps:
                row.update(probe_policy(self))  # kl_to_sft, entropy
                self.save_checkpoint()
            if self.on_step is not None:
                self.on_step(row)
        return TrainResult(
            curve=list(self.curve),
            groups=list(self.group_log),
            resumed_from=resumed,
            wall_s=time.perf_counter() - start,
            generate_s=self.generate_s,
            train_s=self.train_s,
        )

    def final_model(self, base: Callable[[], Any] | None = None) -> Any:
        """The trained network as a plain model (LoRA adapters merged in).

        Sharded (fsdp): every rank must call it (the weights are gathered); `base` loads
        the start model unsharded (on CPU), rank 0 puts the trained weights into it and
        returns it; the other ranks return None.
        """
        if not self.sharded:
            if self.is_peft:
                return self.model.merge_and_unload()
            return self.model
        weights = fsdp.full_trainable(self.model)
        if not ranks.is_writer():
            return None
        if base is None:
            raise ValueError("a sharded trainer needs `base` to build its final model")
        return fsdp.unsharded(base(), weights, self.lora)

    # ------------------------------------------------------------------ checkpoints

    def save_checkpoint(self) -> Path | None:
        """checkpoint-<step> in work_dir (see checkpoint.py); rank 0 writes (sharded:
        every rank gathers the whole weights and optimizer state first)."""
        gathered = sharded_state(self.model, self.optimizer) if self.sharded else {}
        if not ranks.is_writer():
            return None
        logs = {
            "curve": self.curve,
            "groups": self.group_log,
            "generate_s": self.generate_s,
            "train_s": self.train_s,
        }
        return save_checkpoint(
            self.work_dir, self.step, self.model, self.optimizer, logs, **gathered
        )

    def resume(self) -> int:
        """Continue from the last complete checkpoint in work_dir, if any; returns its step."""
        step, logs = load_checkpoint(self.work_dir, self.model, self.optimizer)
        if step:
            self.step = step
            self.curve = list(logs["curve"])
            self.group_log = list(logs["groups"])
            self.generate_s = float(logs["generate_s"])
            self.train_s = float(logs["train_s"])
        return step
