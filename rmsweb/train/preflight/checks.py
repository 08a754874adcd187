"""The preflight's checks: each runs one piece of the paper-scale path at full size and
says what broke and how to fix it.

1. `sft_step`: one SFT step (train/sft's own train_sft, screenshots through the
   processor, LoRA as the spec) at the spec's micro-batch and longest sequence, on a
   model of the spec's architecture with random weights (no download: the shape is
   known, the tokenizer is trained offline on a few pages of words); its peak GPU memory
   against `rmsweb plan`'s estimate of the same step (within TOLERANCE above it).
2. `rl_step`: one RL step (the salvage_ds trainer: sampling with HF generate, loss and
   backward in micro-batches) and the KL probe at that micro-batch, peak memory against
   the plan's RL estimate.
3. `checkpoint`: the RL checkpoint written into the checkpoint folder (the bucket mount
   on clouds, $RMSWEB_CHECKPOINT_DIR), its COMPLETE marker present, read back into a
   fresh model and compared.
4. `all_reduce`: under torchrun, a sum over every rank (on several nodes, across them).
5. `vllm`: GPU only: a small VL SFT folder saved as the sft stage saves it (random tiny
   Qwen3-VL, one step of train_sft with screenshots, merged LoRA, the processor), served
   by `vllm serve` on 127.0.0.1 and asked one chat request with an image.
Each returns a Check; the stage writes them as DVC metrics and fails on the first
failed one with its message and fix.
"""

from __future__ import annotations

import base64
import io
import json
import math
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

GIB = 2**30
TOLERANCE = 0.15  # measured peak may exceed the plan's estimate by at most this
VLLM_PORT = 18699
VLLM_READY_S = 420


@dataclass
class Check:
    name: str
    ok: bool
    seconds: float = 0.0
    figures: dict[str, Any] = field(default_factory=dict)
    message: str = ""
    fix: str = ""
    skipped: bool = False

    def as_metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ok": self.ok,
            "skipped": self.skipped,
            "seconds": round(self.seconds, 2),
            **self.figures,
        }
        if self.message:
            out["message"] = self.message
        return out


def run_check(name: str, fix: str, fn: Callable[[], dict[str, Any]]) -> Check:
    """Run `fn` (its figures); an exception is the check's failure, named with `fix`."""
    start = time.perf_counter()
    try:
        figures = fn()
    except Exception as exc:  # every failure is a finding: report it, never a traceback
        return Check(
            name, False, time.perf_counter() - start, {}, f"{type(exc).__name__}: {exc}", fix
        )
    ok = not figures.pop("_failed", "")
    message = figures.pop("_message", "")
    return Check(name, ok, time.perf_counter() - start, figures, message, fix if not ok else "")


def skipped(name: str, why: str) -> Check:
    return Check(name, True, 0.0, {}, why, "", skipped=True)


# --------------------------------------------------------------------------- models


@dataclass
class Policy:
    model: Any
    tokenizer: Any
    processor: Any
    is_vl: bool
    dims: Any  # rmsweb.models.plan.ModelDims of the model as built


def _tokenizer(vocab: int) -> Any:
    from rmsweb.models.tokenizer import train_tokenizer

    return train_tokenizer(corpus(), vocab)


def corpus() -> list[str]:
    words = "click fill select press answer stop button link textbox heading search submit"
    pages = [
        f'[{i}] button "{w} {i}"\n[{i + 1}] link "more {w}"' for i, w in enumerate(words.split())
    ]
    return [*pages, words, "Task: find the price of the product. Page: " + words]


