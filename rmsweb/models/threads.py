"""How many torch threads a stage takes: its own share of the cores, not all of them.

`rmsweb repro --jobs N` runs N stages side by side. Left alone, each torch process
takes every core and they oversubscribe the machine: in the paper study an SFT stage
beside a collect and then another SFT stage ran at 31 samples/s, against 379 alone;
benchmarks/sft_throughput.py, two copies side by side, ran 1.7x faster as a pair at
1 thread each than at 2. The scheduler (rmsweb/pipeline.py) therefore hands each
stage `cores // jobs` threads in RMSWEB_STAGE_THREADS (and OMP_NUM_THREADS, which
the eval and mine stages' torch reads at start-up); a `torch_threads` set in the
spec still wins. Under torchrun the stage's share is split between the ranks on the
node (LOCAL_WORLD_SIZE): 2 gloo ranks on 2 cores take 1 thread each, not 2.

The share changes while a stage runs: when its neighbour ends and nothing else is
ready, a stage that started at half the cores would leave the other half idle to its
end (the budget study's pretraining started beside the collection and then ran about
1,000 of its 1,277 s alone on one thread). The scheduler keeps each running stage's share in
a file named by RMSWEB_STAGE_THREADS_FILE; the training stages (SFT and pretraining,
through `share_callback`) read it every few seconds between steps and follow it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from rmsweb.pipeline import STAGE_THREADS_ENV, STAGE_THREADS_FILE_ENV


def torch_threads(configured: int | None) -> int:
    """The spec's `torch_threads`; else the scheduler's share (or every core), divided
    between the ranks torchrun started on this node."""
    if configured:
        return configured
    share = os.environ.get(STAGE_THREADS_ENV, "")
    cores = int(share) if share.isdigit() and int(share) > 0 else (os.cpu_count() or 1)
    return max(1, cores // _ranks())


def _ranks() -> int:
    local = os.environ.get("LOCAL_WORLD_SIZE", "")
    return int(local) if local.isdigit() and int(local) > 0 else 1


class ThreadShare:
    """Follows the scheduler's share file (module doc): `poll` reads it at most every
    `every_s` seconds and, when it names another core count, sets torch's threads to
    that count divided between this node's ranks. A missing or unreadable file (the
    scheduler rewriting it, or gone) leaves the threads as they are."""

    def __init__(self, path: Path, every_s: float = 5.0) -> None:
        self.path = path
        self.every_s = every_s
        self.cores: int | None = None
        self._next = 0.0

    def poll(self) -> int | None:
        """The new thread count when it changed, else None."""
        now = time.monotonic()
        if now < self._next:
            return None
        self._next = now + self.every_s
        try:
            text = self.path.read_text(encoding="utf-8").strip()
        except OSError:
            return None
        if not text.isdigit() or int(text) < 1 or int(text) == self.cores:
            return None
        import torch

        first = self.cores is None
        self.cores = int(text)
        threads = max(1, self.cores // _ranks())
        if first and threads == torch.get_num_threads():
            return None  # the share the stage started with
        torch.set_num_threads(threads)
        return threads


def share_callback(configured: int | None, every_s: float = 5.0) -> list[Any]:
    """[a transformers TrainerCallback that polls the share after each step, at most
    every `every_s` seconds], or [] when the spec sets `torch_threads` or no scheduler
    runs this stage."""
    path = os.environ.get(STAGE_THREADS_FILE_ENV)
    if configured or not path:
        return []
    from transformers import TrainerCallback

    share = ThreadShare(Path(path), every_s)

    class FollowThreadShare(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            share.poll()

    return [FollowThreadShare()]
