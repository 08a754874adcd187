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
"""

from __future__ import annotations

import os

from rmsweb.pipeline import STAGE_THREADS_ENV


def torch_threads(configured: int | None) -> int:
    """The spec's `torch_threads`; else the scheduler's share (or every core), divided
    between the ranks torchrun started on this node."""
    if configured:
        return configured
    share = os.environ.get(STAGE_THREADS_ENV, "")
    cores = int(share) if share.isdigit() and int(share) > 0 else (os.cpu_count() or 1)
    local = os.environ.get("LOCAL_WORLD_SIZE", "")
    ranks = int(local) if local.isdigit() and int(local) > 0 else 1
    return max(1, cores // ranks)
