"""Size and budget probe of the tiny model's pretraining (see rmsweb/train/pretrain/probe.py).

    python benchmarks/pretrain_probe.py --hidden 128 --layers 4 --steps 1500 --batch-size 32

prints the per-skill held-out greedy accuracy before and after pretraining, the loss
and the wall time as JSON (--out FILE also writes it).
"""

from __future__ import annotations

from rmsweb.train.pretrain.probe import main

if __name__ == "__main__":
    main()
