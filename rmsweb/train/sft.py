"""Stage `sft`: step-level supervised fine-tuning on the kept teacher trajectories.

1. Samples: for every task and seed, the shortest successful collected attempt
   is kept (what the reflection loop keeps); each of its steps becomes one
   sample: prompt = the same chat the policy will see (rmsweb.agents.prompt,
   no reflections), completion = optional thought + the canonical action.
2. Training: TRL's SFTTrainer, loss on the completion tokens only; a full
   fine-tune for tiny models, LoRA (PEFT) when the spec asks for it.
3. Resume: checkpoints every `save_steps` under <out>/checkpoints (or
   $RMSWEB_CHECKPOINT_DIR on clouds); a rerun continues from the last one.
   The final model goes to <out>/model and the checkpoints are deleted so
   DVC does not cache them.
4. Outputs: <out>/model, <out>/samples.jsonl (what was trained on),
   metrics JSON and the loss curve CSV for `dvc plots`.
"""

from __future__ import annotations

import csv
import json
import math
import os
import random
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmsweb.agents.base import HistoryItem
from rmsweb.agents.prompt import PromptConfig, build_messages, completion_text, split_thought
from rmsweb.errors import UserError
from rmsweb.store.rows import EpisodeRecord


@dataclass
class Sample:
    task_id: str
    seed: int
    step: int
    messages: list[dict]
    completion: str


def kept_records(records: list[EpisodeRecord]) -> list[EpisodeRecord]:
    """Per (task, seed): the successful attempt with the fewest steps (then the earliest)."""
    best: dict[tuple[str, int], EpisodeRecord] = {}
    for rec in records:
        ep = rec.episode
        if not ep.success or ep.error:
            continue
        key = (ep.task_id, ep.seed)
        cur = best.get(key)
        if cur is None or (ep.n_steps, ep.attempt) < (cur.episode.n_steps, cur.episode.attempt):
            best[key] = rec
    return [best[k] for k in sorted(best)]


def build_samples(
    records: list[EpisodeRecord], prompt: PromptConfig, count_tokens: Any
) -> list[Sample]:
    """SFT samples from kept episodes; no reflection text ever enters a sample."""
    from rmsweb.env.actions import Action, format_action

    samples: list[Sample] = []
    for rec in kept_records(records):
        ep = rec.episode
        history: list[HistoryItem] = []
        for st in sorted(rec.steps, key=lambda s: s.step):
            action_text = format_action(Action.from_row(st.action)) if st.action else None
            if st.parse_ok and action_text is not None:
                messages = build_messages(
                    ep.instruction, st.obs_text, history, prompt, count_tokens
                )
                thought = split_thought(st.output_text) if prompt.thoughts else None
                samples.append(
                    Sample(
                        ep.task_id,
                        ep.seed,
                        st.step,
                        messages,
                        completion_text(action_text, thought),
                    )
                )
            history.append(HistoryItem(st.output_text, action_text, st.env_error))
    return samples


