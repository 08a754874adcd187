"""A corrupt SFT checkpoint is skipped with a warning; training resumes from the one before.

The checkpoints here are made of the same files the Trainer writes (safetensors weights,
torch.save archives, trainer_state.json), then broken the ways a kill, a full disk or a
cut-short copy breaks them. tests/faults/test_kill_stages.py kills a real SFT run while
it saves a checkpoint.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from rmsweb.train.sft.trainer import _last_checkpoint, checkpoint_problem

pytestmark = pytest.mark.faults


def make_checkpoint(work: Path, step: int) -> Path:
    path = work / f"checkpoint-{step}"
    path.mkdir(parents=True)
    save_file({"w": torch.randn(64, 64), "b": torch.zeros(64)}, path / "model.safetensors")
    torch.save({"state": {0: {"exp_avg": torch.zeros(64, 64)}}}, path / "optimizer.pt")
    torch.save({"last_epoch": step}, path / "scheduler.pt")
    torch.save({"python": 1}, path / "rng_state.pth")
    (path / "config.json").write_text("{}")
    (path / "trainer_state.json").write_text(json.dumps({"global_step": step, "log_history": []}))
    return path


def cut(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


BREAKS: dict[str, tuple[Callable[[Path], None], str]] = {
    "killed before trainer_state.json": (
        lambda p: (p / "trainer_state.json").unlink(),
        "trainer_state.json is missing",
    ),
    "trainer_state.json cut short": (
        lambda p: cut(p / "trainer_state.json"),
        "trainer_state.json is unreadable",
    ),
    "weights cut inside the data": (
        lambda p: cut(p / "model.safetensors", 0.9),
        "model.safetensors: truncated (",
    ),
    "weights cut inside the header": (
        lambda p: cut(p / "model.safetensors", 0.0001),
        "model.safetensors: truncated (",
    ),
    "weights never written": (
        lambda p: (p / "model.safetensors").unlink(),
        "no model weights",
    ),
    "optimizer cut short": (
        lambda p: cut(p / "optimizer.pt", 0.99),
        "optimizer.pt: not a whole torch.save archive",
    ),
}


@pytest.mark.parametrize("name", list(BREAKS))
def test_a_broken_last_checkpoint_falls_back_to_the_one_before(
    name: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    work = tmp_path / "checkpoints"
    older = make_checkpoint(work, 4)
    newest = make_checkpoint(work, 8)
    assert checkpoint_problem(older) is None and checkpoint_problem(newest) is None
    assert _last_checkpoint(work) == newest
    brk, why = BREAKS[name]
    brk(newest)
    assert why in (checkpoint_problem(newest) or "")
    with caplog.at_level(logging.WARNING):
        assert _last_checkpoint(work) == older
    assert f"checkpoint-8 cannot be resumed from: {why}" in caplog.text


def test_no_whole_checkpoint_starts_from_zero(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    work = tmp_path / "checkpoints"
    for step in (4, 8):
        (make_checkpoint(work, step) / "trainer_state.json").unlink()
    (work / "checkpoint-final").mkdir()  # not a step number: never a candidate
    with caplog.at_level(logging.WARNING):
        assert _last_checkpoint(work) is None
    assert "no whole checkpoint" in caplog.text and "checkpoint-4 cannot be resumed" in caplog.text
    assert _last_checkpoint(tmp_path / "absent") is None