def vl_processor(tokenizer: Any, patch_size: int, max_tokens: int) -> Any:
    """The image-only Qwen3-VL processor with bounds that keep a screenshot's full size up
    to `max_tokens` merged tokens (the real models' processor keeps 1280x800 whole)."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    from rmsweb.models.processor import ImageOnlyQwen3VLProcessor

    unit = patch_size * 2
    image_processor = Qwen2VLImageProcessorPil(
        patch_size=patch_size,
        merge_size=2,
        temporal_patch_size=2,
        size={"shortest_edge": unit * unit * 4, "longest_edge": unit * unit * max(4, max_tokens)},
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )
    return ImageOnlyQwen3VLProcessor(
        image_processor=image_processor, tokenizer=tokenizer, chat_template=tokenizer.chat_template
    )


def build_policy(spec: Any, device: str, seed: int = 0) -> Policy:
    """A random model of the spec's policy architecture on `device`, with an offline
    tokenizer (and VL processor); the real vocabulary size is kept."""
    import torch

    from rmsweb.models.flops import KNOWN_MODELS
    from rmsweb.models.plan import dims_from_config

    m = spec.model
    torch.manual_seed(seed)
    if m.kind == "tiny":
        from rmsweb.models.config import TinySize
        from rmsweb.models.tiny import build_text_model
        from rmsweb.models.vl import build_vl_model

        size = TinySize.of(m)
        tok = _tokenizer(m.vocab_size)
        is_vl = m.arch == "qwen3_vl"
        model = build_vl_model(tok, size, seed) if is_vl else build_text_model(tok, size, seed)
        model.to(device)
    else:
        if m.name_or_path not in KNOWN_MODELS:
            raise ValueError(
                f"model {m.name_or_path!r}: its shape is not known offline (rmsweb/models/"
                "flops.py KNOWN_MODELS); the preflight builds random weights of a known shape"
            )
        from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

        text, vision = KNOWN_MODELS[m.name_or_path]
        tok = _tokenizer(2048)
        ids = {t: tok.convert_tokens_to_ids(t) for t in tok.additional_special_tokens}
        config = Qwen3VLConfig(
            text_config={
                **text,
                "pad_token_id": tok.pad_token_id,
                "eos_token_id": tok.eos_token_id,
            },
            vision_config=vision,
            image_token_id=ids["<|image_pad|>"],
            video_token_id=ids["<|video_pad|>"],
            vision_start_token_id=ids["<|vision_start|>"],
            vision_end_token_id=ids["<|vision_end|>"],
            tie_word_embeddings=bool(text.get("tie_word_embeddings", False)),
        )
        dtype = getattr(torch, m.dtype)
        previous = torch.get_default_dtype()
        torch.set_default_dtype(dtype)
        try:
            with torch.device(device):
                model = Qwen3VLForConditionalGeneration(config)
        finally:
            torch.set_default_dtype(previous)
        is_vl = True
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    text_cfg = model.config.get_text_config().to_dict()
    vision_cfg = model.config.vision_config.to_dict() if is_vl else None
    dims = dims_from_config(text_cfg, vision_cfg, m.lora)
    patch = vision_cfg["patch_size"] if vision_cfg else 16
    processor = vl_processor(tok, patch, 4096) if is_vl else tok
    return Policy(model, tok, processor, is_vl, dims)


def screenshot(width: int, height: int, seed: int = 0) -> Any:
    """A noise image of the viewport's size (random pixels: the processor's work is real)."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8), "RGB")


def png(image: Any) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def long_text(tokenizer: Any, tokens: int) -> str:
    """Page text of about `tokens` tokens (element lines, as observations look)."""
    lines, n, i = [], 0, 0
    while n < tokens:
        line = f'[{i}] button "submit order {i}"'
        n += len(tokenizer(line + "\n", add_special_tokens=False)["input_ids"])
        lines.append(line)
        i += 1
    return "\n".join(lines)


def prompt_messages(tokenizer: Any, spec: Any, with_image: bool) -> list[dict]:
    """A prompt at the spec's budget: instruction, then page text up to max_prompt_tokens."""
    text = "Task: buy the cheapest item.\nPage:\n" + long_text(
        tokenizer, max(16, spec.model.prompt.max_prompt_tokens - 64)
    )
    content: Any = [{"type": "image"}, {"type": "text", "text": text}] if with_image else text
    return [{"role": "user", "content": content}]


def completion(tokenizer: Any, tokens: int) -> str:
    """A completion of about `tokens` tokens: a thought, then an action."""
    thought = long_text(tokenizer, max(1, tokens - 8)).replace("\n", " ")
    return f"Thought: {thought}\nAction: click(2)"


def weight_bytes(spec: Any) -> int:
    """Bytes per weight as the stages load the model: fp32 for tiny models (CPU)."""
    m = spec.model
    return 4 if m.kind == "tiny" or getattr(m, "dtype", "float32") == "float32" else 2


def free_memory() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak_gib() -> float:
    import torch

    return torch.cuda.max_memory_allocated() / GIB if torch.cuda.is_available() else math.nan


