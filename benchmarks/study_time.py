"""How long `rmsweb repro TARGET` takes cold: every stage upstream of the target at the
wall its committed metrics recorded, scheduled as `rmsweb repro --jobs N` schedules
them (rmsweb/pipeline_time.py says how, and what the estimate leaves out).

    python benchmarks/study_time.py report_miniwob-cpu-budget [--jobs 1 2] \
        [--budget-h 4] [--out benchmarks/results/study_time_budget.json] [--scale mine=0.58]

Prints the stage counts (measured, borrowed from their kind, unknown), the serial time,
the critical path, the wall per --jobs (against --budget-h) and the time per stage kind;
--out writes all of it with each stage's wall and where it came from. --scale multiplies
every wall of a stage kind: what a change measured on one stage of it would do to the
whole (e.g. the mining cap's 794 s against 1,379 s: mine=0.576). Check it against a
cold run's `done ... in Ns` lines before trusting it (`rmsweb repro --dry-run` prints
the same estimate for the stages a run would start).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rmsweb.errors import UserError  # noqa: E402
from rmsweb.pipeline import load_graph, plan  # noqa: E402
from rmsweb.pipeline_time import estimate, summary_lines  # noqa: E402


def study_time(
    target: str, root: Path, jobs: list[int], scale: dict[str, float] | None = None
) -> dict:
    """The estimate for `target` and everything upstream of it, as if nothing had run."""
    graph = load_graph(root / "dvc.yaml")
    result = estimate(plan(graph, [target]), graph, root, jobs, scale)
    return {"target": target, **({"scale": scale} if scale else {}), **result}


def kind_factor(text: str) -> tuple[str, float]:
    """ "mine=0.58" -> ("mine", 0.58)."""
    kind, _, factor = text.partition("=")
    try:
        return kind, float(factor)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected KIND=FACTOR, e.g. mine=0.58 (got {text!r})"
        ) from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("target", help="a stage of dvc.yaml, e.g. report_miniwob-cpu-budget")
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="stages at once")
    ap.add_argument("--budget-h", type=float, default=None, help="print the wall against it")
    ap.add_argument("--root", type=Path, default=ROOT, help="project root (holds dvc.yaml)")
    ap.add_argument("--out", type=Path, default=None, help="write the estimate as JSON")
    ap.add_argument(
        "--scale",
        type=kind_factor,
        nargs="+",
        default=[],
        metavar="KIND=FACTOR",
        help="what-if: every wall of a stage kind times FACTOR (e.g. mine=0.58)",
    )
    args = ap.parse_args(argv)
    try:
        result = study_time(args.target, args.root, args.jobs, dict(args.scale) or None)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"{result['target']}: " + "\n".join(summary_lines(result, args.budget_h)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
