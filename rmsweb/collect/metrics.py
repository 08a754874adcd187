"""Collect-stage metrics: yield per attempt index, kept steps, teacher cost per kept trajectory."""

from __future__ import annotations

from collections import defaultdict

from rmsweb.store.rows import EpisodeRecord


def collection_metrics(records: list[EpisodeRecord], max_attempts: int) -> tuple[dict, list[dict]]:
    """Yield after each attempt index, kept steps, teacher cost per kept trajectory."""
    by_key: dict[tuple[str, int], list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        by_key[(r.episode.task_id, r.episode.seed)].append(r)
    n = len(by_key)
    curve = []
    for k in range(max_attempts):
        solved = sum(
            any(r.episode.success for r in rs if r.episode.attempt <= k) for rs in by_key.values()
        )
        curve.append({"attempt": k, "yield": round(solved / n, 4) if n else 0.0})
    # The kept trajectory of a unit: its shortest success (ties: the earlier attempt), as
    # in the report's KEPT query.
    kept_eps = [
        min(wins, key=lambda e: (e.n_steps, e.attempt))
        for rs in by_key.values()
        if (wins := [r.episode for r in rs if r.episode.success])
    ]
    kept = len(kept_eps)
    # Against the oracle's gold length (where the teacher has an oracle): a success with
    # more steps than gold took a detour.
    graded = [r.episode for r in records if r.episode.success and r.episode.reference_steps]
    detoured = sum(1 for e in graded if e.n_steps > e.reference_steps)
    kept_ratio = [e.n_steps / e.reference_steps for e in kept_eps if e.reference_steps]
    failures = sum(1 for r in records if not r.episode.success)
    calls = sum(len(r.steps) for r in records)
    tokens = sum(r.episode.tokens_in + r.episode.tokens_out for r in records)
    seconds = sum(r.episode.wall_s for r in records)
    attempts = len(records)
    metrics = {
        "tasks_x_seeds": n,
        "attempts": attempts,
        "attempts_per_task_seed": round(attempts / n, 3) if n else 0.0,
        "yield": curve[-1]["yield"] if curve else 0.0,
        "yield_first_attempt": curve[0]["yield"] if curve else 0.0,
        "kept": kept,
        "kept_mean_steps": round(sum(e.n_steps for e in kept_eps) / kept, 3) if kept else None,
        "kept_steps_over_gold": round(sum(kept_ratio) / len(kept_ratio), 4) if kept_ratio else None,
        "detour_fraction": round(detoured / len(graded), 4) if graded else None,
        "failure_fraction": round(failures / attempts, 4) if attempts else None,
        "env_errors": sum(1 for r in records if r.episode.error),
        "policy_errors": sum(1 for r in records if r.episode.policy_error),
        "teacher_calls_per_kept": round(calls / kept, 3) if kept else None,
        "teacher_tokens_per_kept": round(tokens / kept, 1) if kept else None,
        "teacher_seconds_per_kept": round(seconds / kept, 3) if kept else None,
        "reflections": sum(len(r.reflections) for r in records),
    }
    return metrics, curve
