"""`rmsweb plan <spec>`: per stage and per GPU, the memory, FLOPs, time and cost of a run.

Pure arithmetic on the spec (no torch): `validate` runs the same check and refuses a
spec whose stage cannot fit, naming the field to change. FLOPs come from
rmsweb.models.flops, the count benchmarks/gpu_step.py measures MFU with.

Memory per GPU, in bytes (w: bytes per weight of model.dtype):
- weights: every parameter, w each (data parallel: each rank holds the whole model;
  rmsweb shards nothing, so a model whose weights alone do not fit is refused, naming
  the missing FSDP / ZeRO-3 sharding).
- trainable state: LoRA adapters are kept in fp32 by PEFT: 4 (weight) + 4 (gradient) +
  8 (AdamW m, v) = 16 bytes each; a full fine-tune: w + w + 2w per parameter.
- activations per token of a decoder layer (w bytes each), what autograd keeps for
  backward: the layer input and post-attention residual (2h), the two norms' outputs
  (2h), q and the attention output (2q), k and v (2kv), and the MLP's gate, up,
  activation and product (4f): w (4h + 2q + 2kv + 4f). With checkpointing only each
  layer's input (w h) stays, plus one layer's full set during its recompute. The vision
  tower is frozen and its input needs no gradient: nothing of it is kept.
- logits: SFT with a real vocabulary uses TRL's tiled LM-head loss (no full logits); RL
  keeps the completion's logits, log-softmax and their gradient: 3 x 4 bytes x V each.
- KV cache of HF generate (RL sampling): 2 (K, V) x layers x KV heads x head dim x w per
  token, for a whole micro-batch of prompt + completion.
- vLLM (eval, mine with backend vllm): the engine takes gpu_memory_utilization of each
  GPU; its weights (/ tensor_parallel_size) and at least one max_model_len sequence of
  KV cache must fit in that share. RL with rl.sampler vllm: the engine's share
  (rl.sampler.gpu_memory_utilization, one GPU per engine) sits beside the trainer's
  weights, state and update activations for the whole stage, in place of HF's KV cache.
A stage fits when its peak is at most USABLE of the GPU's memory (the rest: CUDA context,
allocator fragmentation, NCCL buffers).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmsweb.models.flops import (
    DATASHEET_TFLOPS,
    KNOWN_MODELS,
    Shape,
    rollout_flops,
    sft_flops,
    shape_from_config,
    train_flops,
)

GIB = 2**30
USABLE = 0.9  # of the GPU's memory a stage may plan to use
GPU_MEMORY_GIB = {"H200": 141, "H100": 80, "A100-80GB": 80, "A100": 40, "L40S": 48, "L4": 24}
# On-demand USD per GPU-hour assumed when pricing a run (override: --usd-per-gpu-hour).
USD_PER_GPU_HOUR = {"H200": 3.50, "H100": 2.50, "A100-80GB": 1.80, "A100": 1.30, "L40S": 1.00}
DEFAULT_MFU = 0.35
PATCH = 16  # Qwen3-VL patch size; 2x2 patches merge into one image token


@dataclass
class ModelDims:
    shape: Shape
    params: int  # every weight (embeddings, head, vision tower)
    hidden: int
    q: int  # query heads x head dim
    kv: int  # KV heads x head dim
    ffn: int
    vocab: int


@dataclass
class StagePlan:
    stage: str
    memory: dict[str, float]  # component -> bytes per GPU
    peak_bytes: float
    flops: float = 0.0  # model FLOPs of the whole stage
    hours: float = 0.0
    usd: float = 0.0
    notes: list[str] = field(default_factory=list)
    problem: tuple[str, str] | None = None  # (field to change, why), when it cannot fit
    missing: bool = False  # the problem is a feature rmsweb lacks (model sharding)


@dataclass
class Plan:
    name: str
    gpu: str
    gpus: int
    gpu_bytes: float
    mfu: float
    usd_per_gpu_hour: float
    stages: list[StagePlan]

    @property
    def problems(self) -> list[tuple[str, str, str]]:
        """(stage, field, message) of every stage that cannot fit, whatever the cause."""
        return [(s.stage, *s.problem) for s in self.stages if s.problem]

    @property
    def field_problems(self) -> list[tuple[str, str, str]]:
        """Those a field of the spec fixes on this hardware (validate refuses them)."""
        return [(s.stage, *s.problem) for s in self.stages if s.problem and not s.missing]

    @property
    def missing_features(self) -> list[tuple[str, str, str]]:
        return [(s.stage, *s.problem) for s in self.stages if s.problem and s.missing]


def dims_from_config(text: dict[str, Any], vision: dict[str, Any] | None, lora: Any) -> ModelDims:
    targets = list(lora.targets) if lora.enabled else []
    shape = shape_from_config(text, vision, lora.rank if lora.enabled else 0, targets)
    h, vocab = text["hidden_size"], text["vocab_size"]
    d = text.get("head_dim") or h // text["num_attention_heads"]
    embed = 0 if text.get("tie_word_embeddings") else vocab * h
    params = shape.text_linear + shape.head + embed + shape.vision_linear
    return ModelDims(
        shape,
        params,
        h,
        text["num_attention_heads"] * d,
        text["num_key_value_heads"] * d,
        text["intermediate_size"],
        vocab,
    )


def model_dims(spec: Any) -> ModelDims | None:
    """The policy model's sizes: a known hub id or a local folder's config.json."""
    m = spec.model
    name = getattr(m, "name_or_path", None)
    if name in KNOWN_MODELS:
        text, vision = KNOWN_MODELS[name]
        return dims_from_config(text, vision, m.lora)
    config = Path(str(name)) / "config.json" if name else None
    if config is not None and config.is_file():
        raw = json.loads(config.read_text())
        return dims_from_config(raw.get("text_config", raw), raw.get("vision_config"), m.lora)
    return None


def gpu_of(accelerators: str) -> tuple[str, int]:
    name, _, count = accelerators.partition(":")
    return name, int(count or 1)


def activation_bytes_per_token(d: ModelDims, w: int, checkpointing: bool) -> float:
    layer = w * (4 * d.hidden + 2 * d.q + 2 * d.kv + 4 * d.ffn)
    if checkpointing:
        return d.shape.layers * w * d.hidden + layer
    return d.shape.layers * layer


def kv_bytes_per_token(d: ModelDims, w: int) -> float:
    return 2 * d.shape.layers * d.kv * w


def trainable_bytes(d: ModelDims, w: int, lora: bool) -> float:
    return 16 * d.shape.lora if lora else 3 * w * d.params


def image_tokens(spec: Any) -> tuple[int, int]:
    """(patches, tokens incl. <|vision_start|>/<|vision_end|>) of one screenshot prompt."""
    if not spec.model.prompt.screenshot:
        return 0, 0
    b = spec.suite.browser
    patches = (b.viewport_height // PATCH) * (b.viewport_width // PATCH)
    return patches, patches // 4 + 2


def _largest(fits: Any, upper: int) -> int:
    """The largest n in 1..upper with fits(n) (0 if none)."""
    best = 0
    for n in range(1, upper + 1):
        if fits(n):
            best = n
    return best


def plan(spec: Any, mfu: float = DEFAULT_MFU, usd_per_gpu_hour: float | None = None) -> Plan:
    """The plan of a GPU spec (compute.accelerators set, a model whose shape is known)."""
    c = spec.compute
    gpu, per_node = gpu_of(c.accelerators)
    gpus = per_node * c.num_nodes
    gpu_bytes = GPU_MEMORY_GIB.get(gpu, 80) * GIB
    price = usd_per_gpu_hour if usd_per_gpu_hour is not None else USD_PER_GPU_HOUR.get(gpu, 0.0)
    peak_flops = DATASHEET_TFLOPS.get(gpu, 989.4) * 1e12
    d = model_dims(spec)
    out = Plan(spec.name, gpu, gpus, gpu_bytes, mfu, price, [])
    if d is None:
        return out
    w = 4 if spec.model.dtype == "float32" else 2
    lora = bool(spec.model.lora.enabled)
    budget = USABLE * gpu_bytes
    weights = w * d.params
    state = trainable_bytes(d, w, lora)
    patches, img = image_tokens(spec)
    p = spec.model.prompt
    prompt = p.max_prompt_tokens + img
    new = p.max_new_tokens

    def timed(stage: StagePlan, flops: float, gpus_used: int, replicated: float = 0.0) -> None:
        """`flops` split over `gpus_used`; `replicated` more that every GPU runs whole."""
        stage.flops = flops + replicated
        stage.hours = (flops / gpus_used + replicated) / (peak_flops * mfu) / 3600
        stage.usd = stage.hours * gpus * price  # every GPU of the cluster is paid for

    def needs_sharding(stage: StagePlan, one: float) -> bool:
        """Weights + state + one sequence's memory (`one`) exceed the GPU: no field of this
        stage fixes it; sharding the model over the ranks would."""
        if weights + state + one <= budget:
            return False
        stage.problem = (
            "compute.accelerators",
            f"{stage.stage}: weights {weights / GIB:.1f} GiB + trainable state "
            f"{state / GIB:.1f} GiB + one sequence {one / GIB:.1f} GiB per GPU exceed "
            f"{budget / GIB:.1f} GiB usable on a {gpu}; rmsweb trains data-parallel with the "
            "whole model on every rank. Missing: model sharding (FSDP or DeepSpeed ZeRO-3) in "
            "the sft/rl trainers. Until then: a GPU with more memory (e.g. H200) or a smaller "
            "model.name_or_path.",
        )
        stage.missing = True
        return True

    # ------------------------------------------------------------------ sft
    s = spec.sft
    seq = min(s.max_seq_len, prompt + new)
    ckpt = s.gradient_checkpointing
    act = activation_bytes_per_token(d, w, ckpt)
    sft = StagePlan(
        "sft",
        {
            "weights": weights,
            "trainable_state": state,
            f"activations ({'with' if ckpt else 'without'} checkpointing)": s.batch_size
            * seq
            * act,
        },
        0.0,
    )
    sft.memory["activations if toggled"] = (
        s.batch_size * seq * activation_bytes_per_token(d, w, not ckpt)
    )
    sft.peak_bytes = weights + state + s.batch_size * seq * act
    sft.notes.append(f"{s.batch_size} x {seq} tokens per micro-batch ({img} image tokens)")
    timed(
        sft,
        s.max_steps * sft_flops(d.shape, s.batch_size * s.grad_accum * gpus, seq, patches),
        gpus,
    )
    one_sample = seq * activation_bytes_per_token(d, w, True)
    if not needs_sharding(sft, one_sample) and sft.peak_bytes > budget:
        if (
            not ckpt
            and weights + state + s.batch_size * seq * activation_bytes_per_token(d, w, True)
            <= budget
        ):
            sft.problem = ("sft.gradient_checkpointing", "sft: set it true: " + _over(sft, budget))
        else:
            fit = _largest(
                lambda n: weights + state + n * seq * act <= budget, max(1, s.batch_size)
            )
            if fit:
                sft.problem = ("sft.batch_size", f"sft: {_over(sft, budget)}; at most {fit} fits")
            else:
                sft.problem = ("sft.gradient_checkpointing", f"sft: {_over(sft, budget)}")
    out.stages.append(sft)

    # ------------------------------------------------------------------ rl
    r = spec.rl
    if r is not None and getattr(r, "kind", None) != "continued_sft":
        # Every rank samples the whole batch (ranks.py: sampling is not split yet), then
        # runs the loss-and-backward of its 1/gpus share; the summed gradients make one step.
        seqs = r.batch_size
        share = math.ceil(seqs / gpus)
        micro = min(r.micro_batch_size or seqs, seqs)
        total = prompt + new
        kv = kv_bytes_per_token(d, w)
        rl_act = activation_bytes_per_token(d, w, r.gradient_checkpointing)
        logits = 3 * 4 * d.vocab * new
        sampler = r.sampler
        # rl.sampler vllm: the engine holds its share for the whole stage and samples in it
        # (its own copy of the weights and its KV cache); HF generate's KV cache is gone.
        vllm = sampler.gpu_memory_utilization * gpu_bytes if sampler.kind == "vllm" else 0.0

        def rl_peak(m: int, act_per_token: float) -> float:
            sampling = 0.0 if vllm else m * total * kv
            return weights + state + vllm + max(sampling, m * (total * act_per_token + logits))

        ref = weights if (not lora and (r.beta > 0 or r.kl_probe_states)) else 0.0
        sampling_memory = (
            {"vllm_share (rl.sampler: weights + KV cache)": vllm}
            if vllm
            else {f"kv_cache (HF generate, {micro} x {total} tokens)": micro * total * kv}
        )
        rl = StagePlan(
            "rl",
            {
                "weights": weights,
                "trainable_state": state,
                "frozen_reference": ref,
                **sampling_memory,
                f"update activations ({'with' if r.gradient_checkpointing else 'without'} "
                "checkpointing) + logits": micro * (total * rl_act + logits),
            },
            rl_peak(micro, rl_act) + ref,
        )
        rl.notes.append(
            f"micro-batch {micro}; each of the {gpus} ranks samples all {seqs} sequences and "
            f"updates on its {share} (gradients summed): time is sampling + 1/{gpus} of the update"
        )
        rollout = r.steps * seqs * rollout_flops(d.shape, prompt, new, patches)
        update = r.steps * seqs * train_flops(d.shape, prompt + new, new, patches)
        timed(rl, update, gpus, replicated=rollout)  # sampling runs whole on every rank
        one = rl_peak(1, activation_bytes_per_token(d, w, True)) - weights - state - vllm
        if vllm and vllm - weights < sampler.max_model_len * kv:
            rl.problem = (
                "rl.sampler.gpu_memory_utilization",
                f"rl: the vLLM share {vllm / GIB:.1f} GiB holds weights {weights / GIB:.1f} GiB "
                f"and KV cache for fewer than max_model_len {sampler.max_model_len} tokens; "
                "raise it",
            )
        elif vllm and weights + state + vllm + one + ref > budget:
            rl.problem = (
                "rl.sampler.gpu_memory_utilization",
                f"rl: {_over(rl, budget)} with the vLLM share {vllm / GIB:.1f} GiB beside the "
                "trainer; lower it (or use rl.sampler {kind: hf})",
            )
        elif not needs_sharding(rl, one + ref) and rl.peak_bytes > budget:
            fits_ckpt = rl_peak(micro, activation_bytes_per_token(d, w, True)) + ref <= budget
            if not r.gradient_checkpointing and fits_ckpt:
                rl.problem = ("rl.gradient_checkpointing", "rl: set it true: " + _over(rl, budget))
            else:
                fit = _largest(lambda m: rl_peak(m, rl_act) + ref <= budget, micro)
                if fit:
                    rl.problem = (
                        "rl.micro_batch_size",
                        f"rl: {_over(rl, budget)}; at most {fit} fits",
                    )
                else:
                    rl.problem = ("rl.gradient_checkpointing", f"rl: {_over(rl, budget)}")
        out.stages.append(rl)

    # ------------------------------------------------------------------ vLLM rollouts
    backend = spec.model.backend
    if getattr(backend, "kind", None) == "vllm":
        tp = backend.tensor_parallel_size
        share = backend.gpu_memory_utilization * gpu_bytes
        cache = share - weights / tp
        tokens = cache / (kv_bytes_per_token(d, w) / tp) if cache > 0 else 0
        engine = StagePlan(
            "eval/mine (vllm)",
            {"vllm_share": share, "weights / tp": weights / tp, "kv_cache": max(cache, 0.0)},
            share,
        )
        engine.notes.append(f"KV cache for {tokens:,.0f} tokens per engine")
        if tokens < backend.max_model_len:
            engine.problem = (
                "model.backend.gpu_memory_utilization",
                f"vLLM: {share / GIB:.1f} GiB share holds weights {weights / tp / GIB:.1f} GiB "
                f"and KV cache for {max(tokens, 0):,.0f} tokens < max_model_len "
                f"{backend.max_model_len}; raise it or tensor_parallel_size",
            )
        out.stages.append(engine)
    return out


def _over(stage: StagePlan, budget: float) -> str:
    return f"needs {stage.peak_bytes / GIB:.1f} GiB per GPU > {budget / GIB:.1f} GiB usable"


def fit_problems(spec: Any) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """(field problems, missing features) of a GPU spec's stages: `validate` refuses the
    first (a field of the spec fixes them); the second (rmsweb lacks model sharding) only
    `plan` refuses. Both empty for CPU specs and unknown models."""
    if not spec.compute.accelerators or model_dims(spec) is None:
        return [], []
    p = plan(spec)
    return p.field_problems, p.missing_features


def render(p: Plan) -> str:
    lines = [
        f"{p.name}: {p.gpus} x {p.gpu} ({p.gpu_bytes / GIB:.0f} GiB, {USABLE:.0%} usable), "
        f"time at MFU {p.mfu:.2f} of the datasheet peak, ${p.usd_per_gpu_hour:.2f}/GPU-hour"
    ]
    if not p.stages:
        lines.append("  model shape unknown: nothing to plan")
    for s in p.stages:
        status = (
            ("REFUSED: needs model sharding" if s.missing else "REFUSED") if s.problem else "fits"
        )
        lines.append(f"  {s.stage}: peak {s.peak_bytes / GIB:.1f} GiB per GPU ({status})")
        for k, v in s.memory.items():
            lines.append(f"    {k}: {v / GIB:.2f} GiB")
        if s.flops:
            lines.append(
                f"    model FLOPs {s.flops:.3e}; {s.hours:.1f} h; ${s.usd:,.0f} ({p.gpus} GPUs)"
            )
        lines.extend(f"    note: {n}" for n in s.notes)
        if s.problem:
            lines.append(f"    error: {s.problem[0]}: {s.problem[1]}")
    return "\n".join(lines)


def total_hours(p: Plan) -> float:
    return sum(s.hours for s in p.stages if not math.isnan(s.hours))
