"""2 gloo ranks that would sample differently still finish in step (issue: the first GPU
run survives, failure 3).

Before sampling was sharded, every rank sampled all groups itself and relied on drawing
bit-identical completions; the loss passes ran their collectives only when the rank had
sequences. Here each rank's generate is replaced by one that answers per rank: rank 0's
completions are half right (its groups have contrast: accepted), rank 1's all wrong (its
groups: rejected). With every rank sampling everything (the old code) rank 0 had accepted
groups and rank 1 none: gloo aborted on the collective mismatch in 7 s ("Received data
size doesn't match expected size"); NCCL would have hung until its timeout (so would
this test's, 240 s).
Sharded sampling gathers each chunk from the rank that sampled it, so both ranks train on
the same groups, and every collective runs on every rank.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = r"""
import json, sys
from pathlib import Path
import torch
torch.set_num_threads(1)
from rmsweb.agents.prompt import PromptConfig, build_messages, completion_text
from rmsweb.models.config import TinySize
from rmsweb.models.tiny import build_text_model
from rmsweb.models.tokenizer import train_tokenizer
from rmsweb.train.salvage_ds import ranks
from rmsweb.train.salvage_ds.states import RLState
from rmsweb.train.salvage_ds.trainer import RLHyper, SalvageDSTrainer, algorithm
data, out = json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2])
ranks.init_from_env()
rank, world = ranks.rank_world()
tok = train_tokenizer([i + "\n" + o for i, o, _ in data] + ["Action: click(2) click(3)"], 400)
cfg = PromptConfig(system="none")
states = [RLState(f"s{k}", build_messages(i, o, [], cfg), [a]) for k, (i, o, a) in enumerate(data)]
model = build_text_model(tok, TinySize(hidden_size=32, intermediate_size=64), 0)
right = tok(completion_text("click(2)") + tok.eos_token, add_special_tokens=False)["input_ids"]
wrong = tok(completion_text("click(3)") + tok.eos_token, add_special_tokens=False)["input_ids"]

def generate(input_ids, max_new_tokens, pad_token_id, **_):
    # Rank 0 answers right on even rows, rank 1 never: a sampler that diverges by rank.
    rows = []
    for k in range(input_ids.shape[0]):
        ids = right if rank == 0 and k % 2 == 0 else wrong
        ids = ids[:max_new_tokens] + [pad_token_id] * (max_new_tokens - len(ids))
        rows.append(ids)
    return torch.cat([input_ids, torch.tensor(rows, dtype=input_ids.dtype)], dim=1)

model.generate = generate
h = RLHyper(steps=2, group_size=2, batch_size=8, learning_rate=1e-2, save_steps=1,
            max_new_tokens=8, micro_batch_size=2, kl_probe_states=3,
            algorithm=algorithm("salvage_ds", anchor_weight=0.5))
trainer = SalvageDSTrainer(model, tok, states, h, out / f"work-{rank}")
result = trainer.train()
weights = {n: p.detach().flatten()[:8].tolist() for n, p in model.named_parameters()}
(out / f"weights-{rank}.json").write_text(json.dumps(weights))
(out / f"curve-{rank}.json").write_text(json.dumps(
    [{k: r[k] for k in ("accepted", "rejected", "entropy")} for r in result.curve]))
"""


def run_two_ranks(tmp: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    words = ["alpha", "beta", "gamma", "delta", "submit", "cancel"]
    data = [
        (f'Click on the "{w}" button.', f'[2] button "{w}"\n[3] button "other"', "click(2)")
        for w in words
    ]
    (tmp / "data.json").write_text(json.dumps(data))
    (tmp / "child.py").write_text(CHILD)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone",
        str(tmp / "child.py"), str(tmp / "data.json"), str(tmp),
    ]  # fmt: skip
    return subprocess.run(
        cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def test_ranks_with_diverging_samplers_finish_on_the_same_groups(tmp_path: Path) -> None:
    try:
        done = run_two_ranks(tmp_path)
    except subprocess.TimeoutExpired:
        pytest.fail("the 2 ranks hung: a collective ran on one rank only")
    assert done.returncode == 0, done.stderr[-3000:]
    curves = [json.loads((tmp_path / f"curve-{r}.json").read_text()) for r in (0, 1)]
    assert curves[0] == curves[1]  # the same groups, the same figures
    # rank 0's chunks (accepted) and rank 1's (rejected) made every step
    assert [(r["accepted"], r["rejected"]) for r in curves[0]] == [(2, 2), (2, 2)]
    assert all(math.isfinite(r["entropy"]) for r in curves[0])  # the probe ran on both ranks
    w0, w1 = (json.loads((tmp_path / f"weights-{r}.json").read_text()) for r in (0, 1))
    assert w0 == w1
