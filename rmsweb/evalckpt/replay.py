"""The RL run again, keeping the policy at every checkpoint step.

The rl stage keeps no checkpoints once it finishes (they are its resume points, deleted
so DVC does not cache them, and only the last two are kept while it runs), so the
checkpoints to evaluate are made here: the same trainer on the same inputs with the same
settings. Every random draw of the trainer is seeded from (seed, step, round), so on the
same machine and thread count the replay is the same run; `weights_diff` measures that
against the rl stage's final model and the stage reports it, so a replay that drifted
(another thread count, a multi-rank RL run, a changed trainer) is visible, not silent.

The setup below mirrors the rl stage's main (rmsweb/train/salvage_ds/stage.py) through
that stage's own helpers (hyper_from_spec, trainer_class, state_from_row); the two are
kept apart so the rl stage, which the finished study stages depend on, stays untouched.
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

COMPLETE = "COMPLETE"  # written last into a snapshot folder: the folder counts from then on


def checkpoint_steps(steps: int, save_steps: int) -> list[int]:
    """The steps at which the trainer saves a checkpoint: every save_steps and the last."""
    return sorted({*range(save_steps, steps + 1, save_steps), steps})


def snapshot_dir(root: Path, step: int) -> Path:
    return root / f"step-{step}"


def complete_snapshots(root: Path, steps: list[int]) -> bool:
    return all((snapshot_dir(root, s) / COMPLETE).is_file() for s in steps)


def save_snapshot(trainer: Any, processor: Any, folder: Path) -> None:
    """The trainer's current policy as a plain Hugging Face folder (LoRA merged into a
    copy, so the run goes on with its adapters), which eval's checkpoint policy loads."""
    shutil.rmtree(folder, ignore_errors=True)
    model = trainer.model
    if trainer.is_peft:
        model = copy.deepcopy(model).merge_and_unload()
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    (folder / COMPLETE).write_bytes(b"")


def replay_rl(
    spec: Any, sft_model: Path, mine_dir: Path, seed: int, work_dir: Path, snapshots: Path
) -> list[int]:
    """Train as the rl stage does, saving the policy at each checkpoint step under
    `snapshots`; returns those steps. `work_dir` holds the trainer's own checkpoints."""
    from rmsweb.models.config import lora_kwargs
    from rmsweb.train.salvage_ds.stage import load_inputs, trainer_class

    m = spec.model
    loaded, states, hyper = load_inputs(spec, sft_model, mine_dir, seed)
    steps = checkpoint_steps(hyper.steps, hyper.save_steps)
    trainer: Any = None

    def on_step(row: dict[str, Any]) -> None:
        if row["step"] in steps:  # the trainer has just saved this step's checkpoint
            save_snapshot(trainer, loaded.processor, snapshot_dir(snapshots, row["step"]))

    trainer = trainer_class(spec.rl.kind)(
        loaded.model,
        loaded.tokenizer,
        states,
        hyper,
        work_dir,
        processor=loaded.processor,
        is_vl=loaded.is_vl,
        lora=lora_kwargs(m.lora),
        on_step=on_step,
    )
    trainer.train()
    return steps


def weights_diff(a: Path, b: Path) -> float | None:
    """Largest absolute difference between two model folders' weights (0.0: the same
    numbers); None when their tensors do not line up (names or shapes differ)."""
    from safetensors.torch import load_file

    def tensors(folder: Path) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in sorted(folder.glob("*.safetensors")):
            out.update(load_file(str(f)))
        return out

    ta, tb = tensors(a), tensors(b)
    if not ta or ta.keys() != tb.keys() or any(ta[k].shape != tb[k].shape for k in ta):
        return None
    return max(float((ta[k].float() - tb[k].float()).abs().max()) for k in ta)
