"""A training stage that follows its thread share (rmsweb/models/threads.py) against one
that keeps the share it started with, when its neighbour ends halfway.

    python benchmarks/thread_share.py --exp miniwob-cpu-budget \
        --collect runs/collect/capacity-h128-suite2-budget50 \
        --model runs/pretrain/capacity-h128-skills-until-p1-budget50/model
    python benchmarks/thread_share.py --tiny --steps 40     # seconds: synthetic samples

Three runs of the SFT stage's trainer, same initial weights, samples and steps: fixed at
1 thread (a stage started beside a neighbour on 2 cores, as `rmsweb repro --jobs 2`
starts it), fixed at 2 (alone from the start), and starting at 1 with its share file
saying 2 from the middle step on (the neighbour ended), which the stage reads every few
seconds between steps. Needs the cores to itself. Last line:

    fixed_1_s=A fixed_2_s=B follow_s=C follow_vs_fixed_1=C/A ideal_s=(A+B)/2
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from sft_throughput import data_arguments, real_samples, stage_trainer, tiny_samples  # noqa: E402

from rmsweb.pipeline import STAGE_THREADS_FILE_ENV  # noqa: E402


def neighbour_ends_at(step: int, share: Path, cores: int) -> Any:
    """A TrainerCallback that writes the freed share at `step`, as the scheduler would."""
    from transformers import TrainerCallback

    class NeighbourEnds(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step == step:
                share.write_text(f"{cores}\n", encoding="utf-8")

    return NeighbourEnds()


def main() -> None:
    import torch

    from rmsweb.models.threads import share_callback

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    data_arguments(ap)
    ap.add_argument("--poll-s", type=float, default=5.0, help="as the stages: every 5 s")
    args = ap.parse_args()
    loaded, samples = (
        tiny_samples(256) if args.tiny else real_samples(args.collect, args.model, args.exp)
    )
    tok, start = loaded.tokenizer, copy.deepcopy(loaded.model)
    run = (args.steps, args.batch_size)
    print(f"{len(samples)} samples, {args.steps} steps x {args.batch_size}")
    torch.set_num_threads(1)
    fixed_1 = stage_trainer(copy.deepcopy(start), tok, samples, *run)
    torch.set_num_threads(2)
    fixed_2 = stage_trainer(copy.deepcopy(start), tok, samples, *run)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        share = Path(tmp) / "share"
        share.write_text("1\n", encoding="utf-8")
        os.environ[STAGE_THREADS_FILE_ENV] = str(share)
        callbacks = [
            neighbour_ends_at(args.steps // 2, share, 2),
            *share_callback(None, args.poll_s),
        ]
        follow = stage_trainer(copy.deepcopy(start), tok, samples, *run, callbacks=callbacks)
        del os.environ[STAGE_THREADS_FILE_ENV]
    threads_after = torch.get_num_threads()
    print(f"threads at the end of the following run: {threads_after}")
    print(
        f"fixed_1_s={fixed_1:.1f} fixed_2_s={fixed_2:.1f} follow_s={follow:.1f} "
        f"follow_vs_fixed_1={follow / fixed_1:.3f} ideal_s={(fixed_1 + fixed_2) / 2:.1f}"
    )


if __name__ == "__main__":
    main()
