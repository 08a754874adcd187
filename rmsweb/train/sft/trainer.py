"""Step-level SFT with TRL's SFTTrainer: loss on the completion tokens only.

A full fine-tune for tiny models, LoRA (PEFT) when asked. Samples with a screenshot
go in with an `images` column and the trainer gets the VL processor (not the bare
tokenizer), so the image tokens and pixels are those the policy sees at eval.
Checkpoints every `save_steps`, and every `save_minutes` (TimedCheckpoints), under
`work_dir`; a rerun continues from the last whole one (a checkpoint cut short by a
kill, a full disk or a failed copy is skipped with a warning, see `_last_checkpoint`).
Under torchrun on several nodes each node runs grad_accum / nodes micro-batches a step
(`node_grad_accum`), so the global batch is the spec's on any number of nodes.
With sharding "fsdp" (compute.sharding) the Trainer shards the model over the ranks with
accelerate's FSDP2 (`fsdp_arguments`: each decoder layer a unit, the whole model the root,
as train/sharding.py does for RL); the LoRA adapters are trained, the base frozen.
Its checkpoints are sharded (SHARDED_STATE_DICT: a torch.distributed.checkpoint folder,
pytorch_model_fsdp_0/, resumed by the Trainer on the same number of ranks); the stage
gathers the trained adapters whole at the end (sharding.full_trainable) and merges them
into the unsharded base for eval. (FULL_STATE_DICT checkpoints fail in PEFT's save with
FSDP2 in transformers 5.24 / peft 0.21: "Attempted to access the data pointer on an
invalid python storage".)
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import logging
import math
import os
import random
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmsweb.errors import UserError
from rmsweb.train.sft.completion_loss import completion_loss, supports_completion_loss
from rmsweb.train.sft.samples import Sample

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SFTHyper:
    max_steps: int
    batch_size: int
    grad_accum: int
    learning_rate: float
    lr_scheduler: str
    warmup_ratio: float
    min_lr_ratio: float
    weight_decay: float
    adam_beta1: float
    adam_beta2: float
    max_grad_norm: float
    max_seq_len: int
    save_steps: int
    logging_steps: int
    val_fraction: float
    precision: str
    gradient_checkpointing: bool
    seed: int
    save_minutes: float | None = None  # also checkpoint by time (TimedCheckpoints)


def nodes_from_env() -> int:
    """Nodes of this torchrun job (WORLD_SIZE / LOCAL_WORLD_SIZE); 1 outside torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    return max(1, world // max(1, local))


def node_grad_accum(grad_accum: int, nodes: int) -> int:
    """Micro-batches per optimizer step on each of `nodes` nodes, so that the global batch
    is the spec's (batch_size x grad_accum x GPUs per node) on any number of nodes."""
    if grad_accum % nodes:
        raise UserError(
            f"sft.grad_accum {grad_accum} is not a multiple of the {nodes} nodes: the global "
            f"batch cannot stay the spec's. Fix: set sft.grad_accum to a multiple of {nodes}."
        )
    return grad_accum // nodes


def epoch_steps(epochs: float, samples: int, global_batch: int) -> int:
    """Optimizer steps of `epochs` passes over `samples` at `global_batch` samples a step."""
    return max(1, math.ceil(epochs * samples / max(1, global_batch)))


class TimedCheckpoints:
    """A TrainerCallback that also saves once `minutes` have passed since the last save.

    save_steps alone spaces checkpoints by steps: 500 steps of paper-8b's SFT are about 7
    hours of 8 GPUs, all lost to one spot preemption. Under torchrun every rank must agree
    to save (the Trainer's save runs on every rank), so rank 0's clock decides and its
    decision is broadcast each step (one byte). `clock`: for tests.
    """

    def __init__(self, minutes: float, clock: Any = None) -> None:
        import time

        self.seconds = minutes * 60.0
        self.clock = clock or time.monotonic
        self.last = self.clock()

    def _agreed(self, due: bool, device: Any) -> bool:
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return due
        import torch

        flag = torch.tensor([1 if due else 0], dtype=torch.uint8, device=device)
        dist.broadcast(flag, src=0)
        return bool(flag.item())

    # TrainerCallback's hooks (duck-typed: transformers calls those that exist).
    def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> Any:
        due = self.clock() - self.last >= self.seconds
        if self._agreed(due, getattr(args, "device", None)):
            control.should_save = True
        return control

    def on_save(self, args: Any, state: Any, control: Any, **_: Any) -> Any:
        self.last = self.clock()
        return control

    def __getattr__(self, name: str) -> Any:
        if name.startswith("on_"):  # every other TrainerCallback event: nothing to do
            return lambda *a, **k: None
        raise AttributeError(name)


def fsdp_arguments(model: Any) -> dict[str, Any]:
    """SFTConfig arguments that make the Trainer shard `model` with FSDP2 (accelerate)."""
    from rmsweb.train.sharding import decoder_layers

    layers = sorted({type(m).__name__ for m in decoder_layers(model)})
    if not layers:
        raise UserError(
            f"{type(model).__name__}: no decoder layers to shard; compute.sharding fsdp "
            "supports Qwen3 and Qwen3-VL models. Set compute.sharding none."
        )
    return {
        "fsdp": "full_shard",
        "fsdp_config": {
            "version": 2,
            "transformer_layer_cls_to_wrap": layers,
            "reshard_after_forward": True,
            "state_dict_type": "SHARDED_STATE_DICT",  # see the module docstring
        },
    }


def _scheduler(h: SFTHyper) -> tuple[str, dict[str, Any]]:
    if h.lr_scheduler == "cosine":
        return "cosine_with_min_lr", {"min_lr_rate": h.min_lr_ratio}
    return h.lr_scheduler, {}


# TRL computes the SFT loss with a fused LM head: log-probabilities in tiles, never the
# whole (batch, seq, vocab) logits. That saves memory on real vocabularies (151k for
# Qwen3-VL), but on CPU its tile loops cost 2x the tiny model's own forward and backward.
# When a batch's full logits are this small, the plain causal-LM loss is used instead:
# the same number (token-summed NLL over the completion tokens / their count), faster.
PLAIN_LOSS_MAX_LOGIT_BYTES = 256 * 2**20


def uses_plain_loss(vocab_size: int, h: SFTHyper) -> bool:
    """Whether the full logits of one micro-batch fit PLAIN_LOSS_MAX_LOGIT_BYTES (fp32)."""
    return h.batch_size * h.max_seq_len * vocab_size * 4 <= PLAIN_LOSS_MAX_LOGIT_BYTES


def _checkpointing_field(config_class: Any) -> str:
    """transformers renamed gradient_checkpointing to activation_checkpointing (5.2x);
    the GPU pin (constraints-gpu.txt, vLLM's range) may hold the older name."""
    names = {f.name for f in dataclasses.fields(config_class)}
    return (
        "activation_checkpointing"
        if "activation_checkpointing" in names
        else ("gradient_checkpointing")
    )


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _as_parts(message: dict[str, Any]) -> dict[str, Any]:
    """The message with its content as a list of parts (chat templates render both alike)."""
    content = message["content"]
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    return {**message, "content": content}


def _row(sample: Sample, with_images: bool) -> dict[str, Any]:
    row: dict[str, Any] = {
        "prompt": sample.messages,
        "completion": [{"role": "assistant", "content": sample.completion}],
    }
    if with_images:
        # Arrow cannot hold a column whose values are strings in one row and lists in
        # another: the image prompt's system message (a string) beside its user message
        # (image + text parts) failed Dataset.from_list, so every content becomes parts.
        row = {key: [_as_parts(m) for m in messages] for key, messages in row.items()}
        from PIL import Image

        png = sample.screenshot_png
        row["images"] = [Image.open(io.BytesIO(png)).convert("RGB")] if png else []
    return row


def _plain_compute_loss(
    self: Any,
    model: Any,
    inputs: dict[str, Any],
    return_outputs: bool = False,
    num_items_in_batch: Any = None,
) -> Any:
    """The causal-LM loss on the collator's labels (-100 on the prompt), normalised by
    the batch's completion-token count like TRL's. Training steps of a bare causal LM
    project only the completion positions (completion_loss.py); evaluation (which may
    want the logits) and wrapped or PEFT models take Trainer.compute_loss, the model's
    own loss."""
    from transformers import Trainer

    if return_outputs or not supports_completion_loss(model):
        return Trainer.compute_loss(self, model, inputs, return_outputs, num_items_in_batch)
    loss = completion_loss(
        model, inputs, num_items_in_batch if self.model_accepts_loss_kwargs else None
    )
    if (
        self.args.average_tokens_across_devices
        and self.model_accepts_loss_kwargs
        and num_items_in_batch is not None
    ):
        # As Trainer.compute_loss: the token count is summed over the processes.
        loss = loss * self.accelerator.num_processes
    return loss


def train_sft(
    model: Any,
    tokenizer: Any,
    samples: list[Sample],
    h: SFTHyper,
    work_dir: Path,
    lora: dict[str, Any] | None = None,
    plain_loss: bool | None = None,
    processor: Any = None,
    callbacks: list[Any] | None = None,
    sharding: str = "none",
) -> tuple[Any, list[dict]]:
    """Run SFTTrainer; returns the trained model and the log history.

    `processor`: a VL model's processor; samples with a screenshot need it (it makes
    the image tokens and pixel values) and it then replaces the tokenizer as TRL's
    processing class. `callbacks`: extra transformers TrainerCallbacks (the stage's
    DVCLive logger). `plain_loss`: None decides from the vocabulary size
    (`uses_plain_loss`); True or False forces the plain causal-LM loss or TRL's fused
    one (tests compare them). `sharding`: none (DDP under torchrun) or fsdp
    (`fsdp_arguments`).
    """
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    with_images = any(x.screenshot_png is not None for x in samples)
    if with_images and (processor is None or processor is tokenizer):
        raise ValueError(
            "SFT samples carry screenshots but no VL processor was given: pass the "
            "model's processor (a text-only model cannot train on screenshots)."
        )
    if plain_loss is None:
        plain_loss = uses_plain_loss(model.config.get_text_config().vocab_size, h)

    rng = random.Random(h.seed)
    order = list(range(len(samples)))
    rng.shuffle(order)
    n_val = int(len(samples) * h.val_fraction) if len(samples) >= 50 else 0
    rows = [_row(samples[i], with_images) for i in order]
    train_ds = Dataset.from_list(rows[n_val:])
    eval_ds = Dataset.from_list(rows[:n_val]) if n_val else None
    scheduler, scheduler_kwargs = _scheduler(h)
    config = SFTConfig(
        output_dir=str(work_dir),
        max_steps=h.max_steps,
        per_device_train_batch_size=h.batch_size,
        per_device_eval_batch_size=h.batch_size,
        gradient_accumulation_steps=h.grad_accum,
        learning_rate=h.learning_rate,
        lr_scheduler_type=scheduler,
        lr_scheduler_kwargs=scheduler_kwargs,
        warmup_steps=int(h.warmup_ratio * h.max_steps),
        weight_decay=h.weight_decay,
        adam_beta1=h.adam_beta1,
        adam_beta2=h.adam_beta2,
        max_grad_norm=h.max_grad_norm,
        max_length=h.max_seq_len,
        completion_only_loss=True,
        save_steps=h.save_steps,
        save_total_limit=2,
        logging_steps=h.logging_steps,
        eval_strategy="steps" if eval_ds is not None else "no",
        eval_steps=max(h.logging_steps, h.max_steps // 10) if eval_ds is not None else None,
        bf16=h.precision == "bf16",
        fp16=h.precision == "fp16",
        **{_checkpointing_field(SFTConfig): h.gradient_checkpointing},
        dataloader_pin_memory=False,  # no accelerator on CPU runs; pinning only warns
        # Under torchrun on CPU, accelerate makes the Trainer data-parallel (gloo DDP) only
        # when told it is a CPU run; otherwise every rank trained alone on all the data.
        use_cpu=not _cuda_available(),
        report_to=[],
        seed=h.seed,
        data_seed=h.seed,
        dataloader_num_workers=0,
        disable_tqdm=False,
        save_only_model=False,
        **(fsdp_arguments(model) if sharding == "fsdp" else {}),
    )
    if sharding == "fsdp" and not _cuda_available():  # the CPU rehearsals (2 gloo ranks)
        from rmsweb.train.sharding import accelerate_fsdp_on_cpu

        accelerate_fsdp_on_cpu()
    peft_config = None
    if lora:
        from peft import LoraConfig

        peft_config = LoraConfig(task_type="CAUSAL_LM", **lora)
    trainer_class = SFTTrainer
    if plain_loss:
        trainer_class = type(
            "PlainLossSFTTrainer", (SFTTrainer,), {"compute_loss": _plain_compute_loss}
        )
    callbacks = list(callbacks or [])
    if h.save_minutes:
        callbacks.append(TimedCheckpoints(h.save_minutes))
    trainer = trainer_class(
        model=model,
        args=config,
        train_dataset=train_ds,
        eval_dataset=eval_ds,
        processing_class=processor if with_images else tokenizer,
        peft_config=peft_config,
        callbacks=callbacks or None,
    )
    if sharding == "fsdp" and not getattr(trainer, "is_fsdp_enabled", False):
        # e.g. a single process (no torchrun): accelerate shards over a process group only
        log.warning(
            "compute.sharding fsdp: accelerate did not enable FSDP here (%s): this run is "
            "data parallel, the whole model on every rank",
            trainer.accelerator.distributed_type,
        )
    last = _last_checkpoint(work_dir)
    trainer.train(resume_from_checkpoint=str(last) if last else None)
    return trainer.model, trainer.state.log_history


def _last_checkpoint(work_dir: Path) -> Path | None:
    """The newest checkpoint that can be resumed from; newer broken ones are skipped
    with a warning (and overwritten when training reaches their step again)."""
    checkpoints = sorted(
        (p for p in work_dir.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()),
        key=lambda p: int(p.name.split("-")[-1]),
    )
    for path in reversed(checkpoints):
        problem = checkpoint_problem(path)
        if problem is None:
            return path
        log.warning("%s cannot be resumed from: %s; trying the one before", path, problem)
    if checkpoints:
        log.warning("no whole checkpoint in %s: training starts from step 0", work_dir)
    return None


WEIGHTS = (
    "model.safetensors",
    "model.safetensors.index.json",
    "adapter_model.safetensors",
    "pytorch_model.bin",
    "adapter_model.bin",
)


# compute.sharding fsdp: the Trainer's sharded checkpoint (torch.distributed.checkpoint:
# one file per rank, .metadata written last).
SHARDED_WEIGHTS = "pytorch_model_fsdp_0"


def checkpoint_problem(path: Path) -> str | None:
    """Why a Trainer checkpoint folder is not whole (None: it looks whole).

    The Trainer writes a checkpoint in place, trainer_state.json last: a kill while
    saving leaves a folder without it. A full disk or an interrupted copy (checkpoints
    in a bucket) leaves truncated files. Checked from sizes and headers, loading nothing.
    """
    try:
        state = json.loads((path / "trainer_state.json").read_text())
    except FileNotFoundError:
        return "trainer_state.json is missing (killed while saving?)"
    except (OSError, ValueError) as exc:
        return f"trainer_state.json is unreadable ({exc})"
    if not isinstance(state, dict) or "global_step" not in state:
        return "trainer_state.json has no global_step"
    sharded = path / SHARDED_WEIGHTS
    if sharded.is_dir() and not (sharded / ".metadata").is_file():
        return f"{SHARDED_WEIGHTS}/.metadata is missing (killed while saving?)"
    if not sharded.is_dir() and not any((path / name).exists() for name in WEIGHTS):
        return f"no model weights (none of {', '.join((*WEIGHTS, SHARDED_WEIGHTS))})"
    for f in sorted(path.iterdir()):
        problem = None
        if f.suffix == ".safetensors":
            problem = _safetensors_problem(f)
        elif f.suffix in (".pt", ".pth", ".bin") and not zipfile.is_zipfile(f):
            problem = "not a whole torch.save archive (truncated?)"
        if problem:
            return f"{f.name}: {problem}"
    index = path / "model.safetensors.index.json"
    if index.exists():
        try:
            shards = set(json.loads(index.read_text())["weight_map"].values())
        except (ValueError, TypeError, KeyError, AttributeError):
            return f"{index.name} is unreadable"
        missing = sorted(s for s in shards if not (path / s).exists())
        if missing:
            return f"weight shards missing: {', '.join(missing)}"
    return None


def _safetensors_problem(path: Path) -> str | None:
    # Layout: 8-byte little-endian header length n, n bytes of JSON header naming each
    # tensor's [start, end) byte offsets into the data that follows.
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else -1
        if n < 0 or 8 + n > size:
            return f"truncated ({size} bytes, header cut)"
        raw = f.read(n)
    try:
        header = json.loads(raw)
        end = max(
            (int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"),
            default=0,
        )
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return "header is malformed"
    if 8 + n + end > size:
        return f"truncated ({size} of {8 + n + end} bytes)"
    return None


def write_loss_curve(path: Path, history: list[dict]) -> list[dict]:
    rows = [
        {"step": h["step"], "loss": h["loss"], "learning_rate": h.get("learning_rate")}
        for h in history
        if "loss" in h and "step" in h
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["step", "loss", "learning_rate"])
        writer.writeheader()
        writer.writerows(rows)
    return rows
