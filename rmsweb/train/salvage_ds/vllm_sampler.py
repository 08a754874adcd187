"""RL sampling through vLLM with the current LoRA weights (rl.sampler.kind vllm, GPU only).

    sampler = build_sampler(rl.sampler, sft_model_dir, lora, dtype=..., seed=...)
    trainer.sampler = sampler  # None (rl.sampler.kind hf): the trainer's HF generate

HF generate stays the CPU path (and the default). With vLLM:
1. The engine loads the base model, the SFT checkpoint the RL run starts from, once,
   with LoRA enabled. The trainer trains PEFT adapters on the same base in torch.
2. Each sampling call first saves the adapter as it is now (PEFT's save_pretrained:
   adapter_config.json and the adapter's safetensors, megabytes) into a new folder of a
   local temp dir and passes it as a LoRARequest with a new integer id. vLLM caches
   adapters by id, so a reused id would sample from the weights of an earlier step. The
   previous step's folder is removed.
3. Requests: a text prompt goes in as the trainer's own token ids (what HF generate is
   fed, no special tokens added); a VL prompt as its chat text and image (vLLM's
   processor expands the image placeholder). Each completion is one request with its own
   seed, derived from (seed, step, round, position): samples do not depend on how vLLM
   batches them. They are the same distribution as HF's, not the same draws.
4. Completions are cut as on the HF path: up to and including the first stop token. A
   completion that vLLM ended at a stop token but returned without it gets it back, so
   the policy gradient sees the end of turn on both paths.
5. Under torchrun only rank 0 holds an engine: it samples and broadcasts the token ids,
   so every rank trains on the same groups (ranks.py).
Only LoRA runs: a full fine-tune would need its whole weights copied into the engine at
every step; the spec refuses that combination (rmsweb/spec/experiment.py).
The KL probe at checkpoints (kl_probe.py) still samples with HF generate: a few states.
vLLM is imported lazily (the `gpu` extra); without it `build_sampler` says what to do.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmsweb.errors import UserError
from rmsweb.train.salvage_ds import ranks
from rmsweb.train.salvage_ds.batch import cut_at_stop
from rmsweb.train.salvage_ds.seeds import derived_seed

# vLLM accepts these max_lora_rank values; the engine needs one >= the adapter's rank.
VLLM_LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)


@dataclass
class Sample:
    """One completion: token ids as the trainer keeps them, and vLLM's log-probabilities of
    those tokens when they were asked for (the GPU test compares them with HF's)."""

    token_ids: list[int]
    logprobs: list[float] | None = None


def lora_rank_limit(rank: int) -> int:
    """The smallest max_lora_rank vLLM accepts that holds an adapter of `rank`."""
    for limit in VLLM_LORA_RANKS:
        if limit >= rank:
            return limit
    raise UserError(
        f"model.lora.rank {rank} is above vLLM's largest max_lora_rank {VLLM_LORA_RANKS[-1]}; "
        "lower it or use rl.sampler {kind: hf}."
    )


def finish(token_ids: Sequence[int], stop_ids: set[int], stopped_by: int | None) -> list[int]:
    """vLLM's output tokens cut as the HF path cuts them (module doc, 4). `stopped_by`: the
    stop token id vLLM reports it ended at (None: it ran out of tokens)."""
    ids = cut_at_stop(list(token_ids), stop_ids)
    if stopped_by is not None and (not ids or ids[-1] not in stop_ids):
        ids.append(stopped_by)
    return ids


class VLLMSampler:
    """The trainer's sampling through a vLLM engine (`engine` None: a rank > 0, which
    receives rank 0's samples)."""

    def __init__(self, engine: Any, work_dir: Path | None = None) -> None:
        self.engine = engine
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="rmsweb-lora-"))
        self.adapter_id = 0
        self._folder: Path | None = None

    def adapter(self, model: Any) -> Any:
        """The adapter as `model` holds it now, saved and named with a new id."""
        from vllm.lora.request import LoRARequest

        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
        self.adapter_id += 1  # ids start at 1: vLLM reads 0 as "no adapter"
        self._folder = self.work_dir / f"adapter-{self.adapter_id}"
        model.save_pretrained(self._folder)
        return LoRARequest(f"rl-{self.adapter_id}", self.adapter_id, str(self._folder))

    def complete(
        self,
        model: Any,
        requests: Sequence[dict[str, Any]],
        seeds: Sequence[int],
        *,
        temperature: float,
        max_new_tokens: int,
        stop_ids: set[int],
        logprobs: bool = False,
    ) -> list[Sample]:
        """One sampled completion per request (vLLM's prompt dicts), with the current adapter."""
        from vllm import SamplingParams

        params = [
            SamplingParams(
                temperature=temperature,
                max_tokens=max_new_tokens,
                stop_token_ids=sorted(stop_ids),
                seed=seed,
                logprobs=0 if logprobs else None,  # 0: the chosen token's only
            )
            for seed in seeds
        ]
        lora = self.adapter(model)
        outputs = self.engine.generate(list(requests), params, lora_request=lora, use_tqdm=False)
        samples = []
        for out in outputs:
            gen = out.outputs[0]
            # stop_reason: the stop token id it ended at (None for EOS, which vLLM keeps in
            # token_ids, and for running out of tokens).
            stopped_by = gen.stop_reason if isinstance(gen.stop_reason, int) else None
            ids = finish(gen.token_ids, stop_ids, stopped_by)
            chosen = None
            if logprobs and gen.logprobs is not None:
                chosen = [step[t].logprob for step, t in zip(gen.logprobs, ids, strict=False)]
            samples.append(Sample(ids, chosen))
        return samples

    def sample(
        self, trainer: Any, indices: Sequence[int], step: int, round_: int
    ) -> list[list[int]]:
        """The trainer's hook: group_size completions per state index, in order."""
        ids: list[list[int]] | None = None
        if self.engine is not None:
            g = trainer.h.group_size
            requests = [prompt_request(trainer, i) for i in indices for _ in range(g)]
            seeds = [
                derived_seed(trainer.h.seed, "vllm", step, round_, k) % (2**31)
                for k in range(len(requests))
            ]
            samples = self.complete(
                trainer.model,
                requests,
                seeds,
                temperature=trainer.h.temperature,
                max_new_tokens=trainer.h.max_new_tokens,
                stop_ids=trainer.stop_ids,
            )
            ids = [s.token_ids for s in samples]
        return ranks.broadcast(ids)

    def close(self) -> None:
        shutil.rmtree(self.work_dir, ignore_errors=True)


