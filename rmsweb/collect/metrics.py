"""Collect-stage metrics: yield per attempt index, kept steps, what it cost, and how right
the reflector was.

Cost is counted per (task, seed) unit and per kept trajectory, every attempt counted,
kept or not: attempts; teacher calls = one per step plus one per reflection (the
reflector is the teacher model for LLM teachers; the rule critic stands in for such a
call); tokens of the steps and of the reflections. The critic's scores are the oracle's
grades of the stored reflections (rmsweb.judge.grade), overall and, for the scripted
teacher, per kind of mistake it made in the attempt (critic_by_kind), with the kinds no
critic rule targets pooled apart.
"""

from __future__ import annotations

import random
from collections import defaultdict

from rmsweb.agents.mistaken_expert import UNTARGETED
from rmsweb.judge.critic import found_error
from rmsweb.judge.grade import Graded, critic_scores
from rmsweb.store.rows import EpisodeRecord, ReflectionRow

NO_MISTAKE = "none"  # a failed attempt without a task-breaking mistake of the teacher's


def critic_by_kind(reflections: list[ReflectionRow], success: dict[str, bool]) -> dict:
    """First-error precision and recall of the critic on failed attempts, per mistake kind
    the teacher made in them (rmsweb.agents.mistaken_expert; `none`: no such mistake,
    the failure came from elsewhere), and over the kinds no critic rule targets
    (UNTARGETED) apart from those it does. A reflection where no critic rule found an
    error (the critic's guess at the last step, rmsweb.judge.critic.found_error) names
    none here, so precision is over the errors found and recall over the attempts with
    a bad step (as the report's table, rmsweb.report.retry_study). Flat keys:
    critic_kind_<kind>_<score>, and critic_kind_<kind>_no_error_found."""
    groups: dict[str, list[Graded]] = defaultdict(list)
    for x in reflections:
        if success[x.episode_id]:
            continue
        kind = x.mistake_kind or NO_MISTAKE
        g = Graded(False, x.named_steps if found_error(x.text) else [], x.oracle_bad_steps)
        groups[kind].append(g)
        if kind != NO_MISTAKE:
            groups["untargeted" if kind in UNTARGETED else "targeted"].append(g)
    out: dict = {}
    for kind in sorted(groups):
        scores = critic_scores(groups[kind])
        key = kind if kind in ("targeted", "untargeted") else f"kind_{kind}"
        out[f"critic_{key}_graded"] = scores["graded"]
        out[f"critic_{key}_first_error_precision"] = scores["first_error_precision"]
        out[f"critic_{key}_first_error_recall"] = scores["first_error_recall"]
        out[f"critic_{key}_no_error_found"] = sum(
            1 for g in groups[kind] if g.bad is not None and not g.named
        )
    return out


BOOTSTRAP_SAMPLES = 2000
BOOTSTRAP_SEED = 0  # fixed: the metrics are a deterministic function of the data


def _percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def steps_saved(pairs: list[tuple[int, int]]) -> dict[str, float | int | None]:
    """1 − Σ kept / Σ attempt-0 steps over (attempt-0 steps, kept steps) unit pairs, with a
    95% bootstrap interval over the units (module doc)."""

    def saved(sample: list[tuple[int, int]]) -> float:
        first = sum(a for a, _ in sample)
        return 1 - sum(k for _, k in sample) / first if first else 0.0

    out: dict[str, float | int | None] = {
        "steps_saved_units": len(pairs),
        "steps_saved": None,
        "steps_saved_ci_low": None,
        "steps_saved_ci_high": None,
    }
    if not pairs:
        return out
    # Sorted first: the interval must not depend on the order the episodes were stored in
    # (a collection resumed after a kill stores them in another order).
    pairs = sorted(pairs)
    rng = random.Random(BOOTSTRAP_SEED)
    boots = [saved(rng.choices(pairs, k=len(pairs))) for _ in range(BOOTSTRAP_SAMPLES)]
    out["steps_saved"] = round(saved(pairs), 4)
    out["steps_saved_ci_low"] = round(_percentile(boots, 0.025), 4)
    out["steps_saved_ci_high"] = round(_percentile(boots, 0.975), 4)
    return out


def _round(value: float | None, digits: int) -> float | None:
    return round(value, digits) if value is not None else None


def collection_metrics(records: list[EpisodeRecord], max_attempts: int) -> tuple[dict, list[dict]]:
    """Yield after each attempt index, kept steps, cost per unit and per kept, critic scores."""
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
    # Units whose attempt 0 succeeded: its steps beside the kept trajectory's.
    saved_pairs = []
    for rs in by_key.values():
        eps = [r.episode for r in rs]
        first = [e for e in eps if e.attempt == 0 and e.success]
        if first:
            best = min(e.n_steps for e in eps if e.success)
            saved_pairs.append((first[0].n_steps, best))
    # Against the task-level reference length (the oracle's gold length where the suite
    # has one): a success with more steps took a detour.
    graded = [r.episode for r in records if r.episode.success and r.episode.reference_steps]
    detoured = sum(1 for e in graded if e.n_steps > e.reference_steps)
    kept_ratio = [e.n_steps / e.reference_steps for e in kept_eps if e.reference_steps]
    failures = sum(1 for r in records if not r.episode.success)
    reflections = [x for r in records for x in r.reflections]
    calls = sum(len(r.steps) for r in records) + len(reflections)
    tokens = sum(r.episode.tokens_in + r.episode.tokens_out for r in records)
    tokens += sum(x.tokens_in + x.tokens_out for x in reflections)
    seconds = sum(r.episode.wall_s for r in records)
    attempts = len(records)

    def per(total: float, den: int, digits: int) -> float | None:
        return round(total / den, digits) if den else None

    success = {r.episode.episode_id: r.episode.success for r in records}
    critic = critic_scores(
        Graded(success[x.episode_id], x.named_steps, x.oracle_bad_steps) for x in reflections
    )
    metrics = {
        "tasks_x_seeds": n,
        "attempts": attempts,
        "attempts_per_task_seed": per(attempts, n, 3),
        "yield": curve[-1]["yield"] if curve else 0.0,
        "yield_first_attempt": curve[0]["yield"] if curve else 0.0,
        **{f"yield_after_attempt_{c['attempt']}": c["yield"] for c in curve},
        "kept": kept,
        "kept_mean_steps": per(sum(e.n_steps for e in kept_eps), kept, 3),
        "kept_steps_over_gold": _round(per(sum(kept_ratio), len(kept_ratio), 6), 4),
        "attempt0_mean_steps": per(sum(a for a, _ in saved_pairs), len(saved_pairs), 3),
        **steps_saved(saved_pairs),
        "detour_fraction": per(detoured, len(graded), 4),
        "failure_fraction": per(failures, attempts, 4),
        "env_errors": sum(1 for r in records if r.episode.error),
        "policy_errors": sum(1 for r in records if r.episode.policy_error),
        "reflections": len(reflections),
        "teacher_calls_per_task_seed": per(calls, n, 3),
        "teacher_tokens_per_task_seed": per(tokens, n, 1),
        "teacher_calls_per_kept": per(calls, kept, 3),
        "teacher_tokens_per_kept": per(tokens, kept, 1),
        "teacher_seconds_per_kept": per(seconds, kept, 3),
        **{f"critic_{k}": v for k, v in critic.items()},
        **critic_by_kind(reflections, success),
    }
    return metrics, curve
