"""Stage `rl`: Salvage-DS (or GRPO / DAPO-DS) on the mined states, from the SFT checkpoint.

Inputs: `mine` (a run folder with the mined_states table, and screenshots when the
prompt shows them) and `sft` (its `model` folder). Outputs in `out`:
- model/: the final policy as a plain Hugging Face folder (LoRA merged), which eval's
  checkpoint policy loads like SFT's;
- rl_groups/: one row per sampled group (rewards, mean, std, accepted, reason, losses);
- checkpoints/ while running (or $RMSWEB_CHECKPOINT_DIR/rl/<run key> on clouds): a rerun
  continues from the last one; they are deleted at the end so DVC does not cache them.
Next to the metrics JSON: `<stem>.curves.csv`, one row per optimizer step, for dvc plots.
"""

from __future__ import annotations

import csv
import math
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

from rmsweb.compile.identity import checkpoint_dir
from rmsweb.errors import UserError
from rmsweb.models.config import lora_kwargs
from rmsweb.stage_io import StageIO
from rmsweb.train.salvage_ds.gate import REASONS
from rmsweb.train.salvage_ds.trainer import (
    CURVE_COLUMNS,
    RLHyper,
    SalvageDSTrainer,
    TrainResult,
    algorithm,
)


def hyper_from_spec(rl: Any, model: Any, seed: int) -> RLHyper:
    """The spec's rl section (any kind) -> plain trainer arguments."""
    algo = algorithm(
        rl.kind,
        gate=getattr(rl, "gate", True),
        anchor_weight=getattr(rl, "anchor_weight", 0.0),
        max_resample=getattr(rl, "max_resample", 0),
    )
    return RLHyper(
        steps=rl.steps,
        group_size=rl.group_size,
        batch_size=rl.batch_size,
        learning_rate=rl.learning_rate,
        algorithm=algo,
        warmup_ratio=rl.warmup_ratio,
        epsilon=rl.epsilon,
        epsilon_high=rl.epsilon_high,
        beta=rl.beta,
        temperature=rl.temperature,
        max_grad_norm=rl.max_grad_norm,
        reward_kind=rl.reward.kind,
        similarity_tau=rl.reward.similarity_tau,
        format_bonus=rl.reward.format_bonus,
        # grpo has no gate fields: its groups are all "ungated" and the values unused.
        min_std=getattr(rl, "min_std", 0.0),
        competence_min=getattr(rl, "competence_min", 0.0),
        competence_max=getattr(rl, "competence_max", 1.0),
        save_steps=rl.save_steps,
        max_new_tokens=model.prompt.max_new_tokens,
        micro_batch_size=rl.micro_batch_size,
        gradient_checkpointing=rl.gradient_checkpointing,
        reward_sign=-1.0 if rl.reward.invert else 1.0,
        adam_beta1=rl.adam_beta1,
        adam_beta2=rl.adam_beta2,
        adam_eps=rl.adam_eps,
        weight_decay=rl.weight_decay,
        freeze_embeddings=rl.freeze_embeddings,
        kl_probe_states=rl.kl_probe_states,
        seed=seed,
    )


