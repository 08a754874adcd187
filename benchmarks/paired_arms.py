"""Paired differences between eval runs, before the study that owns them has a report.

A study's report stage reads every run of the study, so it cannot be drawn while the
study is part-way. The arms already evaluated can still be compared, with the report's
own arithmetic (rmsweb.report.arms): on the (task, episode seed) units both arms ran,
task-weighted, with the unit bootstrap and the t-interval over training seeds (seed k of
one arm pairs with seed k of the other).

    python benchmarks/paired_arms.py --split test \
        sft=runs/eval/miniwob-cpu-budget/sft/s0,runs/eval/miniwob-cpu-budget/sft/s1 \
        full=runs/eval/miniwob-cpu-budget/rl/s0,runs/eval/miniwob-cpu-budget/rl/s1 \
        --pair full:sft --out benchmarks/results/budget_b50_test.json

Each run is an eval stage's output folder (its `episodes/` Parquet); its training seed is
the folder's name (`s<k>`). Without --pair, every arm is compared with the first.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rmsweb.report.arms import (  # noqa: E402
    Episode,
    paired_difference,
    per_task_differences,
    summarize,
)
from rmsweb.sweep.results import run_episodes  # noqa: E402


def parse_arm(text: str) -> tuple[str, list[Path]]:
    name, sep, runs = text.partition("=")
    if not sep or not name or not runs:
        raise SystemExit(
            f"error: arm {text!r}: write NAME=RUN[,RUN...], e.g. sft=runs/eval/x/sft/s0"
        )
    return name, [Path(r) for r in runs.split(",") if r]


def arm_episodes(name: str, runs: list[Path], split: str) -> list[Episode]:
    episodes: list[Episode] = []
    for run in runs:
        if not (run / "episodes").is_dir():
            raise SystemExit(f"error: arm {name}: {run} has no episodes/ folder (not an eval run?)")
        found = run_episodes(name, run.name, run, split)
        if not found:
            raise SystemExit(f"error: arm {name}: {run} has no episodes on split {split!r}")
        episodes += found
    return episodes


def compare(arms: dict[str, list[Episode]], pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """Each arm's success and each pair's paired difference, as plain data."""
    out: dict[str, Any] = {"arms": {}, "pairs": []}
    for name, episodes in arms.items():
        s = summarize(name, episodes)
        out["arms"][name] = {
            "success": s.mean,  # task-weighted, averaged over training seeds
            "per_seed": list(s.per_seed),
            "seed_ci_low": s.seed_low,
            "seed_ci_high": s.seed_high,
            "episodes": s.n,
            "training_seeds": list(s.seeds),
        }
    for a, b in pairs:
        try:
            d = paired_difference(a, b, arms[a], arms[b])
        except ValueError as exc:  # no (task, seed) unit in common
            raise SystemExit(f"error: --pair {a}:{b}: {exc}") from None
        out["pairs"].append(
            {
                "a": a,
                "b": b,
                "units": d.units,
                "diff": d.diff,
                "ci_low": d.low,
                "ci_high": d.high,
                "per_seed": [[seed, diff] for seed, diff in d.per_seed],
                "seed_ci_low": d.seed_low,
                "seed_ci_high": d.seed_high,
                "verdict": d.verdict,
                "per_task": per_task_differences(arms[a], arms[b]),
            }
        )
    return out


def pct(x: float | None, sign: bool = True) -> str:
    return "—" if x is None else f"{100 * x:+.1f}" if sign else f"{100 * x:.1f}%"


def table(result: dict[str, Any]) -> str:
    lines = ["| arm | success | episodes | training seeds |", "|---|---|---|---|"]
    for name, a in result["arms"].items():
        seeds = ", ".join(str(s) for s in a["training_seeds"])
        lines.append(f"| {name} | {pct(a['success'], sign=False)} | {a['episodes']} | {seeds} |")
    lines += ["", "| a − b | diff | units [95%] | seeds [95% t] | per seed | verdict |"]
    lines.append("|---|---|---|---|---|---|")
    for p in result["pairs"]:
        per_seed = ", ".join(f"s{s}: {pct(d)}" for s, d in p["per_seed"])
        lines.append(
            f"| {p['a']} − {p['b']} | {pct(p['diff'])} | [{pct(p['ci_low'])}, "
            f"{pct(p['ci_high'])}] | [{pct(p['seed_ci_low'])}, {pct(p['seed_ci_high'])}] | "
            f"{per_seed} | {p['verdict']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("arms", nargs="+", help="NAME=RUN[,RUN...]: an arm's eval run folders")
    parser.add_argument("--split", default="test", help="the eval split to pair on")
    parser.add_argument("--pair", action="append", default=[], help="A:B, for A − B")
    parser.add_argument("--out", type=Path, help="also write the result as JSON here")
    args = parser.parse_args(argv)
    named = dict(parse_arm(a) for a in args.arms)
    pairs = [tuple(p.split(":", 1)) for p in args.pair] or [
        (name, next(iter(named))) for name in list(named)[1:]
    ]
    for pair in pairs:
        if len(pair) != 2 or not set(pair) <= set(named):
            raise SystemExit(
                f"error: --pair {':'.join(pair)}: write A:B with arms from {sorted(named)}"
            )
    arms = {name: arm_episodes(name, runs, args.split) for name, runs in named.items()}
    result = compare(arms, pairs)  # type: ignore[arg-type]
    result["split"] = args.split
    result["runs"] = {name: [str(r) for r in runs] for name, runs in named.items()}
    result["command"] = "python benchmarks/paired_arms.py " + " ".join(argv or sys.argv[1:])
    print(table(result))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
