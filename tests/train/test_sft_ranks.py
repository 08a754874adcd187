"""SFT over 2 gloo ranks (torchrun, the Trainer's DDP): the ranks end with equal weights."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, os, sys
from pathlib import Path
import torch
torch.set_num_threads(1)
from rmsweb.agents.prompt import PromptConfig, build_messages
from rmsweb.models.config import TinySize
from rmsweb.models.tiny import build_text_model
from rmsweb.models.tokenizer import train_tokenizer
from rmsweb.train.sft.samples import Sample
from rmsweb.train.sft.trainer import SFTHyper, train_sft
out = Path(sys.argv[1])
rank = int(os.environ.get("RANK", "0"))
data = [(f'Click on the "{w}" button.', f'[2] button "{w}"', "click(2)")
        for w in ["alpha", "beta", "gamma", "delta"] * 4]
tok = train_tokenizer([i + "\n" + o for i, o, _ in data], 400)
cfg = PromptConfig(system="none")
samples = [Sample("t", k, 0, build_messages(i, o, [], cfg), f"Action: {a}")
           for k, (i, o, a) in enumerate(data)]
model = build_text_model(tok, TinySize(hidden_size=32, intermediate_size=64), seed=0)
h = SFTHyper(max_steps=2, batch_size=2, grad_accum=1, learning_rate=1e-2, lr_scheduler="constant",
             warmup_ratio=0.0, min_lr_ratio=0.1, weight_decay=0.0, adam_beta1=0.9, adam_beta2=0.95,
             max_grad_norm=1.0, max_seq_len=128, save_steps=2, logging_steps=1, val_fraction=0.0,
             precision="fp32", gradient_checkpointing=False, seed=0)
trained, _ = train_sft(model, tok, samples, h, out / "work")
import torch.distributed as dist
world = dist.get_world_size() if dist.is_initialized() else 1
weights = {n: p.detach().flatten()[:8].tolist() for n, p in trained.named_parameters()}
(out / f"weights-{rank}-of-{world}.json").write_text(json.dumps(weights))
"""


def test_two_gloo_ranks_train_the_same_sft_weights(tmp_path: Path) -> None:
    (tmp_path / "child.py").write_text(CHILD)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone"]
    done = subprocess.run(
        [*cmd, str(tmp_path / "child.py"), str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rank0 = json.loads((tmp_path / "weights-0-of-2.json").read_text())
    rank1 = json.loads((tmp_path / "weights-1-of-2.json").read_text())
    # Each rank saw its own half of the batch (DistributedSampler): without the gradient
    # all-reduce their weights would part after the first step.
    assert rank0 == rank1
    assert [p.name for p in (tmp_path / "work").glob("checkpoint-*")] == ["checkpoint-2"]  # once
