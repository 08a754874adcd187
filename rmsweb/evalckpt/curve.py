"""Val success per checkpoint from the episode rows (pure), and its plot files.

Each checkpoint plays as its own policy, `<policy>-step-<N>` (step 0: the SFT model the
RL run starts from), so the run's episodes and evals tables hold every step apart and
`rmsweb query` can compare them. Success per step is eval's overall number (the mean
over tasks, failures on environment errors included; rmsweb/evaluate/metrics.py).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmsweb.evaluate.metrics import eval_rows
from rmsweb.stages import STAGES
from rmsweb.store.rows import EpisodeRecord, EvalRow

SPLIT = "val"  # choosing checkpoints reads val only (DESIGN.md §2); test stays unread
# The plot files beside the metrics file, with the headers rmsweb/stages.py declares.
_HEADERS = {p.file: p.columns for p in STAGES["evalckpt"].plots}
CURVE_COLUMNS = _HEADERS["curve.csv"]  # one row per step
TASK_COLUMNS = _HEADERS["tasks.csv"]  # one row per (step, task)


def step_policy(policy: str, step: int) -> str:
    """The policy name a checkpoint plays under (episode ids and the evals table)."""
    return f"{policy}-step-{step}"


@dataclass
class Curve:
    evals: list[EvalRow]  # per step: one row per task and the overall row (task "*")
    overall: list[dict[str, Any]]  # per step, CURVE_COLUMNS
    tasks: list[dict[str, Any]]  # per (step, task), TASK_COLUMNS


def curve_rows(
    records: Iterable[EpisodeRecord],
    *,
    run: str,
    policy: str,
    suite: str,
    steps: Sequence[int],
    walls: Mapping[int, float],
) -> Curve:
    """The evals rows, the curve (one row per step) and the per-task table."""
    by_policy: dict[str, list[EpisodeRecord]] = {}
    for r in records:
        by_policy.setdefault(r.episode.policy, []).append(r)
    out = Curve([], [], [])
    for step in steps:
        mine = by_policy.get(step_policy(policy, step), [])
        if not mine:
            continue
        rows = eval_rows(
            mine,
            run=run,
            policy=step_policy(policy, step),
            suite=suite,
            split=SPLIT,
            wall_s=walls.get(step, 0.0),
        )
        out.evals += rows
        top = rows[-1]
        out.overall.append(
            {
                "step": step,
                "success": round(top.success_rate, 4),
                "ci_low": round(top.ci_low, 4),
                "ci_high": round(top.ci_high, 4),
                "successes": sum(r.episode.success for r in mine),
                "episodes": top.n,
            }
        )
        out.tasks += [
            {
                "step": step,
                "task_id": r.task_id,
                "successes": round(r.success_rate * r.n),
                "episodes": r.n,
                "success": round(r.success_rate, 4),
            }
            for r in rows[:-1]
        ]
    return out


def curve_metrics(curve: Curve, policy: str, seed: int | None) -> dict[str, Any]:
    """The stage's metrics JSON: success per step and the first, last and best step."""
    points = curve.overall
    if not points:
        return {"policy": policy, "seed": seed, "split": SPLIT, "steps": []}
    best = max(points, key=lambda p: (p["success"], -p["step"]))  # ties: the earlier step
    return {
        "policy": policy,
        "seed": seed,
        "split": SPLIT,
        "steps": [p["step"] for p in points],
        "episodes_per_step": points[0]["episodes"],
        "success": {str(p["step"]): p["success"] for p in points},
        "success_first": points[0]["success"],
        "success_last": points[-1]["success"],
        "best_step": best["step"],
        "best_success": best["success"],
    }


def write_csv(path: Path, columns: Sequence[str], rows: list[dict[str, Any]]) -> None:
    """A plot file, written whole (header even when empty) under a temp name first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(columns), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(path)