def write_curves(path: Path, curve: list[dict[str, Any]]) -> None:
    """One row per step; NaN (a term absent that step) is written as an empty cell."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(CURVE_COLUMNS))
        writer.writeheader()
        for row in curve:
            writer.writerow(
                {
                    k: "" if isinstance(v, float) and not math.isfinite(v) else v
                    for k, v in row.items()
                }
            )


def write_groups(run_dir: Path, groups: list[dict[str, Any]]) -> None:
    """The rl_groups table, rewritten whole (the rows come from the checkpointed log)."""
    from rmsweb.store.rows import RLGroupRow
    from rmsweb.store.writer import TableWriter

    shutil.rmtree(run_dir / "rl_groups", ignore_errors=True)
    with TableWriter(run_dir, "rl_groups") as writer:
        writer.write_many([RLGroupRow(**g) for g in groups])


def summary(result: TrainResult, hyper: RLHyper) -> dict[str, Any]:
    """Metrics JSON: totals, gate outcomes by reason, and throughput."""
    curve, groups = result.curve, result.groups
    samples = sum(r["samples_generated"] for r in curve)
    busy = result.generate_s + result.train_s
    reasons = Counter(g["reason"] for g in groups)
    tail = curve[-max(1, len(curve) // 10) :]
    kls = [r["kl_to_sft"] for r in curve if _finite(r.get("kl_to_sft"))]
    return {
        "kind": hyper.algorithm.kind,
        "steps": len(curve),
        "resumed_from": result.resumed_from,
        "samples_generated": samples,
        "samples_per_update": samples / max(1, sum(r["updated"] for r in curve)),
        "groups": len(groups),
        "accepted": sum(g["accepted"] for g in groups),
        "empty_steps": sum(1 - r["updated"] for r in curve),
        "reasons": {r: reasons.get(r, 0) for r in REASONS},
        # With a +-1 reward and G samples, contrast and the competence bounds coincide
        # unless the bounds are tighter than [1/G, 1 - 1/G]: groups with contrast that the
        # competence bounds alone rejected (0 at the defaults, G = 8, [0.125, 0.875]).
        "competence_rejected_with_contrast": reasons.get("too_hard", 0)
        + reasons.get("too_easy", 0),
        "kl_to_sft_final": kls[-1] if kls else None,
        "entropy_final": next(
            (r["entropy"] for r in reversed(curve) if _finite(r.get("entropy"))), None
        ),
        "reward_mean_first": _or_none(curve[0]["reward_mean"]) if curve else None,
        "reward_mean_last10pct": _or_none(sum(r["reward_mean"] for r in tail) / len(tail))
        if tail
        else None,
        "accepted_fraction": sum(g["accepted"] for g in groups) / max(1, len(groups)),
        # salvage_ds_expert: groups that got the reference as a member (0 for other kinds)
        "expert_members": int(
            sum(r.get("expert_members", 0) for r in curve if _finite(r.get("expert_members")))
        ),
        "wall_s": round(busy, 2),
        "generate_fraction": round(result.generate_s / busy, 4) if busy else None,
        "samples_per_s": round(samples / busy, 2) if busy else None,
        "steps_per_s": round(len(curve) / busy, 4) if busy else None,
    }


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and math.isfinite(v)


def _or_none(v: Any) -> Any:
    """JSON has no NaN: a term absent from a run (continued SFT has no reward) is null."""
    return v if _finite(v) else None


def trainer_class(kind: str) -> type[SalvageDSTrainer]:
    if kind == "continued_sft":
        from rmsweb.train.salvage_ds.continued_sft import ContinuedSFTTrainer

        return ContinuedSFTTrainer
    return SalvageDSTrainer


def model_dtype(model: Any) -> str:
    """fp32 for the tiny CPU models, the spec's dtype otherwise."""
    return "float32" if model.kind == "tiny" else model.dtype


def load_inputs(
    spec: Any, sft_model: Path, mine_dir: Path, seed: int, device: str = "auto"
) -> tuple[Any, list, RLHyper]:
    """The rl stage's inputs: the SFT model (torch threads set first), the mined states
    as trainer states and the hyperparameters. Shared with rmsweb/evalckpt's replay, which
    must set the run up exactly as this stage does to end on the same weights."""
    import torch

    from rmsweb.agents.build import prompt_config
    from rmsweb.models.load import load_model
    from rmsweb.models.threads import torch_threads
    from rmsweb.store.reader import read_rows
    from rmsweb.train.salvage_ds.states import state_from_row

    rl, m = spec.rl, spec.model
    torch.set_num_threads(torch_threads(rl.torch_threads))  # models/threads.py
    loaded = load_model(
        sft_model,
        dtype=model_dtype(m),
        device=device,
        trust_remote_code=getattr(m, "trust_remote_code", False),
    )
    prompt = prompt_config(m)
    rows = read_rows(mine_dir, "mined_states")
    if not rows:
        raise UserError(
            f"no mined states in {mine_dir}: nothing to train on. Check the mine stage's "
            "metrics (mined and routine states) and its spec (mine.mode, max_states)."
        )
    screenshots = None
    if prompt.screenshot:
        screenshots = {s.sha256: s.png for s in read_rows(mine_dir, "screenshots")}

    def count(text: str) -> int:
        return len(loaded.tokenizer(text, add_special_tokens=False)["input_ids"])

    states = [state_from_row(row, prompt, count, screenshots) for row in rows]
    return loaded, states, hyper_from_spec(rl, m, seed)