def compare(figures: dict[str, Any], measured: float, planned: float) -> dict[str, Any]:
    """Peak against the plan: fails when the measured peak exceeds it by > TOLERANCE."""
    figures["peak_gib"] = round(measured, 3) if math.isfinite(measured) else None
    figures["plan_gib"] = round(planned, 3)
    if not math.isfinite(measured):
        figures["peak_vs_plan"] = None  # no CUDA: nothing to compare
        return figures
    ratio = measured / planned if planned else math.inf
    figures["peak_vs_plan"] = round(ratio, 3)
    if ratio > 1 + TOLERANCE:
        figures["_failed"] = "over plan"
        figures["_message"] = (
            f"peak {measured:.1f} GiB is {ratio:.2f}x the plan's {planned:.1f} GiB "
            f"(tolerance {TOLERANCE:.0%}): the plan under-counts and a full run may OOM"
        )
    elif ratio < 1 - TOLERANCE:
        figures["note"] = f"peak {ratio:.2f}x the plan: the plan over-counts (safe side)"
    return figures


# --------------------------------------------------------------------------- checks


def sharding_of(spec: Any) -> str:
    """compute.sharding as the sft and rl stages resolve it (models/plan.py)."""
    from rmsweb.models.plan import resolved_sharding

    return resolved_sharding(spec)


def held_bytes(spec: Any, d: Any, w: int, sharded: bool, world: int) -> tuple[float, float]:
    """(what each rank holds for the whole stage: weights + trainable state, what it
    gathers to compute under fsdp: the root unit and two layers), as `rmsweb plan`."""
    from rmsweb.models.plan import fsdp_gather_bytes, trainable_bytes

    held = w * d.params + trainable_bytes(d, w, spec.model.lora.enabled)
    if not sharded:
        return held, 0.0
    return held / world, fsdp_gather_bytes(d, w)


def sft_step(spec: Any, device: str, work: Path, world: int) -> dict[str, Any]:
    """One SFT step at the spec's micro-batch and longest sequence (sharded with FSDP2
    where the spec's compute.sharding resolves to fsdp)."""
    from rmsweb.models.config import lora_kwargs
    from rmsweb.models.plan import activation_bytes_per_token
    from rmsweb.train.sft.samples import Sample
    from rmsweb.train.sft.trainer import SFTHyper, train_sft

    free_memory()
    s, p = spec.sft, spec.model.prompt
    policy = build_policy(spec, device)
    b = spec.suite.browser
    with_image = policy.is_vl and p.screenshot
    image_png = png(screenshot(b.viewport_width, b.viewport_height)) if with_image else None
    messages = prompt_messages(policy.tokenizer, spec, with_image)
    target = completion(policy.tokenizer, p.max_new_tokens)
    samples = [
        Sample("preflight", k, 0, messages, target, "x" if image_png else None, image_png)
        for k in range(s.batch_size * world)
    ]
    hyper = SFTHyper(
        max_steps=1,
        batch_size=s.batch_size,
        grad_accum=1,
        learning_rate=1e-5,
        lr_scheduler="constant",
        warmup_ratio=0.0,
        min_lr_ratio=0.1,
        weight_decay=0.0,
        adam_beta1=0.9,
        adam_beta2=0.95,
        max_grad_norm=1.0,
        max_seq_len=s.max_seq_len,
        save_steps=10,
        logging_steps=1,
        val_fraction=0.0,
        precision=s.precision,
        gradient_checkpointing=s.gradient_checkpointing,
        seed=0,
    )
    tokens = len(
        policy.processor(
            text=[policy.tokenizer.apply_chat_template(messages, tokenize=False)],
            images=[screenshot(b.viewport_width, b.viewport_height)] if with_image else None,
        )["input_ids"][0]
        if policy.is_vl
        else policy.tokenizer.apply_chat_template(messages, tokenize=True)
    )
    start = time.perf_counter()
    _, history = train_sft(
        policy.model,
        policy.tokenizer,
        samples,
        hyper,
        work / "sft",
        lora_kwargs(spec.model.lora),
        processor=policy.processor if policy.is_vl else None,
        sharding=sharding_of(spec),
    )
    step_s = time.perf_counter() - start
    loss = next((h["loss"] for h in history if "loss" in h), math.nan)
    d, w = policy.dims, weight_bytes(spec)
    seq = min(s.max_seq_len, tokens + p.max_new_tokens)
    held, gathered = held_bytes(spec, d, w, sharding_of(spec) == "fsdp", world)
    planned = (
        held
        + gathered
        + s.batch_size * seq * activation_bytes_per_token(d, w, s.gradient_checkpointing)
    )
    figures = {
        "sharding": sharding_of(spec),
        "tokens_per_sample": seq,
        "micro_batch": s.batch_size,
        "step_s": round(step_s, 2),
        "loss": loss,
    }
    if not math.isfinite(loss):
        figures["_failed"] = "loss"
        figures["_message"] = f"the SFT step's loss is {loss}"
    del policy
    return compare(figures, peak_gib(), planned / GIB)


