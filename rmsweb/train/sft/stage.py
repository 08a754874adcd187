"""Stage `sft`: step-level supervised fine-tuning on the kept teacher trajectories.

This module is the stage's I/O; samples.py builds the samples, trainer.py trains.

1. Samples: for every task and seed, the shortest successful collected attempt
   is kept (what the reflection loop keeps); each of its steps becomes one
   sample: prompt = the same chat the policy will see (rmsweb.agents.prompt,
   no reflections), completion = optional thought + the canonical action.
   With `sft.replay`, synthetic samples of the pretraining generator are added
   (rmsweb/train/sft/replay.py), that share of the whole.
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

import math
import os
import shutil
import time

from rmsweb.agents.build import prompt_config
from rmsweb.compile.identity import checkpoint_dir
from rmsweb.errors import UserError
from rmsweb.models.config import lora_kwargs
from rmsweb.stage_io import StageIO
from rmsweb.train.sft.samples import build_samples, within_budget, write_samples
from rmsweb.train.sft.trainer import (
    SFTHyper,
    epoch_steps,
    node_grad_accum,
    nodes_from_env,
    train_sft,
    write_loss_curve,
)


def main(io: StageIO) -> None:
    import torch

    from rmsweb.models.load import load_model
    from rmsweb.models.threads import torch_threads
    from rmsweb.store.reader import read_records

    spec = io.spec
    s, m = spec.sft, spec.model
    torch.set_num_threads(torch_threads(s.torch_threads))  # models/threads.py
    collect_dir = io.input("collect")
    base = str(io.input("model") / "model") if m.kind == "tiny" else m.name_or_path
    from rmsweb.models.plan import resolved_sharding

    sharding = resolved_sharding(spec)  # compute.sharding (null: `rmsweb plan` decides)
    loaded = load_model(
        base,
        dtype="float32" if m.kind == "tiny" else m.dtype,
        # fsdp: on CPU; accelerate's fully_shard moves it to the rank's GPU unit by unit
        device="cpu" if sharding == "fsdp" else "auto",
        trust_remote_code=getattr(m, "trust_remote_code", False),
    )
    prompt = prompt_config(m)
    records = read_records(collect_dir)
    if s.demos_per_task is not None:  # the first N train seeds of each task (MiniWoB only)
        records = within_budget(records, spec.suite.train.start, s.demos_per_task)

    def count(text: str) -> int:
        return len(loaded.tokenizer(text, add_special_tokens=False)["input_ids"])

    samples = build_samples(records, prompt, count)
    if not samples:
        raise UserError(
            f"no successful collected episodes in {collect_dir}: nothing to train on. "
            "Check the collect stage's metrics (success rate) and the suite's tasks."
        )
    demos = len(samples)
    if s.replay is not None:  # generic skills kept up while SFT passes over few demos
        from rmsweb.train.pretrain.run import PretrainSettings
        from rmsweb.train.sft.replay import replay_count, replay_samples

        samples += replay_samples(
            replay_count(demos, s.replay),
            PretrainSettings.of(m.pretrain),
            prompt,
            count,
            train_seed=io.train_seed,
        )
    io.out.mkdir(parents=True, exist_ok=True)
    write_samples(io.out / "samples.jsonl", samples)
    # Several nodes: each runs grad_accum / nodes micro-batches, so the global batch is
    # the spec's (batch_size x grad_accum x GPUs per node) and 2 nodes take half the time.
    grad_accum = node_grad_accum(s.grad_accum, nodes_from_env())
    max_steps = s.max_steps
    if s.epochs is not None:  # sized by passes over the data (global batch: the spec's)
        gpus = int(os.environ.get("WORLD_SIZE", "1"))
        max_steps = epoch_steps(s.epochs, len(samples), s.batch_size * grad_accum * gpus)
    hyper = SFTHyper(
        max_steps=max_steps,
        batch_size=s.batch_size,
        grad_accum=grad_accum,
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
        save_minutes=s.save_minutes,
        logging_steps=min(s.logging_steps, max_steps),
        val_fraction=s.val_fraction,
        precision=s.precision,
        gradient_checkpointing=s.gradient_checkpointing,
        seed=io.train_seed,
    )
    lora = lora_kwargs(m.lora)
    work_dir = checkpoint_dir(
        io.spec, "sft", io.out / "checkpoints", inputs=io.inputs, seed=io.seed
    )
    start = time.time()
    from rmsweb.train.live_log import rank_zero, sft_callback

    # curves while it trains (rank 0 only)
    live = [sft_callback(io.plot_path("dvclive"), resume=True)] if rank_zero() else []
    from rmsweb.models.threads import share_callback

    live += share_callback(s.torch_threads)  # the freed cores when a neighbour ends
    model, history = train_sft(
        loaded.model,
        loaded.tokenizer,
        samples,
        hyper,
        work_dir,
        lora,
        callbacks=live,
        # VL models train on the screenshots the policy is shown (prompt.screenshot).
        processor=loaded.processor if loaded.is_vl else None,
        sharding=sharding,
    )
    wall = time.time() - start
    weights = None
    if sharding == "fsdp":  # every rank takes part in gathering the trained weights whole
        from rmsweb.train.sharding import full_trainable

        weights = full_trainable(model)
    if not rank_zero():  # under torchrun: the Trainer synced the gradients (DDP or FSDP);
        return  # rank 0 writes the model and the metrics
    final = io.out / "model"
    if weights is not None:  # the unsharded base, loaded again, with the trained weights
        from rmsweb.train.sharding import unsharded

        start_model = load_model(
            base,
            dtype="float32" if m.kind == "tiny" else m.dtype,
            device="cpu",
            trust_remote_code=getattr(m, "trust_remote_code", False),
        ).model
        model = unsharded(start_model, weights, lora)
    elif lora:
        model = model.merge_and_unload()  # a plain model folder: every backend loads it
    model.save_pretrained(final)
    loaded.processor.save_pretrained(final)
    if work_dir == io.out / "checkpoints":  # local checkpoints go with the finished model
        shutil.rmtree(work_dir, ignore_errors=True)
    curve = write_loss_curve(io.plot_path("loss.csv"), history)
    evals = [h["eval_loss"] for h in history if "eval_loss" in h]
    first = curve[0]["loss"] if curve else math.nan
    last = curve[-1]["loss"] if curve else math.nan
    io.write_metrics(
        {
            "samples": len(samples),
            "replay_samples": len(samples) - demos,
            "samples_with_screenshot": sum(x.screenshot is not None for x in samples),
            "episodes": len({(x.task_id, x.seed) for x in samples[:demos]}),
            "steps": max_steps,
            "grad_accum_per_node": grad_accum,
            "loss_first": first,
            "loss_final": last,
            "eval_loss": evals[-1] if evals else None,
            "wall_s": round(wall, 1),
            "samples_per_s": round(max_steps * s.batch_size * grad_accum / max(wall, 1e-9), 1),
        }
    )
