"""Checkpoints of an RL run: enough to continue with the very same numbers after a kill.

checkpoint-<step>/ holds the trainable weights (safetensors; LoRA: the adapters only),
and trainer_state.pt: the optimizer state, the RNG states and the run's logs so far
(curve rows and rl_groups rows, so the tables are rebuilt whole at the end, with no
duplicate rows from steps a killed run had logged after its last checkpoint).

A checkpoint is written to a local temp folder (off the work dir, which may be a bucket
mount: object-store mounts refuse directory renames) and its files copied into
checkpoint-<step>/, with an empty COMPLETE file copied last. Only folders holding
COMPLETE count, so a kill mid-copy leaves the previous one as the last complete
checkpoint; all but the last two are deleted. No rename happens inside work_dir.

A sharded model (compute.sharding fsdp, train/sharding.py) checkpoints the same files: the
trainable weights gathered whole under their usual names, so the adapters load into an
unsharded model, and the optimizer state gathered whole keyed by parameter name
("optimizer_full"); every rank gathers (`sharded_state`), rank 0 writes, every rank loads.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

COMPLETE = "COMPLETE"  # copied last: a folder without it is an interrupted save
FILES = ("trainable.safetensors", "trainer_state.pt")


def local_tmp_root() -> Path:
    """Where checkpoints are staged: $RMSWEB_LOCAL_TMP, else the system temp dir."""
    return Path(os.environ.get("RMSWEB_LOCAL_TMP") or tempfile.gettempdir())


def checkpoints(work_dir: Path) -> list[Path]:
    """Complete checkpoints in step order (temp folders of an interrupted save excluded)."""
    if not work_dir.is_dir():
        return []
    found = [
        p
        for p in work_dir.glob("checkpoint-*")
        if p.is_dir() and p.name.split("-")[-1].isdigit() and (p / COMPLETE).is_file()
    ]
    return sorted(found, key=lambda p: int(p.name.split("-")[-1]))


def sharded_state(model: Any, optimizer: Any) -> dict[str, Any]:
    """What a sharded model's checkpoint holds, gathered whole (every rank must call it):
    the `weights` and `optimizer_full` arguments of save_checkpoint."""
    from rmsweb.train import sharding

    return {
        "weights": sharding.full_trainable(model),
        "optimizer_full": sharding.optimizer_state(model, optimizer),
    }


def save_checkpoint(
    work_dir: Path,
    step: int,
    model: Any,
    optimizer: Any,
    logs: dict[str, Any],
    weights: dict[str, Any] | None = None,
    optimizer_full: dict[str, Any] | None = None,
) -> Path:
    """Write checkpoint-<step>; `weights` / `optimizer_full`: a sharded model's state
    gathered by `sharded_state` (None: read from the unsharded model and optimizer)."""
    import torch
    from safetensors.torch import save_file

    final = work_dir / f"checkpoint-{step}"
    root = local_tmp_root()
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"rmsweb-checkpoint-{step}-", dir=root) as staged:
        tmp = Path(staged)
        if weights is None:
            weights = {
                n: p.detach().cpu().contiguous()
                for n, p in model.named_parameters()
                if p.requires_grad
            }
        save_file(weights, str(tmp / FILES[0]))
        state = {
            "step": step,
            **(
                {"optimizer_full": optimizer_full}
                if optimizer_full is not None
                else {"optimizer": optimizer.state_dict()}
            ),
            "rng_torch": torch.get_rng_state(),
            "rng_python": random.getstate(),
            "logs": logs,
        }
        if torch.cuda.is_available():
            state["rng_cuda"] = torch.cuda.get_rng_state_all()
        torch.save(state, tmp / FILES[1])
        (tmp / COMPLETE).write_bytes(b"")
        shutil.rmtree(final, ignore_errors=True)
        final.mkdir(parents=True)
        for name in (*FILES, COMPLETE):  # COMPLETE last: the folder counts from then on
            shutil.copyfile(tmp / name, final / name)
    for old in checkpoints(work_dir)[:-2]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def load_checkpoint(work_dir: Path, model: Any, optimizer: Any) -> tuple[int, dict[str, Any]]:
    """Restore the last complete checkpoint into model and optimizer; (0, {}) if none.

    Returns its step and the logs it saved. RNG states are restored too.
    """
    import torch
    from safetensors.torch import load_file

    from rmsweb.train import sharding

    found = checkpoints(work_dir)
    if not found:
        return 0, {}
    last = found[-1]
    weights = load_file(str(last / "trainable.safetensors"))
    params = dict(model.named_parameters())
    missing = [n for n, p in params.items() if p.requires_grad and n not in weights]
    unexpected = sorted(set(weights) - set(params))
    if missing or unexpected:
        raise ValueError(
            f"{last} does not match this model (missing {missing[:3]}, unexpected "
            f"{unexpected[:3]}); delete {work_dir} to start the run afresh."
        )
    sharding.load_trainable(model, weights)  # whole tensors; a sharded model keeps its shard
    # Our own file (optimizer state, RNG tuples, log dicts): not a weights-only pickle.
    state = torch.load(last / "trainer_state.pt", weights_only=False)
    if "optimizer_full" in state:  # written from a sharded model: keyed by parameter name
        sharding.load_optimizer_state(model, optimizer, state["optimizer_full"])
    elif sharding.is_sharded(model):
        raise ValueError(
            f"{last} was written by an unsharded run (compute.sharding none); this run shards "
            f"the model. Set compute.sharding none, or delete {work_dir} to start afresh."
        )
    else:
        optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng_torch"])
    random.setstate(state["rng_python"])
    if "rng_cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["rng_cuda"])
    return int(state["step"]), state["logs"]