def rl_policy_and_trainer(spec: Any, device: str, work: Path, world: int) -> tuple[Any, Any]:
    from rmsweb.models.config import lora_kwargs
    from rmsweb.train.salvage_ds.states import RLState
    from rmsweb.train.salvage_ds.trainer import RLHyper, SalvageDSTrainer, algorithm

    r, p = spec.rl, spec.model.prompt
    policy = build_policy(spec, device, seed=1)
    b = spec.suite.browser
    with_image = policy.is_vl and p.screenshot
    micro = r.micro_batch_size or r.batch_size
    groups = max(1, math.ceil(micro * world / r.group_size))  # one micro-batch a rank
    states = [
        RLState(
            f"preflight-{k}",
            prompt_messages(policy.tokenizer, spec, with_image),
            ["click(2)"],
            image=screenshot(b.viewport_width, b.viewport_height, k) if with_image else None,
        )
        for k in range(groups)
    ]
    hyper = RLHyper(
        steps=1,
        group_size=r.group_size,
        batch_size=r.group_size * groups,
        learning_rate=1e-6,
        algorithm=algorithm("grpo"),  # no gate: every group takes the policy-gradient path
        max_new_tokens=p.max_new_tokens,
        micro_batch_size=micro,
        gradient_checkpointing=r.gradient_checkpointing,
        kl_probe_states=min(r.kl_probe_states or groups, groups),
        save_steps=1,
        seed=0,
    )
    trainer = SalvageDSTrainer(
        policy.model,
        policy.tokenizer,
        states,
        hyper,
        work / "rl",
        processor=policy.processor,
        is_vl=policy.is_vl,
        lora=lora_kwargs(spec.model.lora),
        sharding=sharding_of(spec),
    )
    return policy, trainer


def rl_step(spec: Any, trainer: Any, policy: Any) -> dict[str, Any]:
    """One RL step and the KL probe, at the spec's micro-batch."""
    from rmsweb.models.plan import (
        PROBE_LOGIT_BYTES,
        activation_bytes_per_token,
        kv_bytes_per_token,
    )
    from rmsweb.train.salvage_ds import ranks
    from rmsweb.train.salvage_ds.kl_probe import probe_policy

    free_memory()
    r, p = spec.rl, spec.model.prompt
    start = time.perf_counter()
    row = trainer.train_step(1)
    step_s = time.perf_counter() - start
    probe = probe_policy(trainer)
    probe_s = time.perf_counter() - start - step_s
    d, w = policy.dims, weight_bytes(spec)
    prompt = len(trainer.encode(0).input_ids)
    total = prompt + p.max_new_tokens
    micro = trainer.h.micro_batch_size
    new = p.max_new_tokens
    kv = kv_bytes_per_token(d, w)
    act = activation_bytes_per_token(d, w, r.gradient_checkpointing)
    sharded = bool(getattr(trainer, "sharded", False))
    held, gathered = held_bytes(spec, d, w, sharded, ranks.rank_world()[1])
    # fsdp: sampling and the probe gather the whole model (the rest of it beside the shard)
    rest = w * d.params * (1 - 1 / ranks.rank_world()[1]) if sharded else 0.0
    planned = held + max(
        rest + micro * total * kv,
        gathered + micro * (total * act + 3 * 4 * d.vocab * new),
        rest
        + min(micro, trainer.h.kl_probe_states) * (total * kv + PROBE_LOGIT_BYTES * d.vocab * new),
    )
    figures = {
        "sharding": "fsdp" if sharded else "none",
        "prompt_tokens": prompt,
        "sequences": row["samples_generated"],
        "micro_batch": micro,
        "step_s": round(step_s, 2),
        "generate_s": row["generate_s"],
        "probe_s": round(probe_s, 2),
        "probe_states": trainer.h.kl_probe_states,
        "entropy": probe["entropy"],
        "kl_to_sft": probe["kl_to_sft"],
    }
    if not math.isfinite(probe["entropy"]):
        figures["_failed"] = "probe"
        figures["_message"] = "the KL probe measured no entropy"
    return compare(figures, peak_gib(), planned / GIB)