def stage_sharding(spec: Any) -> str:
    """compute.sharding for this stage (null: `rmsweb plan` decides, models/plan.py)."""
    from rmsweb.models.plan import resolved_sharding

    sharding = resolved_sharding(spec)
    if sharding == "fsdp" and spec.rl.kind == "continued_sft":
        raise UserError(
            "rl.kind continued_sft does not shard its steps over the ranks: compute.sharding "
            "fsdp would count each step's gradient once per rank. Set compute.sharding none."
        )
    if sharding == "fsdp" and spec.rl.sampler.kind == "vllm":
        raise UserError(
            "rl.sampler vllm with compute.sharding fsdp is not supported yet (the engine "
            "would need the gathered adapters each step). Set rl.sampler {kind: hf}: sampling "
            "then gathers the sharded model for HF generate."
        )
    return sharding


def main(io: StageIO) -> None:
    from rmsweb.train.salvage_ds import ranks

    spec = io.spec
    rl, m = spec.rl, spec.model
    ranks.init_from_env()  # under torchrun: gradients summed over the ranks (ranks.py)
    sft_model = io.input("sft") / "model"
    dtype = model_dtype(m)
    sharding = stage_sharding(spec)
    # fsdp: loaded on CPU; sharding moves each unit to this rank's GPU (1/N of it stays)
    loaded, states, hyper = load_inputs(
        spec,
        sft_model,
        io.input("mine"),
        io.train_seed,
        device="cpu" if sharding == "fsdp" else "auto",
    )
    lora = lora_kwargs(m.lora)
    work_dir = checkpoint_dir(io.spec, "rl", io.out / "checkpoints", inputs=io.inputs, seed=io.seed)
    io.out.mkdir(parents=True, exist_ok=True)
    from rmsweb.train.live_log import open_live, rl_logger

    # curves while it trains (rank 0 only)
    live = open_live(io.plot_path("dvclive"), resume=True) if ranks.is_writer() else None
    trainer = trainer_class(rl.kind)(
        loaded.model,
        loaded.tokenizer,
        states,
        hyper,
        work_dir,
        processor=loaded.processor,
        is_vl=loaded.is_vl,
        lora=lora,
        on_step=rl_logger(live) if live is not None else None,
        sharding=sharding,
    )
    if rl.kind != "continued_sft":  # rl.sampler vllm: sampling through vLLM on the SFT model
        from rmsweb.train.salvage_ds.vllm_sampler import build_sampler

        trainer.sampler = build_sampler(
            rl.sampler, sft_model, lora, dtype=dtype, seed=io.train_seed
        )
    result = trainer.train()
    if trainer.sampler is not None:
        trainer.sampler.close()
    if live is not None:
        live.end()
    from rmsweb.models.load import load_model

    # Every rank (fsdp gathers the weights); rank 0 gets the merged, unsharded model.
    model = trainer.final_model(
        base=lambda: (
            load_model(
                sft_model,
                dtype=dtype,
                device="cpu",
                trust_remote_code=getattr(m, "trust_remote_code", False),
            ).model
        )
    )
    if not ranks.is_writer():  # rank 0 writes the stage's outputs
        return
    final = io.out / "model"
    model.save_pretrained(final)
    loaded.processor.save_pretrained(final)
    write_groups(io.out, result.groups)
    write_curves(io.plot_path("curves.csv"), result.curve)
    metrics = summary(result, hyper)
    metrics["states"] = len(states)
    metrics["trainable_params"] = sum(p.numel() for p in trainer.params)
    metrics["reward_inverted"] = bool(rl.reward.invert)
    io.write_metrics(metrics)
    if work_dir == io.out / "checkpoints":  # local checkpoints go with the finished model
        shutil.rmtree(work_dir, ignore_errors=True)
