"""Critical and fragile states of labelled rollouts (DESIGN.md §1 M).

- Critical state: the first labelled step of an episode whose executed action is not
  acceptable. An episode with one is failed or detoured (a success that took an
  unacceptable step took a detour); a clean episode has none. Episodes that ended in
  an environment error are skipped: they say nothing about the policy.
- Fragile state: a labelled step whose k sampled actions disagree (more than one
  distinct action, an unparsable output counting as one) and some are not acceptable.
  Its criticality is the wrong fraction of the samples; its failure mode is the most
  common mode among the wrong samples (ties: the earlier sample's).

Steps with no label, or with an empty one (the labeller had nothing to suggest, e.g.
the task was already solved), are never graded.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from rmsweb.env.actions import Action, ParseError, format_action, matches_any, parse_action
from rmsweb.env.types import HistoryItem
from rmsweb.mine.label import box_elements
from rmsweb.mine.modes import failure_mode
from rmsweb.store.rows import EpisodeRecord, StepLabelRow, StepRow


@dataclass
class Finding:
    """One mined state of a rollout, before weighting and deduplication."""

    record: EpisodeRecord
    step: int
    source: str  # critical | fragile
    failure_mode: str
    criticality: float  # 1.0 for critical; the wrong fraction of the samples for fragile
    label: StepLabelRow
    policy_output: str | None  # critical: the executed output; fragile: a wrong sample's
    policy_action: str | None  # its action in the action syntax (None: unparsable)
    sampled: list[str] = field(default_factory=list)  # fragile: the k samples' actions


def history_before(steps: list[StepRow], step: int) -> list[HistoryItem]:
    """The history the policy saw at `step`, rebuilt from the stored steps.

    Must match rmsweb.rollout.runner exactly: the runner puts the parse failure text
    into the history item's error, while the step row keeps it in parse_error.
    """
    out = []
    for st in steps:
        if st.step >= step:
            break
        action_text = format_action(Action.from_row(st.action)) if st.action else None
        error = st.env_error if st.parse_ok else f"could not parse the action: {st.parse_error}"
        out.append(HistoryItem(st.output_text, action_text, error))
    return out


def _action(text: str) -> Action | None:
    parsed = parse_action(text)
    return None if isinstance(parsed, ParseError) else parsed


def _acceptable(label: StepLabelRow) -> list[Action]:
    return [a for a in map(_action, label.acceptable) if a is not None]


def critical_state(rec: EpisodeRecord) -> Finding | None:
    """The episode's first labelled step whose action was not acceptable, if any."""
    if rec.episode.error:
        return None
    labels = {lab.step: lab for lab in rec.labels}
    for st in rec.steps:
        label = labels.get(st.step)
        acceptable = _acceptable(label) if label else []
        if not acceptable:
            continue
        assert label is not None
        elements = box_elements(label.boxes)
        action = Action.from_row(st.action) if st.action else None
        if action is not None and matches_any(action, acceptable, elements=elements):
            continue
        mode = failure_mode(
            action,
            acceptable,
            history_before(rec.steps, st.step),
            env_error=st.env_error,
            elements=elements,
        )
        return Finding(
            rec,
            st.step,
            "critical",
            mode,
            1.0,
            label,
            st.output_text,
            format_action(action) if action else None,
        )
    return None


def fragile_states(rec: EpisodeRecord) -> list[Finding]:
    """Labelled steps whose sampled actions disagree and are partly not acceptable."""
    if rec.episode.error:
        return []
    by_step = {st.step: st for st in rec.steps}
    found = []
    for label in rec.labels:
        st = by_step.get(label.step)
        acceptable = _acceptable(label)
        if st is None or not acceptable or len(label.samples) < 2:
            continue
        actions = [_action(t) for t in label.samples]
        distinct = {format_action(a) if a else None for a in actions}
        wrong = [i for i, ok in enumerate(label.samples_ok) if not ok]
        if len(distinct) < 2 or not wrong:
            continue
        elements = box_elements(label.boxes)
        history = history_before(rec.steps, label.step)
        modes = [failure_mode(actions[i], acceptable, history, elements=elements) for i in wrong]
        # Most common mode; Counter keeps first-seen order on ties.
        mode = Counter(modes).most_common(1)[0][0]
        first = wrong[modes.index(mode)]
        first_action = actions[first]
        found.append(
            Finding(
                rec,
                label.step,
                "fragile",
                mode,
                len(wrong) / len(label.samples),
                label,
                label.samples[first],
                format_action(first_action) if first_action else None,
                [format_action(a) if a else "(unparsable)" for a in actions],
            )
        )
    return found
