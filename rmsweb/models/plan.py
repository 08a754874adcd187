"""`rmsweb plan <spec>`: per stage and per GPU, the memory, FLOPs, time and cost of a run.

Pure arithmetic on the spec (no torch): `validate` runs the same check and refuses a
spec whose stage cannot fit, naming the field to change. FLOPs come from
rmsweb.models.flops, the count benchmarks/gpu_step.py measures MFU with.

Memory per GPU, in bytes (w: bytes per weight of model.dtype):
- weights: every parameter, w each. compute.sharding none (data parallel): each rank
  holds the whole model; fsdp (FSDP2 over every rank of the stage, train/sharding.py):
  each rank holds 1/N of it, and gathers what it computes with: in training the root
  unit (embeddings, LM head, vision tower, final norm: gathered whole) and two decoder
  layers (the one running and the one prefetched); in RL sampling and the KL probe the
  whole model (gathered once for HF generate, so generation runs no collective).
  Null: fsdp where the unsharded plan does not fit (`resolved_sharding`).
- trainable state: LoRA adapters are kept in fp32 by PEFT: 4 (weight) + 4 (gradient) +
  8 (AdamW m, v) = 16 bytes each; a full fine-tune: w + w + 2w per parameter. Divided by
  N under fsdp (the adapters are sharded with their layers).
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
- KL probe (RL, at every checkpoint): rl.kl_probe_states states sampled and scored in
  micro-batches of rl.micro_batch_size: one micro-batch's KV cache, then the policy's and
  the reference's completion logits with their log-softmax temporaries (PROBE_LOGIT_BYTES
  per completion position and vocabulary entry).
A stage fits when its peak is at most USABLE of the GPU's memory (the rest: CUDA context,
allocator fragmentation, NCCL buffers).

Time per stage (what `render` prints, per stage and for the whole pipeline):
- compute-bound parts (training forward/backward, prefill) at an MFU of the datasheet
  peak, per stage, each with its source (MFU below; `--mfu` replaces them all);
- decode, memory-bound: each decode step reads the weights and the batch's KV cache
  once, at an efficiency of the GPU's HBM bandwidth (DECODE_EFFICIENCY: HF generate for
  RL sampling and the KL probe, vLLM for rl.sampler vllm, collect's served teacher,
  mine and eval);
- collect, mine and eval: their model calls (units x attempts x steps, each a prompt at
  its budget) on the node's vLLM engines, or the browser (ENV_STEP_S a step over
  suite.browser.contexts), whichever is slower; hosted judges and teachers priced from
  their `prices`. Units come from the suite (`rmsweb plan` counts them); without them
  these stages are left out.
- fsdp communication, not overlapped with compute (an upper bound): per micro-batch of
  training two all-gathers of the weights (forward; backward) and a reduce-scatter of the
  trainable gradients; per generate call (RL sampling, KL probe) one all-gather of the
  weights; each moves (N-1)/N of the bytes per rank at FSDP_BANDWIDTH (NVLink on one
  node, the network's per-GPU bandwidth across nodes).
Every prompt is taken at its budget and every retry as spent: the figures are upper bounds.
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
DEFAULT_MFU = 0.35  # kept for callers that pass one MFU for every stage
PATCH = 16  # Qwen3-VL patch size; 2x2 patches merge into one image token
# Datasheet HBM bandwidth, TB/s (SXM parts).
HBM_TBPS = {"H200": 4.8, "H100": 3.35, "A100-80GB": 2.04, "A100": 1.56, "L40S": 0.864, "L4": 0.3}
# MFU of the datasheet dense bf16 peak per kind of work, each with its source. Replace
# them with benchmarks/gpu_step.py's measured mfu_sft / mfu_rl (benchmarks/gpu_smoke.sh)
# once a GPU has run it; `--mfu` sets one value for all.
MFU: dict[str, tuple[float, str]] = {
    "sft": (
        0.30,
        "llm-foundry's H100 bf16 benchmarks (scripts/train/benchmarking/README.md): MPT-7B at "
        "8k tokens with activation checkpointing 0.37, MPT-13B at 16k 0.36, FSDP and flash "
        "attention tuned; HF Trainer + PEFT LoRA is less tuned: 0.30 assumed",
    ),
    "rl_update": (0.30, "as sft (the same forward/backward over prompt + completion)"),
    "prefill": (
        0.30,
        "a forward pass over the prompt, compute-bound like training's forward: as sft",
    ),
}
# Decode steps: fraction of HBM bandwidth achieved reading weights + KV cache per step.
DECODE_EFFICIENCY: dict[str, tuple[float, str]] = {
    "hf": (
        0.15,
        "assumed: HF generate launches every kernel of every layer from Python per token "
        "(no CUDA graphs, padded batch); benchmarks/gpu_step.py's rollout time measures it",
    ),
    "vllm": (
        0.60,
        "assumed: vLLM's CUDA graphs, paged KV and continuous batching keep decode near the "
        "bandwidth roofline (0.6 of it taken)",
    ),
}
# Collective bandwidth per rank for FSDP's all-gathers and reduce-scatters (bytes/s).
FSDP_BANDWIDTH: dict[str, tuple[float, str]] = {
    "nvlink": (
        360e9,
        "assumed: NCCL all-gather bus bandwidth within one 8 x H100 SXM node (NVLink 4, "
        "450 GB/s a direction per GPU; nccl-tests report about 360 GB/s at large sizes)",
    ),
    "network": (
        50e9,
        "assumed: 400 Gb/s per GPU between nodes (8 x 400G InfiniBand/EFA per 8-GPU node); "
        "a ring across nodes runs at its slowest link",
    ),
}
SHARDINGS = ("none", "fsdp")
ENV_STEP_S = 3.0  # a live site's browser step (action, load, observe); assumed
PROBE_LOGIT_BYTES = 28  # bf16 logits x 2, fp32 copies, log-softmaxes, p, product (kl_probe.py)
CHECKPOINT_WARN_MINUTES = 30.0
SFT_STEPS_PER_EPISODE = 0.5  # kept trajectories' steps as a share of suite.max_steps (assumed)


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
    mfu: float | None  # one MFU for every stage (--mfu); None: MFU per stage with its source
    usd_per_gpu_hour: float
    stages: list[StagePlan]
    warnings: list[str] = field(default_factory=list)
    sharding: str = "none"  # compute.sharding as planned (null resolved: resolved_sharding)
    shards: int = 1  # ranks the weights are sharded over (1: none)

    def mfu_of(self, kind: str) -> float:
        return self.mfu if self.mfu is not None else MFU[kind][0]

    @property
    def total_hours(self) -> float:
        return sum(s.hours for s in self.stages if not math.isnan(s.hours))

    @property
    def total_usd(self) -> float:
        return sum(s.usd for s in self.stages if not math.isnan(s.usd))

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


def decode_seconds(
    d: ModelDims, w: int, batch: int, prompt: int, new: int, bandwidth: float, eff: float
) -> float:
    """`new` decode steps of a `batch` of sequences after `prompt` tokens: each step reads
    the weights once and the batch's KV cache (at its mean length)."""
    per_step = w * d.params + batch * (prompt + new / 2) * kv_bytes_per_token(d, w)
    return new * per_step / (bandwidth * eff)


