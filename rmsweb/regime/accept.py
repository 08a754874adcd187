"""Whether one output is acceptable in a state: the verdict of RL's reward.

One notion of "right" across the recipe: rmsweb.train.salvage_ds.reward.score, whose
`correct` is what the RL groups count as a right sample (the polarized +1, whatever the
reward kind), with the spec's similarity tau and the state's element boxes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rmsweb.env.actions import ParseError, compare, parse_action
from rmsweb.train.salvage_ds.reward import elements_from_boxes, parse_references, score


def accepted(
    output_text: str, references: Sequence[str], boxes: Sequence[Any], tau: float, where: str
) -> bool:
    """`output_text` (a raw model output) is one of the references, as RL's reward judges
    it; `boxes` are ElementBoxRows (click_xy points are compared against them)."""
    refs = parse_references(list(references), where)
    return score(output_text, refs, elements=elements_from_boxes(boxes), tau=tau).correct


def on_target(
    output_text: str, references: Sequence[str], boxes: Sequence[Any], where: str
) -> bool:
    """`output_text` has a reference's action type and element, whatever its typed value:
    it would be accepted if only its value were right (a diagnostic beside `accepted`,
    which says whether a state's failure is the element or the value)."""
    action = parse_action(output_text)
    if isinstance(action, ParseError):
        return False
    elements = elements_from_boxes(boxes)
    refs = parse_references(list(references), where)
    return any((m := compare(action, r, elements=elements)).type_ok and m.target_ok for r in refs)


def grade_samples(states: Sequence[Any], tau: float) -> None:
    """Set each probed state's `samples_ok` and `samples_on_target` (ProbeState:
    references, boxes, samples)."""
    for s in states:
        where = f"{s.kind} state {s.state_id}"
        s.samples_ok = [accepted(t, s.references, s.boxes, tau, where) for t in s.samples]
        s.samples_on_target = [on_target(t, s.references, s.boxes, where) for t in s.samples]
