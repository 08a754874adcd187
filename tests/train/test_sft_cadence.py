"""SFT's save cadence by time and its grad_accum on several nodes (issue: the first GPU run
survives, failures 4 and 5)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from rmsweb.errors import UserError
from rmsweb.train.sft.trainer import (
    TimedCheckpoints,
    epoch_steps,
    node_grad_accum,
    nodes_from_env,
)


def test_timed_checkpoints_save_once_the_interval_has_passed() -> None:
    now = [0.0]
    cb = TimedCheckpoints(minutes=20, clock=lambda: now[0])
    args, state = SimpleNamespace(device=None), SimpleNamespace()
    control = SimpleNamespace(should_save=False)
    now[0] = 19 * 60
    assert not cb.on_step_end(args, state, control).should_save
    now[0] = 20 * 60
    assert cb.on_step_end(args, state, control).should_save
    cb.on_save(args, state, control)  # the Trainer saved: the clock starts again
    control.should_save = False
    now[0] = 39 * 60
    assert not cb.on_step_end(args, state, control).should_save
    cb.on_log(args, state, control)  # every other event is a no-op


def test_grad_accum_is_divided_by_the_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    assert node_grad_accum(8, 1) == 8
    assert node_grad_accum(8, 2) == 4  # global batch: 4 x 8 x 8 GPUs on one node or two
    with pytest.raises(UserError, match="multiple of the 3 nodes"):
        node_grad_accum(8, 3)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert nodes_from_env() == 1
    monkeypatch.setenv("WORLD_SIZE", "16")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    assert nodes_from_env() == 2


def test_epoch_steps() -> None:
    assert epoch_steps(3, 10_000, 256) == 118  # ceil(30000 / 256)
    assert epoch_steps(0.001, 10, 256) == 1


CHILD = r"""
import json, os, sys
from pathlib import Path
import torch
torch.set_num_threads(1)
from rmsweb.agents.prompt import PromptConfig, build_messages
from rmsweb.models.config import TinySize
from rmsweb.models.tiny import build_text_model
from rmsweb.models.tokenizer import train_tokenizer
from rmsweb.train.sft import trainer as sft
from rmsweb.train.sft.samples import Sample
out = Path(sys.argv[1])
rank = int(os.environ.get("RANK", "0"))
if rank == 1:  # rank 1's clock never says "due": only rank 0's decision can make it save
    init = sft.TimedCheckpoints.__init__
    sft.TimedCheckpoints.__init__ = lambda self, minutes, clock=None: init(self, minutes, lambda: 0.0)
data = [(f'Click on the "{w}" button.', f'[2] button "{w}"', "click(2)")
        for w in ["alpha", "beta", "gamma", "delta"] * 4]
tok = train_tokenizer([i + "\n" + o for i, o, _ in data], 400)
cfg = PromptConfig(system="none")
samples = [Sample("t", k, 0, build_messages(i, o, [], cfg), f"Action: {a}")
           for k, (i, o, a) in enumerate(data)]
model = build_text_model(tok, TinySize(hidden_size=32, intermediate_size=64), seed=0)
h = sft.SFTHyper(max_steps=3, batch_size=2, grad_accum=1, learning_rate=1e-2,
             lr_scheduler="constant", warmup_ratio=0.0, min_lr_ratio=0.1, weight_decay=0.0,
             adam_beta1=0.9, adam_beta2=0.95, max_grad_norm=1.0, max_seq_len=128,
             save_steps=100, logging_steps=1, val_fraction=0.0, precision="fp32",
             gradient_checkpointing=False, seed=0, save_minutes=1e-9)
trained, _ = sft.train_sft(model, tok, samples, h, out / "work")
weights = {n: p.detach().flatten()[:8].tolist() for n, p in trained.named_parameters()}
(out / f"weights-{rank}.json").write_text(json.dumps(weights))
"""


def test_two_gloo_ranks_save_by_rank_0s_clock(tmp_path: Path) -> None:
    """save_steps 100 of 3 steps: only the time cadence saves before the end; rank 0's
    clock decides for both ranks (rank 1's never would), so both save together."""
    (tmp_path / "child.py").write_text(CHILD)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone"]
    done = subprocess.run(
        [*cmd, str(tmp_path / "child.py"), str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    saved = sorted(p.name for p in (tmp_path / "work").glob("checkpoint-*"))
    assert saved == ["checkpoint-2", "checkpoint-3"]  # 1, 2, 3 saved; the last two kept
    w0, w1 = (json.loads((tmp_path / f"weights-{r}.json").read_text()) for r in (0, 1))
    assert w0 == w1