def write_samples(path: Path, samples: Iterable[Sample]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for s in samples:
            f.write(
                json.dumps(
                    {
                        "task_id": s.task_id,
                        "seed": s.seed,
                        "step": s.step,
                        "prompt": s.messages,
                        "completion": s.completion,
                    }
                )
                + "\n"
            )


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


def _scheduler(h: SFTHyper) -> tuple[str, dict[str, Any]]:
    if h.lr_scheduler == "cosine":
        return "cosine_with_min_lr", {"min_lr_rate": h.min_lr_ratio}
    return h.lr_scheduler, {}


def train_sft(
    model: Any,
    tokenizer: Any,
    samples: list[Sample],
    h: SFTHyper,
    work_dir: Path,
    lora: dict[str, Any] | None = None,
) -> tuple[Any, list[dict]]:
    """Run SFTTrainer; returns the trained model and the log history."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    rng = random.Random(h.seed)
    order = list(range(len(samples)))
    rng.shuffle(order)
    n_val = int(len(samples) * h.val_fraction) if len(samples) >= 50 else 0
    rows = [
        {
            "prompt": samples[i].messages,
            "completion": [{"role": "assistant", "content": samples[i].completion}],
        }
        for i in order
    ]
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
        activation_checkpointing=h.gradient_checkpointing,
        dataloader_pin_memory=False,  # no accelerator on CPU runs; pinning only warns
        report_to=[],
        seed=h.seed,
        data_seed=h.seed,
        dataloader_num_workers=0,
        disable_tqdm=False,
        save_only_model=False,
    )
    peft_config = None
    if lora:
        from peft import LoraConfig

        peft_config = LoraConfig(task_type="CAUSAL_LM", **lora)
    trainer = SFTTrainer(
        model=model,
        args=config,
        train_dataset=train_ds,
        eval_dataset=eval_ds,
        processing_class=tokenizer,
        peft_config=peft_config,
    )
    last = _last_checkpoint(work_dir)
    trainer.train(resume_from_checkpoint=str(last) if last else None)
    return trainer.model, trainer.state.log_history


def _last_checkpoint(work_dir: Path) -> Path | None:
    checkpoints = sorted(
        (p for p in work_dir.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()),
        key=lambda p: int(p.name.split("-")[-1]),
    )
    return checkpoints[-1] if checkpoints else None


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


# --------------------------------------------------------------------------- stage


def main(io: Any) -> None:  # io: rmsweb.stage_io.StageIO
    import torch

    from rmsweb.models.load import load_model
    from rmsweb.store.reader import read_records

    spec = io.spec
    s, m = spec.sft, spec.model
    torch.set_num_threads(s.torch_threads or os.cpu_count() or 1)
    collect_dir = io.input("collect")
    base = str(io.input("model") / "model") if m.kind == "tiny" else m.name_or_path
    loaded = load_model(
        base,
        dtype="float32" if m.kind == "tiny" else m.dtype,
        device="auto",
        trust_remote_code=getattr(m, "trust_remote_code", False),
    )
    prompt = PromptConfig(
        history_steps=m.prompt.history_steps,
        max_prompt_tokens=m.prompt.max_prompt_tokens,
        thoughts=m.prompt.thoughts,
        screenshot=m.prompt.screenshot,
        system=m.prompt.system,
    )
    records = read_records(collect_dir)

    def count(text: str) -> int:
        return len(loaded.tokenizer(text, add_special_tokens=False)["input_ids"])

    samples = build_samples(records, prompt, count)
    if not samples:
        raise UserError(
            f"no successful collected episodes in {collect_dir}: nothing to train on. "
            "Check the collect stage's metrics (success rate) and the suite's tasks."
        )
    io.out.mkdir(parents=True, exist_ok=True)
    write_samples(io.out / "samples.jsonl", samples)
    hyper = SFTHyper(
        max_steps=s.max_steps,
        batch_size=s.batch_size,
        grad_accum=s.grad_accum,
        learning_rate=s.learning_rate,
        lr_scheduler=s.lr_scheduler,
        warmup_ratio=s.warmup_ratio,
        min_lr_ratio=s.min_lr_ratio,
        weight_decay=s.weight_decay,
        adam_beta1=s.adam_beta1,
        adam_beta2=s.adam_beta2,
        max_grad_norm=s.max_grad_norm,
        max_seq_len=s.max_seq_len,
        save_steps=s.save_steps,
        logging_steps=s.logging_steps,
        val_fraction=s.val_fraction,
        precision=s.precision,
        gradient_checkpointing=s.gradient_checkpointing,
        seed=spec.seed,
    )
    lora = None
    if m.lora.enabled:
        lora = {
            "r": m.lora.rank,
            "lora_alpha": m.lora.alpha,
            "lora_dropout": m.lora.dropout,
            "target_modules": list(m.lora.targets),
        }
    ckpt_root = os.environ.get("RMSWEB_CHECKPOINT_DIR")
    work_dir = Path(ckpt_root) / "sft" / io.exp if ckpt_root else io.out / "checkpoints"
    start = time.time()
    model, history = train_sft(loaded.model, loaded.tokenizer, samples, hyper, work_dir, lora)
    wall = time.time() - start
    final = io.out / "model"
    if lora:
        model = model.merge_and_unload()  # a plain model folder: every backend loads it
    model.save_pretrained(final)
    loaded.processor.save_pretrained(final)
    if not ckpt_root:
        shutil.rmtree(work_dir, ignore_errors=True)
    curve = write_loss_curve(io.plot_path("loss.csv"), history)
    evals = [h["eval_loss"] for h in history if "eval_loss" in h]
    first = curve[0]["loss"] if curve else math.nan
    last = curve[-1]["loss"] if curve else math.nan
    io.write_metrics(
        {
            "samples": len(samples),
            "episodes": len({(x.task_id, x.seed) for x in samples}),
            "steps": s.max_steps,
            "loss_first": first,
            "loss_final": last,
            "eval_loss": evals[-1] if evals else None,
            "wall_s": round(wall, 1),
            "samples_per_s": round(s.max_steps * s.batch_size * s.grad_accum / max(wall, 1e-9), 1),
        }
    )
