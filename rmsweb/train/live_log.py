"""Training curves logged with DVCLive while a stage trains, as the DVC ecosystem does.

SFT logs from a transformers TrainerCallback at every `logging_steps` (train/loss,
train/learning_rate, train/grad_norm, eval/loss), at the trainer's global step, so the
x axis is the optimizer step as in loss.csv (transformers' own DVCLiveCallback counts
log calls instead, and names the final summary's loss like the curve's); RL logs one row per optimizer step (reward, gate
acceptance, losses, the KL estimate of the loss, and at checkpoints the exact KL to SFT
and the policy's entropy, kl_probe.py). Each stage writes its own folder beside its
metrics file, metrics/<kind>/<stem>.dvclive/ (plots/metrics/<name>.tsv, metrics.json),
a `cache: false` output of the stage, so the files update as training runs:

    dvc plots show metrics/rl/miniwob-cpu-s0.dvclive/plots/metrics     # or VS Code's DVC view
    dvc metrics show metrics/rl/miniwob-cpu-s0.dvclive/metrics.json

No dvc.yaml is written into that folder (DVC would collect it into every view) and no
DVC experiment is saved: the stage runs inside `dvc repro`, which records the outputs.
A resumed stage appends to its folder (resume=True), so a curve has no gap or restart.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The RL curve's columns that are worth a plot (CURVE_COLUMNS has timings and counts too).
RL_LOGGED = (
    "reward_mean",
    "reward_std",
    "accepted_fraction",
    "pg_loss",
    "anchor_loss",
    "loss",
    "kl",
    "kl_to_sft",
    "entropy",
    "clip_fraction",
    "grad_norm",
    "learning_rate",
)


def rank_zero() -> bool:
    """Under torchrun only rank 0 logs (the others would write the same folder)."""
    return int(os.environ.get("RANK", "0")) == 0


def open_live(path: Path, *, resume: bool = False) -> Any:
    """A dvclive.Live writing into `path`, with no dvc.yaml, report or DVC experiment."""
    from dvclive import Live

    path.parent.mkdir(parents=True, exist_ok=True)
    return Live(
        dir=str(path),
        resume=resume,
        report=None,
        save_dvc_exp=False,
        dvcyaml=None,
        monitor_system=False,
    )


# The trainer's log keys worth a curve, and their DVCLive names.
SFT_LOGGED = {
    "loss": "train/loss",
    "learning_rate": "train/learning_rate",
    "grad_norm": "train/grad_norm",
    "eval_loss": "eval/loss",
}


def sft_callback(path: Path, *, resume: bool = False) -> Any:
    """A TrainerCallback that logs SFT's curves into a Live of `path` as training runs."""
    from transformers import TrainerCallback

    live = open_live(path, resume=resume)

    class DVCLiveCurves(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            if not state.is_world_process_zero or not logs:
                return
            values = {
                name: float(logs[key])
                for key, name in SFT_LOGGED.items()
                if isinstance(logs.get(key), int | float) and math.isfinite(logs[key])
            }
            if values:
                live.step = int(state.global_step)
                for name, value in values.items():
                    live.log_metric(name, value, plot=True)
                live.make_summary()

        def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if state.is_world_process_zero:
                live.end()

    return DVCLiveCurves()


def rl_logger(live: Any) -> Callable[[dict[str, Any]], None]:
    """An on_step hook for SalvageDSTrainer: one DVCLive step per RL optimizer step.

    Steps are the trainer's own (1-based) so a resumed run continues its curve; values
    absent at a step (NaN: no PG groups, no probe) are left out, not logged as 0."""

    def log(row: dict[str, Any]) -> None:
        live.step = int(row["step"])
        for name in RL_LOGGED:
            value = row.get(name)
            if isinstance(value, int | float) and math.isfinite(value):
                live.log_metric(f"rl/{name}", float(value), plot=True)
        live.make_summary()

    return log
