"""The oracle grades reflections after the fact: does the step a reflection names hold
the oracle's first error, and are the steps it calls wasted really off the path?

The oracle (rmsweb.judge.oracle) labels every visited state with its acceptable
actions; a step whose action is not among them is a bad step. A reflection's named
steps are read with the teacher's own parser (rmsweb.agents.advice), so the critic
is graded on exactly what the teacher heard. Nothing here is shown to the reflector
or the teacher: grades are stored beside each reflection (reflections.named_steps,
reflections.oracle_bad_steps) and scored in the collect metrics and the report.

Scores (micro-averaged over a run's reflections):
- first error, on reflections of failed attempts: the prediction is the first step
  the reflection names, the truth the first bad step.
  precision = named first step is the first bad step / reflections naming a step;
  recall = named first step is the first bad step / attempts with a bad step.
- detour steps, on reflections of successful (detoured) attempts, step by step:
  precision = named steps that are bad / named steps;
  recall = bad steps named / bad steps.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rmsweb.agents.advice import named_steps
from rmsweb.judge.oracle import OracleLabels, bad_steps
from rmsweb.store.rows import EpisodeRecord


@dataclass(frozen=True)
class Graded:
    success: bool  # of the attempt reflected on
    named: list[int]  # steps the reflection names (0-based, in order of mention)
    bad: list[int] | None  # the oracle's bad steps; None: ungraded (no oracle)


def grade(text: str, rec: EpisodeRecord, labels: OracleLabels | None) -> Graded:
    bad = bad_steps(rec, labels) if labels is not None else None
    return Graded(rec.episode.success, named_steps(text), bad)


def _ratio(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def critic_scores(grades: Iterable[Graded]) -> dict[str, float | int | None]:
    """Precision and recall of the named first error and of named detour steps."""
    named = hits = truths = 0  # first error, failed attempts
    d_named = d_hits = d_truth = 0  # detour steps, successful attempts
    graded = 0
    for g in grades:
        if g.bad is None:
            continue
        graded += 1
        if not g.success:
            correct = bool(g.named) and bool(g.bad) and g.named[0] == g.bad[0]
            named += bool(g.named)
            truths += bool(g.bad)
            hits += correct
        else:
            d_named += len(g.named)
            d_truth += len(g.bad)
            d_hits += len(set(g.named) & set(g.bad))
    return {
        "graded": graded,
        "first_error_precision": _ratio(hits, named),
        "first_error_recall": _ratio(hits, truths),
        "detour_precision": _ratio(d_hits, d_named),
        "detour_recall": _ratio(d_hits, d_truth),
    }
