"""Whether one output is acceptable in a state: the verdict of RL's reward.

One notion of "right" across the recipe: rmsweb.train.salvage_ds.reward.score, whose
`correct` is what the RL groups count as a right sample (the polarized +1, whatever the
reward kind), with the spec's similarity tau and the state's element boxes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rmsweb.train.salvage_ds.reward import elements_from_boxes, parse_references, score


def accepted(
    output_text: str, references: Sequence[str], boxes: Sequence[Any], tau: float, where: str
) -> bool:
    """`output_text` (a raw model output) is one of the references, as RL's reward judges
    it; `boxes` are ElementBoxRows (click_xy points are compared against them)."""
    refs = parse_references(list(references), where)
    return score(output_text, refs, elements=elements_from_boxes(boxes), tau=tau).correct


def grade_samples(states: Sequence[Any], tau: float) -> None:
    """Set each probed state's `samples_ok` (ProbeState: references, boxes, samples)."""
    for s in states:
        where = f"{s.kind} state {s.state_id}"
        s.samples_ok = [accepted(t, s.references, s.boxes, tau, where) for t in s.samples]
