"""A run killed with SIGKILL resumes from its last checkpoint and repeats the same losses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from rmsweb.models.load import load_model
from rmsweb.train.salvage_ds.checkpoint import checkpoints
from rmsweb.train.salvage_ds.trainer import RLHyper, SalvageDSTrainer, algorithm

HYPER = {
    "steps": 5,
    "group_size": 2,
    "batch_size": 4,
    "learning_rate": 1e-2,
    "save_steps": 2,
    "max_new_tokens": 6,  # shrunk: a random model never stops early; 6 tokens keep it quick
    "temperature": 1.0,
}

CHILD = """
import json, os, signal, sys
from pathlib import Path
import torch
torch.set_num_threads(1)
from rmsweb.models.load import load_model
from rmsweb.train.salvage_ds.states import RLState
from rmsweb.train.salvage_ds.trainer import RLHyper, SalvageDSTrainer, algorithm
model_dir, states_json, work, kill_at, hyper = sys.argv[1:6]
loaded = load_model(model_dir)
states = [RLState(**s) for s in json.loads(Path(states_json).read_text())]
h = RLHyper(**json.loads(hyper), algorithm=algorithm("salvage_ds", anchor_weight=0.5))

def on_step(row):
    print("ROW " + json.dumps(row), flush=True)
    if row["step"] == int(kill_at):
        os.kill(os.getpid(), signal.SIGKILL)

SalvageDSTrainer(loaded.model, loaded.tokenizer, states, h, Path(work), on_step=on_step).train()
"""

TIMING = ("generate_s", "train_s")


def _losses(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows without timings, NaN as None (NaN != NaN would fail equal rows)."""
    return [{k: None if v != v else v for k, v in r.items() if k not in TIMING} for r in rows]


def _train(model_dir: Path, states: list, work: Path) -> tuple[list[dict], Any, Any]:
    loaded = load_model(model_dir)
    hyper = RLHyper(**HYPER, algorithm=algorithm("salvage_ds", anchor_weight=0.5))
    trainer = SalvageDSTrainer(loaded.model, loaded.tokenizer, states, hyper, work)
    result = trainer.train()
    return result.curve, result, loaded.model


def test_kill_9_then_resume_gives_the_same_losses(
    tiny_text_dir: Path, make_states: Any, tmp_path: Path
) -> None:
    # One torch thread here (conftest) as in the child: same reduction order, same floats.
    states = make_states(6)
    reference, _, ref_model = _train(tiny_text_dir, states, tmp_path / "reference")

    states_json = tmp_path / "states.json"
    states_json.write_text(json.dumps([asdict(s) for s in states]))
    work = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            str(tiny_text_dir),
            str(states_json),
            str(work),
            "3",
            json.dumps(HYPER),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    child_rows = [json.loads(x[4:]) for x in proc.stdout.splitlines() if x.startswith("ROW ")]
    assert [r["step"] for r in child_rows] == [1, 2, 3]
    assert _losses(child_rows) == _losses(reference[:3])  # another process, same numbers
    assert [c.name for c in checkpoints(work)] == ["checkpoint-2"]  # step 3 was lost

    resumed, result, model = _train(tiny_text_dir, states, work)
    assert result.resumed_from == 2
    assert _losses(resumed) == _losses(reference)  # steps 1-2 from the checkpoint, 3-5 rerun
    assert all(r["anchor_loss"] > 0 for r in resumed)  # the updates were real
    for a, b in zip(ref_model.parameters(), model.parameters(), strict=True):
        assert torch.equal(a, b)