def checkpoint(trainer: Any, folder: Path) -> dict[str, Any]:
    """The RL checkpoint through the checkpoint folder (the bucket mount on clouds)."""
    import torch

    from rmsweb.train.salvage_ds import ranks
    from rmsweb.train.salvage_ds.checkpoint import (
        COMPLETE,
        checkpoints,
        load_checkpoint,
        save_checkpoint,
    )

    figures: dict[str, Any] = {"folder": str(folder)}
    if getattr(trainer, "sharded", False):
        return sharded_checkpoint(trainer, folder, figures)
    if not ranks.is_writer():
        return figures
    shutil.rmtree(folder, ignore_errors=True)
    logs = {"curve": [], "groups": [], "generate_s": 0.0, "train_s": 0.0}
    start = time.perf_counter()
    path = save_checkpoint(folder, 1, trainer.model, trainer.optimizer, logs)
    figures["write_s"] = round(time.perf_counter() - start, 2)
    figures["mib"] = round(sum(f.stat().st_size for f in path.iterdir()) / 2**20, 2)
    if not (path / COMPLETE).is_file() or checkpoints(folder) != [path]:
        figures["_failed"] = "marker"
        figures["_message"] = f"{path} has no {COMPLETE} marker after the copy"
        return figures
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    with torch.no_grad():
        for p in trainer.model.parameters():
            if p.requires_grad:
                p.zero_()
    start = time.perf_counter()
    step, _ = load_checkpoint(folder, trainer.model, trainer.optimizer)
    figures["read_s"] = round(time.perf_counter() - start, 2)
    after = dict(trainer.model.named_parameters())
    same = step == 1 and all(torch.equal(before[n], after[n]) for n in before)
    if not same:
        figures["_failed"] = "read back"
        figures["_message"] = "the checkpoint read back differs from what was written"
    shutil.rmtree(folder, ignore_errors=True)
    return figures


def sharded_checkpoint(trainer: Any, folder: Path, figures: dict[str, Any]) -> dict[str, Any]:
    """`checkpoint` of a sharded trainer: every rank gathers the whole adapters and
    optimizer state, rank 0 writes them, every rank reads them back into its shards."""
    import torch

    from rmsweb.train import sharding
    from rmsweb.train.salvage_ds import ranks
    from rmsweb.train.salvage_ds.checkpoint import (
        COMPLETE,
        checkpoints,
        load_checkpoint,
        save_checkpoint,
        sharded_state,
    )

    logs = {"curve": [], "groups": [], "generate_s": 0.0, "train_s": 0.0}
    start = time.perf_counter()
    gathered = sharded_state(trainer.model, trainer.optimizer)
    ok = True
    if ranks.is_writer():
        shutil.rmtree(folder, ignore_errors=True)
        path = save_checkpoint(folder, 1, trainer.model, trainer.optimizer, logs, **gathered)
        figures["mib"] = round(sum(f.stat().st_size for f in path.iterdir()) / 2**20, 2)
        ok = (path / COMPLETE).is_file() and checkpoints(folder) == [path]
    figures["write_s"] = round(time.perf_counter() - start, 2)
    if ranks.sum_floats(0.0 if ok else 1.0)[0]:  # every rank: written or not
        figures["_failed"] = "marker"
        figures["_message"] = f"{folder}: no checkpoint with its {COMPLETE} marker after the copy"
        return figures
    before = gathered["weights"]
    with torch.no_grad():
        for p in trainer.model.parameters():
            if p.requires_grad:
                p.zero_()
    start = time.perf_counter()
    step, _ = load_checkpoint(folder, trainer.model, trainer.optimizer)  # every rank
    figures["read_s"] = round(time.perf_counter() - start, 2)
    after = sharding.full_trainable(trainer.model)
    if not (step == 1 and all(torch.equal(before[n], after[n]) for n in before)):
        figures["_failed"] = "read back"
        figures["_message"] = "the checkpoint read back differs from what was written"
    ranks.sum_floats(0.0)  # every rank has read it before rank 0 removes it
    if ranks.is_writer():
        shutil.rmtree(folder, ignore_errors=True)
    return figures


