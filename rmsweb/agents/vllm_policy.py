"""The `vllm` policy backend: vLLM's offline engine behind the same Policy protocol.

It differs from the `hf` backend (hf_policy.py) only in how a batch is generated,
so it reuses that class for the rest: the same chat template renders the same
prompt, concurrent `act()` calls are coalesced into one batch, and the output is
cut and decoded the same way (at the first EOS/pad, special tokens skipped), so
greedy decoding gives the same action on both backends (tests/agents/
test_vllm_policy.py checks it on a GPU). `generate()` keeps hf's signature, so
mining and RL rollouts call either backend alike.

vLLM is imported lazily and ships in the `gpu` extra (it pins a CUDA torch);
on a CPU machine this module imports fine and `load_vllm` says what to install.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rmsweb.agents.base import ActResult
from rmsweb.agents.hf_policy import HFPolicy
from rmsweb.errors import UserError


def _context_limit(model_dir: Path) -> int | None:
    """The model's own position limit (vLLM refuses a max_model_len above it)."""
    config_file = model_dir / "config.json"
    if not config_file.is_file():
        return None  # a hub id: vLLM reads the config itself
    config = json.loads(config_file.read_text())
    for section in (config, config.get("text_config") or {}):
        if "max_position_embeddings" in section:
            return int(section["max_position_embeddings"])
    return None


def load_vllm(
    model_dir: str | Path,
    dtype: str = "bfloat16",
    gpu_memory_utilization: float = 0.85,
    tensor_parallel_size: int = 1,
    max_model_len: int = 16384,
    seed: int = 0,
    enforce_eager: bool = False,
    **engine_args: Any,
) -> Any:
    """A LoadedModel whose `model` is a vLLM engine (tokenizer from the same folder);
    `engine_args` go to vLLM's LLM as they are (RL sampling: enable_lora, max_lora_rank)."""
    try:
        from vllm import LLM
    except ImportError:
        raise UserError(
            "model.backend.kind vllm needs vLLM: `pip install -e '.[gpu]'` on a CUDA machine; "
            "on CPU use `backend: {kind: hf}`."
        ) from None
    from transformers import AutoConfig, AutoTokenizer

    from rmsweb.models.load import LoadedModel, is_vl_type

    path = str(model_dir)
    limit = _context_limit(Path(model_dir))
    if limit is not None:
        max_model_len = min(max_model_len, limit)
    vl = is_vl_type(AutoConfig.from_pretrained(path).model_type)
    engine = LLM(
        model=path,
        dtype=dtype,
        gpu_memory_utilization=gpu_memory_utilization,
        tensor_parallel_size=tensor_parallel_size,
        max_model_len=max_model_len,
        seed=seed,
        enforce_eager=enforce_eager,
        # One screenshot per prompt at most (rmsweb.agents.prompt).
        **({"limit_mm_per_prompt": {"image": 1}} if vl else {}),
        **engine_args,
    )
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return LoadedModel(engine, tokenizer, tokenizer, vl)


class VLLMPolicy(HFPolicy):
    """Policy over a vLLM engine; construct with `load_vllm(...)`'s result."""

    def generate(self, prompts: list[str], images: list[Any]) -> list[ActResult]:
        from vllm import SamplingParams

        tok = self.loaded.tokenizer
        stops = sorted({t for t in (tok.eos_token_id, tok.pad_token_id) if t is not None})
        batch = self._batches
        self._batches += 1
        params = [
            SamplingParams(
                temperature=self.temperature,  # 0: greedy
                max_tokens=self.max_new_tokens,
                stop_token_ids=stops,
                logprobs=0,  # the chosen token's log-probability only
                # Reproducible sampling per request, independent of batch composition.
                seed=(self.seed * 1_000_003 + batch) * 4096 + i if self.temperature > 0 else None,
            )
            for i in range(len(prompts))
        ]
        requests: list[Any] = []
        for prompt, image in zip(prompts, images, strict=True):
            if image is None:
                # Token ids from our tokenizer, as hf does (vLLM would add special tokens).
                ids = tok(prompt, add_special_tokens=False)["input_ids"]
                requests.append({"prompt_token_ids": ids})
            else:
                # vLLM's processor expands the image placeholder into the image's tokens.
                requests.append({"prompt": prompt, "multi_modal_data": {"image": image}})
        outputs = self.loaded.model.generate(requests, params, use_tqdm=False)
        results = []
        for out in outputs:
            gen = out.outputs[0]
            ids = list(gen.token_ids)
            n = next((i for i, t in enumerate(ids) if t in stops), len(ids))
            chosen = (gen.logprobs or [])[:n]  # one {token id: Logprob} per generated token
            logprobs = [step[t].logprob for step, t in zip(chosen, ids[:n], strict=True)]
            results.append(
                ActResult(
                    text=tok.decode(ids[:n], skip_special_tokens=True).strip(),
                    tokens_in=len(out.prompt_token_ids),
                    tokens_out=n,
                    token_logprobs=logprobs if gen.logprobs else None,
                )
            )
        return results
