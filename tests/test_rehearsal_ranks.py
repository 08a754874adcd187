"""Found by the rehearsal: SFT under torchrun on CPU trained every rank alone.

The rehearsal's SFT stage logged transformers' "process group is initialized, but
parallel_mode != ParallelMode.DISTRIBUTED": without `use_cpu`, accelerate picks no
distributed type on a machine without a GPU, so the Trainer neither wraps the model in
DDP nor shards the data. tests/train/test_sft_ranks.py could not see it: both ranks
trained the same data in the same order, so their weights were equal anyway.

Here each rank shuffles its data with its own seed. The weights stay equal only if the
gradients are reduced over the ranks (DDP broadcasts the initial weights and averages
every step's gradients); each rank alone would drift apart (the control below).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = r"""
import json, os, sys
from dataclasses import replace
from pathlib import Path
import torch
torch.set_num_threads(1)
from rmsweb.agents.prompt import PromptConfig, build_messages
from rmsweb.models.config import TinySize
from rmsweb.models.tiny import build_text_model
from rmsweb.models.tokenizer import train_tokenizer
from rmsweb.train.sft import trainer
from rmsweb.train.sft.samples import Sample
out, alone = Path(sys.argv[1]), sys.argv[2] == "alone"
rank = int(os.environ.get("RANK", "0"))
if alone:  # the control: the Trainer as it was (not told it runs on CPU)
    trainer._cuda_available = lambda: True
data = [(f'Click on the "{w}" button.', f'[{k % 5 + 2}] button "{w}"', f"click({k % 5 + 2})")
        for k, w in enumerate(["alpha", "beta", "gamma", "delta", "omega"] * 4)]
tok = train_tokenizer([i + "\n" + o for i, o, _ in data], 400)
cfg = PromptConfig(system="none")
samples = [Sample("t", k, 0, build_messages(i, o, [], cfg), f"Action: {a}")
           for k, (i, o, a) in enumerate(data)]
model = build_text_model(tok, TinySize(hidden_size=32, intermediate_size=64), seed=0)
h = trainer.SFTHyper(max_steps=3, batch_size=2, grad_accum=1, learning_rate=1e-2,
    lr_scheduler="constant", warmup_ratio=0.0, min_lr_ratio=0.1, weight_decay=0.0,
    adam_beta1=0.9, adam_beta2=0.95, max_grad_norm=1.0, max_seq_len=128, save_steps=10,
    logging_steps=1, val_fraction=0.0, precision="fp32", gradient_checkpointing=False,
    seed=rank)  # each rank its own data order
trained, _ = trainer.train_sft(model, tok, samples, h, out / f"work-{rank}")
weights = {n: p.detach().flatten()[:8].tolist() for n, p in trained.named_parameters()}
(out / f"weights-{rank}.json").write_text(json.dumps(weights))
"""


def _two_ranks(tmp_path: Path, mode: str) -> tuple[dict, dict]:
    (tmp_path / "child.py").write_text(CHILD)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone"]
    done = subprocess.run(
        [*cmd, str(tmp_path / "child.py"), str(tmp_path), mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return tuple(json.loads((tmp_path / f"weights-{r}.json").read_text()) for r in (0, 1))


def test_sft_ranks_with_different_data_orders_end_equal(tmp_path: Path) -> None:
    rank0, rank1 = _two_ranks(tmp_path, "ddp")
    assert rank0 == rank1


@pytest.mark.slow
def test_control_ranks_alone_drift_apart(tmp_path: Path) -> None:
    rank0, rank1 = _two_ranks(tmp_path, "alone")
    assert rank0 != rank1