def all_reduce(device: str) -> dict[str, Any]:
    from rmsweb.train.salvage_ds import ranks

    world, total = ranks.all_reduce_check(device)
    local = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    figures: dict[str, Any] = {"world_size": world, "nodes": max(1, world // max(1, local))}
    if total != world:
        figures["_failed"] = "sum"
        figures["_message"] = f"the all-reduce summed to {total}, not {world}"
    return figures


def vllm_serve(spec: Any, work: Path) -> dict[str, Any]:
    """A small VL SFT folder (saved as the sft stage saves it) served by `vllm serve` and
    asked one chat request with an image."""

    from rmsweb.models.config import TinySize
    from rmsweb.models.processor import make_processor
    from rmsweb.models.vl import build_vl_model
    from rmsweb.train.sft.samples import Sample
    from rmsweb.train.sft.trainer import SFTHyper, train_sft

    folder = work / "vl-sft"
    tok = _tokenizer(1024)
    model = build_vl_model(tok, TinySize(), 0)
    processor = make_processor(tok)
    image = screenshot(320, 240)
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Page"}]}]
    samples = [Sample("p", k, 0, messages, "Action: click(2)", "x", png(image)) for k in range(2)]
    hyper = SFTHyper(
        max_steps=1, batch_size=2, grad_accum=1, learning_rate=1e-3, lr_scheduler="constant",
        warmup_ratio=0.0, min_lr_ratio=0.1, weight_decay=0.0, adam_beta1=0.9, adam_beta2=0.95,
        max_grad_norm=1.0, max_seq_len=512, save_steps=10, logging_steps=1, val_fraction=0.0,
        precision="fp32", gradient_checkpointing=False, seed=0,
    )  # fmt: skip
    lora = {"r": 8, "lora_alpha": 16, "lora_dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
    trained, _ = train_sft(model, tok, samples, hyper, work / "vl-work", lora, processor=processor)
    trained.merge_and_unload().save_pretrained(folder)  # as the sft stage saves its model
    processor.save_pretrained(folder)
    del trained, model
    free_memory()
    log = work / "vllm-serve.log"
    vllm = os.environ.get("RMSWEB_VLLM_BIN", "vllm")
    cmd = [
        vllm, "serve", str(folder), "--host", "127.0.0.1", "--port", str(VLLM_PORT),
        "--max-model-len", "2048", "--gpu-memory-utilization", "0.3", "--enforce-eager",
        "--limit-mm-per-prompt", json.dumps({"image": 1}),
    ]  # fmt: skip
    figures: dict[str, Any] = {"folder_mib": round(_size(folder) / 2**20, 2)}
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        start = time.perf_counter()
        while not _healthy(VLLM_PORT):
            if proc.poll() is not None:
                raise RuntimeError(f"vllm serve exited ({proc.returncode}): {_tail(log)}")
            if time.perf_counter() - start > VLLM_READY_S:
                raise RuntimeError(f"vllm serve not ready in {VLLM_READY_S} s: {_tail(log)}")
            time.sleep(2)
        figures["ready_s"] = round(time.perf_counter() - start, 1)
        url = "data:image/png;base64," + base64.b64encode(png(image)).decode()
        body = {
            "model": str(folder),
            "max_tokens": 8,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": url}},
                        {"type": "text", "text": "Page"},
                    ],
                }
            ],
        }
        request = urllib.request.Request(
            f"http://127.0.0.1:{VLLM_PORT}/v1/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=120) as reply:
            answer = json.loads(reply.read())
        usage = answer.get("usage", {})
        figures["prompt_tokens"] = usage.get("prompt_tokens")
        figures["completion_tokens"] = usage.get("completion_tokens")
        text_only = 4  # "Page" + chat markup: an image adds its tokens beyond these
        if not answer.get("choices") or (usage.get("prompt_tokens") or 0) <= text_only + 4:
            figures["_failed"] = "reply"
            figures["_message"] = f"no completion, or the image was dropped: {answer}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
    return figures


def _size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def _tail(log: Path, lines: int = 15) -> str:
    try:
        return " | ".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def vllm_available() -> bool:
    exe = os.environ.get("RMSWEB_VLLM_BIN", "vllm")
    return shutil.which(exe) is not None


def scratch() -> Path:
    return Path(tempfile.mkdtemp(prefix="rmsweb-preflight-"))