def prompt_request(trainer: Any, index: int) -> dict[str, Any]:
    """State `index`'s prompt as a vLLM request (module doc, 3)."""
    state = trainer.states[index]
    if trainer.is_vl and state.image is not None:
        text = trainer.tokenizer.apply_chat_template(
            state.messages, tokenize=False, add_generation_prompt=True
        )
        return {"prompt": text, "multi_modal_data": {"image": state.image}}
    return {"prompt_token_ids": trainer.encode(index).input_ids.tolist()}


def load_engine(
    base_dir: Path,
    *,
    lora_rank: int,
    dtype: str,
    gpu_memory_utilization: float,
    max_model_len: int,
    seed: int,
    enforce_eager: bool = False,
) -> Any:
    """vLLM's offline engine on the base model with LoRA enabled (one adapter at a time)."""
    from rmsweb.agents.vllm_policy import load_vllm

    return load_vllm(
        base_dir,
        dtype=dtype,
        gpu_memory_utilization=gpu_memory_utilization,
        max_model_len=max_model_len,
        seed=seed,
        enforce_eager=enforce_eager,
        enable_lora=True,
        max_lora_rank=lora_rank_limit(lora_rank),
        max_loras=1,
    ).model


def build_sampler(
    sampler_spec: Any, base_dir: Path, lora: dict[str, Any] | None, *, dtype: str, seed: int
) -> VLLMSampler | None:
    """The sampler rl.sampler selects: None for hf (the trainer's generate), else vLLM's."""
    if sampler_spec.kind == "hf":
        return None
    if not lora:
        raise UserError(
            "rl.sampler.kind vllm samples with the current LoRA adapter: set model.lora.enabled "
            "true, or use rl.sampler {kind: hf}."
        )
    import torch

    if not torch.cuda.is_available():
        raise UserError(
            "rl.sampler.kind vllm needs a CUDA GPU (and `pip install -e '.[gpu]'`); on CPU use "
            "rl.sampler {kind: hf}."
        )
    if not ranks.is_writer():
        return VLLMSampler(None)  # rank 0 samples for every rank
    engine = load_engine(
        base_dir,
        lora_rank=int(lora["r"]),
        dtype=dtype,
        gpu_memory_utilization=sampler_spec.gpu_memory_utilization,
        max_model_len=sampler_spec.max_model_len,
        seed=seed,
        enforce_eager=sampler_spec.enforce_eager,
    )
    return VLLMSampler(engine)