def resolved_sharding(spec: Any) -> str:
    """compute.sharding, with null resolved: fsdp where the unsharded plan of a GPU spec
    finds a stage whose whole model cannot fit one GPU (a missing feature), else none."""
    explicit = getattr(spec.compute, "sharding", None)
    if explicit is not None:
        return str(explicit)
    if not spec.compute.accelerators or model_dims(spec) is None:
        return "none"
    return "fsdp" if plan(spec, sharding="none").missing_features else "none"


def fsdp_gather_bytes(d: ModelDims, w: int) -> float:
    """What one rank gathers to compute under FSDP2 (train/sharding.py): the root unit
    (everything outside the decoder layers) whole, plus two decoder layers."""
    layer = d.shape.text_linear / max(1, d.shape.layers)
    root = d.params - d.shape.text_linear
    return w * (root + 2 * layer)


def fsdp_seconds(nbytes: float, shards: int, nodes: int) -> float:
    """One all-gather (or reduce-scatter) of `nbytes` over `shards` ranks."""
    if shards <= 1:
        return 0.0
    bandwidth = FSDP_BANDWIDTH["network" if nodes > 1 else "nvlink"][0]
    return nbytes * (shards - 1) / shards / bandwidth


def plan(
    spec: Any,
    mfu: float | None = None,
    usd_per_gpu_hour: float | None = None,
    units: dict[str, int] | None = None,
    sharding: str | None = None,
) -> Plan:
    """The plan of a GPU spec (compute.accelerators set, a model whose shape is known).

    `mfu`: one MFU for every stage (None: MFU per stage, with its source); `units`: the
    suite's (task, seed) units per split (train, val, test, mine), which price collect,
    mine and eval and size sft.epochs (None: those stages are left out); `sharding`:
    none or fsdp in place of the spec's (None: `resolved_sharding`).
    """
    c = spec.compute
    gpu, per_node = gpu_of(c.accelerators)
    gpus = per_node * c.num_nodes
    # compute.sharding none written in the spec: a stage that needs sharding is its field's
    # problem (validate refuses it); a forced "none" (resolved_sharding) a missing feature.
    explicit_none = sharding is None and getattr(c, "sharding", None) == "none"
    sharding = sharding if sharding is not None else resolved_sharding(spec)
    if sharding not in SHARDINGS:
        raise ValueError(f"sharding {sharding!r}: one of {', '.join(SHARDINGS)}")
    shards = gpus if sharding == "fsdp" else 1
    gpu_bytes = GPU_MEMORY_GIB.get(gpu, 80) * GIB
    price = usd_per_gpu_hour if usd_per_gpu_hour is not None else USD_PER_GPU_HOUR.get(gpu, 0.0)
    peak_flops = DATASHEET_TFLOPS.get(gpu, 989.4) * 1e12
    bandwidth = HBM_TBPS.get(gpu, 3.35) * 1e12
    d = model_dims(spec)
    out = Plan(spec.name, gpu, gpus, gpu_bytes, mfu, price, [], sharding=sharding, shards=shards)
    if d is None:
        return out
    w = 4 if spec.model.dtype == "float32" else 2
    lora = bool(spec.model.lora.enabled)
    budget = USABLE * gpu_bytes
    weights = w * d.params
    state = trainable_bytes(d, w, lora)
    # What each rank holds for the whole stage, and what it gathers to compute (fsdp).
    held_weights, held_state = weights / shards, state / shards
    gathered = fsdp_gather_bytes(d, w) if shards > 1 else 0.0
    gen_gathered = weights - held_weights if shards > 1 else 0.0  # the rest of the model
    all_gather_s = fsdp_seconds(weights, shards, c.num_nodes)
    grad_bytes = (16 * d.shape.lora / 4) if lora else w * d.params  # fp32 LoRA / full grads
    reduce_scatter_s = fsdp_seconds(grad_bytes, shards, c.num_nodes)
    link = "network" if c.num_nodes > 1 else "nvlink"
    patches, img = image_tokens(spec)
    p = spec.model.prompt
    prompt = p.max_prompt_tokens + img
    new = p.max_new_tokens

    def seconds(flops: float, kind: str) -> float:
        return flops / (peak_flops * out.mfu_of(kind))

    def priced(stage: StagePlan, hours: float, gpus_paid: int = gpus) -> None:
        stage.hours = hours
        stage.usd = hours * gpus_paid * price  # every GPU of the cluster is paid for

    def timed(stage: StagePlan, flops: float, gpus_used: int, replicated: float = 0.0) -> None:
        """`flops` split over `gpus_used`; `replicated` more that every GPU runs whole."""
        stage.flops = flops + replicated
        priced(stage, seconds(flops / gpus_used + replicated, "sft") / 3600)

    def needs_sharding(stage: StagePlan, one: float) -> bool:
        """Weights + state + one sequence's memory (`one`) exceed the GPU: no field of this
        stage fixes it; sharding the model over the ranks would (or more of them)."""
        if shards > 1:
            if held_weights + held_state + one <= budget:
                return False
            stage.problem = (
                "compute.accelerators",
                f"{stage.stage}: weights {held_weights / GIB:.1f} GiB + trainable state "
                f"{held_state / GIB:.1f} GiB (sharded over {shards} ranks) + one sequence with "
                f"what it gathers {one / GIB:.1f} GiB per GPU exceed {budget / GIB:.1f} GiB "
                f"usable on a {gpu}. Fix: more GPUs (compute.num_nodes), a GPU with more memory "
                "or a smaller model.name_or_path.",
            )
            stage.missing = False
            return True
        if weights + state + one <= budget:
            return False
        if explicit_none:  # the spec asks for data parallel: its field is what to change
            stage.problem = (
                "compute.sharding",
                f"{stage.stage}: weights {weights / GIB:.1f} GiB + trainable state "
                f"{state / GIB:.1f} GiB + one sequence {one / GIB:.1f} GiB per GPU exceed "
                f"{budget / GIB:.1f} GiB usable on a {gpu} with compute.sharding none (the "
                "whole model on every rank). Fix: compute.sharding fsdp (or null).",
            )
            return True
        stage.problem = (
            "compute.accelerators",
            f"{stage.stage}: weights {weights / GIB:.1f} GiB + trainable state "
            f"{state / GIB:.1f} GiB + one sequence {one / GIB:.1f} GiB per GPU exceed "
            f"{budget / GIB:.1f} GiB usable on a {gpu} with the whole model on every rank. "
            "Missing: model sharding (FSDP or DeepSpeed ZeRO-3): with compute.sharding null "
            "the plan shards it (fsdp); or a GPU with more memory (e.g. H200), or a smaller "
            "model.name_or_path.",
        )
        stage.missing = True
        return True

    # ------------------------------------------------------------------ collect
    suite = spec.suite
    contexts = getattr(getattr(suite, "browser", None), "contexts", 1) or 1
    judge = getattr(suite, "judge", None)
    served = dict(spec.served_endpoints()) if hasattr(spec, "served_endpoints") else {}

    def rollout_stage(
        name: str,
        calls: int,
        episodes: int,
        engine: tuple[ModelDims, int] | None,
        note: str,
        judged_by: tuple[Any, int] | None = None,
    ) -> StagePlan:
        """`calls` model calls of `prompt` + `new` tokens on a vLLM engine (dims, tensor
        parallel) with `contexts` in flight, or the browser's pace, whichever is slower;
        a hosted judge's tokens priced per episode (`judged_by`: an evaluation suite's
        (judge, max_steps) in place of the training suite's)."""
        judge_, steps_ = judged_by if judged_by is not None else (judge, suite.max_steps)
        stage = StagePlan(name, {}, 0.0)
        gpu_s = 0.0
        if engine is not None:
            ed, tp = engine
            pre = calls * (2 * ed.shape.text_linear * prompt + vision_forward_of(ed, patches))
            eff = DECODE_EFFICIENCY["vllm"][0]
            # tensor parallel: weights and KV split over tp GPUs, bandwidth summed
            dec = (
                calls / contexts * decode_seconds(ed, w, contexts, prompt, new, bandwidth * tp, eff)
            )
            gpu_s = seconds(pre, "prefill") / tp + dec
            stage.flops = pre + calls * 2 * ed.shape.text_linear * new
        env_s = calls * ENV_STEP_S / contexts
        priced(stage, max(gpu_s, env_s) / 3600, per_node)  # one node's rollouts (per node)
        if c.num_nodes > 1:  # units sharded over the nodes: each node's share, all paid
            priced(stage, stage.hours / c.num_nodes)
        stage.notes.append(
            f"{calls:,} model calls ({episodes:,} episodes): engine {gpu_s / 3600:.1f} h, "
            f"browser {env_s / 3600:.1f} h at {ENV_STEP_S:.0f} s a step over {contexts} "
            f"contexts; {note}"
        )
        if judge_ is not None and getattr(judge_, "prices", None) is not None:
            k = getattr(judge_, "last_k_screenshots", None) or steps_
            judge_in = episodes * (k * max(img, 1000) + 4000)  # screenshots + task and trace
            judge_usd = judge_.prices.cost_usd(judge_in, episodes * 1000)
            if judge_usd:
                stage.usd += judge_usd
                stage.notes.append(
                    f"judge {judge_.model}: ~{judge_in / 1e6:,.0f} M input tokens, "
                    f"${judge_usd:,.0f} at its prices"
                )
        return stage

    teacher_engine = None
    teacher = getattr(spec.collect, "teacher", None)
    t_endpoint = served.get("collect.teacher")
    if t_endpoint is not None and t_endpoint.model in KNOWN_MODELS:
        text, vision = KNOWN_MODELS[t_endpoint.model]
        no_lora = type("NoLora", (), {"enabled": False, "rank": 0, "targets": []})()
        teacher_engine = (
            dims_from_config(text, vision, no_lora),
            t_endpoint.serve.tensor_parallel_size,
        )
    policy_engine = None
    backend = spec.model.backend
    if getattr(backend, "kind", None) == "vllm":
        policy_engine = (d, backend.tensor_parallel_size)
    steps_per_episode = suite.max_steps
    if units is not None and teacher is not None:
        attempts = 1 + getattr(spec.collect, "max_retries", 0)
        episodes = units.get("train", 0) * attempts
        calls = episodes * steps_per_episode
        teacher_note = (
            f"teacher {t_endpoint.model} served on the node (tp {teacher_engine[1]})"
            if teacher_engine
            else "teacher hosted or unknown: its tokens are not priced here"
        )
        out.stages.append(rollout_stage("collect", calls, episodes, teacher_engine, teacher_note))

    # ------------------------------------------------------------------ sft
    s = spec.sft
    seq = min(s.max_seq_len, prompt + new)
    ckpt = s.gradient_checkpointing
    act = activation_bytes_per_token(d, w, ckpt)
    sharded_as = f" (fsdp: 1/{shards})" if shards > 1 else ""
    sft = StagePlan(
        "sft",
        {
            f"weights{sharded_as}": held_weights,
            f"trainable_state{sharded_as}": held_state,
            **({"gathered (fsdp: root unit + 2 decoder layers)": gathered} if shards > 1 else {}),
            f"activations ({'with' if ckpt else 'without'} checkpointing)": s.batch_size
            * seq
            * act,
        },
        0.0,
    )
    sft.memory["activations if toggled"] = (
        s.batch_size * seq * activation_bytes_per_token(d, w, not ckpt)
    )
    sft.peak_bytes = held_weights + held_state + gathered + s.batch_size * seq * act
    sft.notes.append(f"{s.batch_size} x {seq} tokens per micro-batch ({img} image tokens)")
    # The global batch is the spec's on any number of nodes: batch x grad_accum x GPUs per
    # node (each node runs grad_accum / nodes micro-batches: train/sft/trainer.py).
    global_batch = s.batch_size * s.grad_accum * per_node
    sft_steps = s.max_steps
    samples = None
    if units is not None:
        samples = int(units.get("train", 0) * steps_per_episode * SFT_STEPS_PER_EPISODE)
    if getattr(s, "epochs", None) is not None and samples:
        sft_steps = max(1, math.ceil(s.epochs * samples / global_batch))
        sft.notes.append(
            f"sft.epochs {s.epochs:g} over ~{samples:,} samples (estimated: train units x "
            f"{SFT_STEPS_PER_EPISODE:g} x max_steps) at {global_batch} a step: {sft_steps} steps"
        )
    elif samples:
        sft.notes.append(
            f"{sft_steps} steps x {global_batch} samples = {sft_steps * global_batch / samples:,.1f}"
            f" epochs over ~{samples:,} samples (estimated: train units x "
            f"{SFT_STEPS_PER_EPISODE:g} x max_steps); sft.epochs sizes the run by passes"
        )
    sft.flops = sft_steps * sft_flops(d.shape, global_batch, seq, patches)
    micro_per_step = max(1, s.grad_accum // c.num_nodes)  # per rank (trainer.py)
    sft_comm_s = micro_per_step * (2 * all_gather_s + reduce_scatter_s)
    priced(sft, (seconds(sft.flops / gpus, "sft") + sft_steps * sft_comm_s) / 3600)
    sft.notes.append(f"MFU {out.mfu_of('sft'):.2f} ({_source('sft', out)})")
    if shards > 1:
        sft.notes.append(
            f"fsdp over {shards} ranks: {sft_comm_s:.1f} s a step of collectives "
            f"({micro_per_step} micro-batches x (2 all-gathers of {weights / GIB:.1f} GiB at "
            f"{all_gather_s:.2f} s + a reduce-scatter of the gradients {reduce_scatter_s:.2f} s) "
            f"at {FSDP_BANDWIDTH[link][0] / 1e9:.0f} GB/s ({link}), not overlapped)"
        )
    sft_step_s = sft.hours * 3600 / sft_steps
    interval = s.save_steps * sft_step_s
    if getattr(s, "save_minutes", None):
        interval = min(interval, s.save_minutes * 60)
    sft.notes.append(
        f"{sft_step_s:.0f} s a step; a checkpoint every {interval / 60:.0f} min "
        f"(save_steps {s.save_steps}"
        + (f", save_minutes {s.save_minutes:g}" if getattr(s, "save_minutes", None) else "")
        + ")"
    )
    if interval > CHECKPOINT_WARN_MINUTES * 60:
        out.warnings.append(
            f"sft: the plan puts {interval / 60:.0f} minutes between checkpoints (save_steps "
            f"{s.save_steps} x {sft_step_s:.0f} s a step); a spot preemption loses up to that "
            f"on {gpus} GPUs (${interval / 3600 * gpus * price:,.0f}). Fix: set sft.save_minutes "
            f"(e.g. 20) or lower sft.save_steps."
        )
    if s.grad_accum % c.num_nodes:
        sft.problem = (
            "sft.grad_accum",
            f"sft: grad_accum {s.grad_accum} is not a multiple of num_nodes {c.num_nodes}; each "
            "node runs grad_accum / num_nodes micro-batches so the global batch stays the spec's",
        )
    one_sample = gathered + seq * activation_bytes_per_token(d, w, True)
    held = held_weights + held_state + gathered
    if not needs_sharding(sft, one_sample) and sft.peak_bytes > budget:
        if (
            not ckpt
            and held + s.batch_size * seq * activation_bytes_per_token(d, w, True) <= budget
        ):
            sft.problem = ("sft.gradient_checkpointing", "sft: set it true: " + _over(sft, budget))
        else:
            fit = _largest(lambda n: held + n * seq * act <= budget, max(1, s.batch_size))
            if fit:
                sft.problem = ("sft.batch_size", f"sft: {_over(sft, budget)}; at most {fit} fits")
            else:
                sft.problem = ("sft.gradient_checkpointing", f"sft: {_over(sft, budget)}")
    out.stages.append(sft)

    # ------------------------------------------------------------------ mine
    if units is not None and getattr(spec, "mine", None) is not None:
        mine_units = units.get("mine") or units.get("train", 0)
        episodes = mine_units * spec.mine.samples_per_task
        out.stages.append(
            rollout_stage(
                "mine",
                episodes * steps_per_episode,
                episodes,
                policy_engine,
                "the SFT policy on the node's vLLM engine"
                if policy_engine
                else "policy backend hf: not priced",
            )
        )

    # ------------------------------------------------------------------ rl
    r = spec.rl
    if r is not None and getattr(r, "kind", None) != "continued_sft":
        # Sampling is sharded (ranks.py): the batch's chunks of micro_batch_size sequences
        # are dealt to the ranks, each rank samples its share and all gather; each rank
        # then runs the loss-and-backward of its 1/gpus share; the summed gradients make
        # one step. With rl.sampler vllm, rank 0's engine samples the whole batch.
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
        probe_states = int(getattr(r, "kl_probe_states", 0) or 0)
        probe_micro = min(r.micro_batch_size or probe_states, probe_states)
        probe = probe_micro * (total * kv + PROBE_LOGIT_BYTES * d.vocab * new)

        def rl_peak(m: int, act_per_token: float, probe_bytes: float = probe) -> float:
            # fsdp: sampling and the probe gather the whole model; the update two layers.
            sampling = 0.0 if vllm else gen_gathered + m * total * kv
            return (
                held_weights
                + held_state
                + vllm
                + max(
                    sampling,
                    gathered + m * (total * act_per_token + logits),
                    (gen_gathered + probe_bytes) if probe_bytes else 0.0,
                )
            )

        ref = weights if (not lora and (r.beta > 0 or probe_states)) else 0.0
        sampling_memory = (
            {"vllm_share (rl.sampler: weights + KV cache)": vllm}
            if vllm
            else {f"kv_cache (HF generate, {micro} x {total} tokens)": micro * total * kv}
        )
        rl = StagePlan(
            "rl",
            {
                f"weights{sharded_as}": held_weights,
                f"trainable_state{sharded_as}": held_state,
                **(
                    {
                        "gathered for sampling and the KL probe (fsdp: the whole model)": (
                            gen_gathered
                        ),
                        "gathered for the update (fsdp: root unit + 2 decoder layers)": gathered,
                    }
                    if shards > 1
                    else {}
                ),
                "frozen_reference": ref,
                **sampling_memory,
                f"update activations ({'with' if r.gradient_checkpointing else 'without'} "
                "checkpointing) + logits": micro * (total * rl_act + logits),
                f"kl_probe ({probe_micro} x {total} tokens: KV cache + 2 completion logits)": probe,
            },
            rl_peak(micro, rl_act) + ref,
        )
        # Time per step: sampling (each rank its chunks), the update (1/gpus each), and the
        # KL probe at every checkpoint (sampling + the policy's and reference's forwards).
        hf_eff = DECODE_EFFICIENCY["hf"][0]
        prefill_one = 2 * d.shape.text_linear * prompt + vision_forward_of(d, patches)

        def hf_sampling_s(n: int, m: int, ranks: int) -> float:
            chunks = math.ceil(math.ceil(n / m) / ranks)  # per rank, in turn
            one = seconds(m * prefill_one, "prefill") + decode_seconds(
                d, w, m, prompt, new, bandwidth, hf_eff
            )
            return chunks * (one + all_gather_s)  # fsdp: the model gathered per call

        if vllm:
            v_eff = DECODE_EFFICIENCY["vllm"][0]
            cap = max(1, int((vllm - weights) / (total * kv)))
            batch_in_engine = min(seqs, cap)
            sample_s = seconds(seqs * prefill_one, "prefill") + math.ceil(
                seqs / batch_in_engine
            ) * decode_seconds(d, w, batch_in_engine, prompt, new, bandwidth, v_eff)
            how = f"vLLM on rank 0 ({batch_in_engine} sequences at once, decode at {v_eff:.2f} of HBM)"
        else:
            sample_s = hf_sampling_s(seqs, micro, gpus)
            how = (
                f"HF generate, {math.ceil(math.ceil(seqs / micro) / gpus)} chunk(s) of {micro} per "
                f"rank (decode at {hf_eff:.2f} of HBM)"
            )
        update_one = train_flops(d.shape, total, new, patches)
        update_comm_s = math.ceil(share / micro) * (2 * all_gather_s + reduce_scatter_s)
        update_s = seconds(share * update_one, "rl_update") + update_comm_s
        probes = (
            (r.steps // r.save_steps + (0 if r.steps % r.save_steps == 0 else 1))
            if probe_states
            else 0
        )
        probe_s = 0.0
        if probe_states:
            probe_s = (
                hf_sampling_s(probe_states, probe_micro or 1, gpus)
                + seconds(
                    math.ceil(probe_states / gpus) * 2 * 2 * d.shape.text_linear * total,
                    "prefill",
                )
                + math.ceil(math.ceil(probe_states / (probe_micro or 1)) / gpus)
                * 2
                * all_gather_s  # fsdp: the policy's and the reference's forwards
            )
        step_s = sample_s + update_s
        rl.flops = r.steps * seqs * (rollout_flops(d.shape, prompt, new, patches) + update_one)
        priced(rl, (r.steps * step_s + probes * probe_s) / 3600)
        rl.notes.append(
            f"a step: sampling {sample_s:.0f} s ({how}), update {update_s:.0f} s ({share} of "
            f"{seqs} sequences a rank, MFU {out.mfu_of('rl_update'):.2f}); KL probe "
            f"{probe_s:.0f} s x {probes} checkpoints ({probe_states} states in micro-batches "
            f"of {probe_micro})"
        )
        rl.notes.append(
            f"micro-batch {micro}; sampling sharded over the {gpus} ranks and gathered, each "
            f"rank updates on its {share} (gradients summed)"
        )
        if shards > 1:
            rl.notes.append(
                f"fsdp over {shards} ranks: an all-gather of the weights {all_gather_s:.2f} s at "
                f"{FSDP_BANDWIDTH[link][0] / 1e9:.0f} GB/s ({link}) per generate call, two per "
                f"update micro-batch (+ reduce-scatter {reduce_scatter_s:.2f} s): "
                f"{update_comm_s:.1f} s of the update a step"
            )
        rl_interval = r.save_steps * step_s
        if rl_interval > CHECKPOINT_WARN_MINUTES * 60:
            out.warnings.append(
                f"rl: the plan puts {rl_interval / 60:.0f} minutes between checkpoints "
                f"(save_steps {r.save_steps} x {step_s:.0f} s a step). Fix: lower rl.save_steps."
            )
        one = (
            rl_peak(1, activation_bytes_per_token(d, w, True), 0.0)
            - held_weights
            - held_state
            - vllm
        )
        if vllm and vllm - weights < sampler.max_model_len * kv:
            rl.problem = (
                "rl.sampler.gpu_memory_utilization",
                f"rl: the vLLM share {vllm / GIB:.1f} GiB holds weights {weights / GIB:.1f} GiB "
                f"and KV cache for fewer than max_model_len {sampler.max_model_len} tokens; "
                "raise it",
            )
        elif vllm and held_weights + held_state + vllm + one + ref > budget:
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
                fit = _largest(
                    lambda m: (
                        rl_peak(
                            m,
                            rl_act,
                            min(m, probe_states) * (total * kv + PROBE_LOGIT_BYTES * d.vocab * new),
                        )
                        + ref
                        <= budget
                    ),
                    micro,
                )
                if fit:
                    rl.problem = (
                        "rl.micro_batch_size",
                        f"rl: {_over(rl, budget)}; at most {fit} fits",
                    )
                else:
                    rl.problem = ("rl.gradient_checkpointing", f"rl: {_over(rl, budget)}")
        out.stages.append(rl)

    # ------------------------------------------------------------------ eval
    if units is not None:
        for policy in spec.eval.policies:
            engine = policy_engine if getattr(policy, "kind", "") == "checkpoint" else None
            # eval.suites: each benchmark by its own step limit and judge; `units` holds
            # its tasks as "eval:<name>" (the caller counts them, rmsweb/suites/overlap.py)
            for ev in getattr(spec.eval, "suites", None) or []:
                n = units.get(f"eval:{ev.name}", 0)
                out.stages.append(
                    rollout_stage(
                        f"eval {policy.name} on {ev.name}",
                        n * ev.suite.max_steps,
                        n,
                        engine,
                        f"{ev.name}: {n} tasks, {ev.suite.max_steps} steps each at most",
                        judged_by=(ev.suite.judge, ev.suite.max_steps),
                    )
                )
            if getattr(spec.eval, "suites", None):
                continue
            splits = getattr(policy, "splits", None) or spec.eval.splits
            episodes = sum(units.get(split, 0) for split in splits)
            out.stages.append(
                rollout_stage(
                    f"eval {policy.name}",
                    episodes * steps_per_episode,
                    episodes,
                    policy_engine if getattr(policy, "kind", "") == "checkpoint" else None,
                    f"splits {', '.join(splits)}",
                )
            )

    # ------------------------------------------------------------------ vLLM rollouts
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


def vision_forward_of(d: ModelDims, patches: int) -> float:
    from rmsweb.models.flops import vision_forward

    return vision_forward(d.shape, patches) if patches else 0.0


def _source(kind: str, p: Plan) -> str:
    return "--mfu" if p.mfu is not None else MFU[kind][1].split(":")[0]


def checkpoint_warnings(spec: Any) -> list[str]:
    """`validate`'s warnings: more than CHECKPOINT_WARN_MINUTES between checkpoints of a
    GPU stage (empty for CPU specs and unknown models)."""
    if not spec.compute.accelerators or model_dims(spec) is None:
        return []
    return plan(spec).warnings


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
    mfu = (
        f"MFU {p.mfu:.2f} of the datasheet peak (--mfu)"
        if p.mfu is not None
        else "MFU per stage: " + ", ".join(f"{k} {v:.2f}" for k, (v, _) in MFU.items())
    )
    sharding = f"fsdp over {p.shards} ranks" if p.shards > 1 else "none (data parallel)"
    lines = [
        f"{p.name}: {p.gpus} x {p.gpu} ({p.gpu_bytes / GIB:.0f} GiB, {USABLE:.0%} usable), "
        f"sharding {sharding}, {mfu}; decode at {DECODE_EFFICIENCY['hf'][0]:.2f} (HF generate) / "
        f"{DECODE_EFFICIENCY['vllm'][0]:.2f} (vLLM) of HBM bandwidth; "
        f"${p.usd_per_gpu_hour:.2f}/GPU-hour"
    ]
    if not p.stages:
        lines.append("  model shape unknown: nothing to plan")
    for s in p.stages:
        status = (
            ("REFUSED: needs model sharding" if s.missing else "REFUSED") if s.problem else "fits"
        )
        if s.memory:
            lines.append(f"  {s.stage}: peak {s.peak_bytes / GIB:.1f} GiB per GPU ({status})")
        else:
            lines.append(f"  {s.stage}: ({status})")
        for k, v in s.memory.items():
            lines.append(f"    {k}: {v / GIB:.2f} GiB")
        if s.hours or s.usd:
            flops = f"model FLOPs {s.flops:.3e}; " if s.flops else ""
            lines.append(f"    {flops}{s.hours:.1f} h; ${s.usd:,.0f} ({p.gpus} GPUs)")
        lines.extend(f"    note: {n}" for n in s.notes)
        if s.problem:
            lines.append(f"    error: {s.problem[0]}: {s.problem[1]}")
    if p.stages:
        lines.append(f"  total: {p.total_hours:,.1f} h; ${p.total_usd:,.0f}")
        if p.mfu is None:
            lines.extend(f"  source of MFU {k} {v:.2f}: {src}" for k, (v, src) in MFU.items())
            lines.extend(
                f"  source of decode {k} {v:.2f}: {src}"
                for k, (v, src) in DECODE_EFFICIENCY.items()
            )
        if p.shards > 1:
            lines.extend(
                f"  source of fsdp bandwidth {k} {v / 1e9:.0f} GB/s: {src}"
                for k, (v, src) in FSDP_BANDWIDTH.items()
            )
    lines.extend(f"  warning: {w}" for w in p.warnings)
    return "\n".join(lines)


def total_hours(p: Plan) -> float:
    return sum(s.hours for s in p.stages if not math.isnan(s.hours))
