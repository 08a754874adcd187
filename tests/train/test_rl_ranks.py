"""RL over 2 gloo ranks: the same weights on both after the steps, equal to one process's,
and only rank 0 writes checkpoints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

CHILD = r"""
import json, sys
from pathlib import Path
import torch
torch.set_num_threads(1)
from rmsweb.agents.prompt import PromptConfig, build_messages
from rmsweb.models.config import TinySize
from rmsweb.models.tiny import build_text_model
from rmsweb.models.tokenizer import train_tokenizer
from rmsweb.train.salvage_ds import ranks
from rmsweb.train.salvage_ds.states import RLState
from rmsweb.train.salvage_ds.trainer import RLHyper, SalvageDSTrainer, algorithm
data, out = json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2])
ranks.init_from_env()
rank, world = ranks.rank_world()
tok = train_tokenizer([i + "\n" + o for i, o, _ in data], 400)
cfg = PromptConfig(system="none")
states = [RLState(f"s{k}", build_messages(i, o, [], cfg), [a]) for k, (i, o, a) in enumerate(data)]
model = build_text_model(tok, TinySize(hidden_size=32, intermediate_size=64), 0)
h = RLHyper(steps=2, group_size=2, batch_size=4, learning_rate=1e-2, save_steps=1,
            max_new_tokens=4, micro_batch_size=1, kl_probe_states=0,
            algorithm=algorithm("salvage_ds", anchor_weight=0.5))
SalvageDSTrainer(model, tok, states, h, out / f"work-{rank}").train()
weights = {n: p.detach().flatten()[:8].tolist() for n, p in model.named_parameters()}
(out / f"weights-{rank}-of-{world}.json").write_text(json.dumps(weights))
"""


def _run(tmp: Path, world: int) -> None:
    words = ["alpha", "beta", "gamma", "delta", "submit", "cancel"]
    data = [
        (f'Click on the "{w}" button.', f'[2] button "{w}"\n[3] button "other"', "click(2)")
        for w in words
    ]
    (tmp / "data.json").write_text(json.dumps(data))
    (tmp / "child.py").write_text(CHILD)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    if world == 1:
        cmd = [sys.executable, str(tmp / "child.py")]
    else:
        cmd = [
            sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(world),
            "--standalone",
            str(tmp / "child.py"),
        ]  # fmt: skip
    done = subprocess.run(
        [*cmd, str(tmp / "data.json"), str(tmp)], env=env, capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]


def _weights(path: Path) -> dict[str, Any]:
    return {k: torch.tensor(v) for k, v in json.loads(path.read_text()).items()}


def test_two_gloo_ranks_keep_equal_weights_and_only_rank_0_writes(tmp_path: Path) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    _run(tmp_path / "one", 1)
    _run(tmp_path / "two", 2)
    single = _weights(tmp_path / "one" / "weights-0-of-1.json")
    rank0 = _weights(tmp_path / "two" / "weights-0-of-2.json")
    rank1 = _weights(tmp_path / "two" / "weights-1-of-2.json")
    for name, w in single.items():
        assert torch.equal(rank0[name], rank1[name]), name  # the ranks agree exactly
        # ... and each rank's share summed is the one-process gradient (float order aside).
        assert torch.allclose(rank0[name], w, atol=1e-5), name
    assert [p.name for p in sorted((tmp_path / "two" / "work-0").glob("checkpoint-*"))]
    assert not (tmp_path / "two" / "work-1").exists() or not list(
        (tmp_path / "two" / "work-1").glob("checkpoint-*")
    )
