"""`python -m rmsweb.train.preflight SPEC [-o KEY=VALUE ...] [--out DIR] [--skip-vllm]`: the
preflight without
the CLI's own packages (typer), for GPU images that carry only what training needs
(benchmarks/gpu_smoke.sh). Exit 2 with the failed checks and their fixes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rmsweb.errors import UserError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("spec", type=Path, help="an experiment spec file")
    ap.add_argument("--out", type=Path, default=None, help="default runs/preflight/NAME")
    ap.add_argument("--skip-vllm", action="store_true", help="leave out the vLLM check")
    ap.add_argument(
        "-o", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="a dotted override of the spec (e.g. compute.sharding=fsdp: the sharded path)",
    )  # fmt: skip
    a = ap.parse_args(argv)
    from rmsweb.spec import load_experiment
    from rmsweb.stage_io import StageIO
    from rmsweb.train.preflight.stage import run_command

    try:
        spec = load_experiment(a.spec, a.overrides)
        out = a.out or Path("runs/preflight") / spec.name
        run_command(StageIO(spec.name, spec, {}, out, out / "metrics.json"), a.skip_vllm)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
