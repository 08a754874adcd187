"""Rewards of one sampled completion against a state's reference actions (DESIGN.md §1 S).

Semantics come from rmsweb.env.actions (parse_action, compare, matches_any): the same
comparison the mining stage uses, so "correct" means one thing across the recipe.

- polarized (RMSWeb): +1 when the parsed action is semantically one of the references
  (type; target element, or a click_xy point inside the target's box; argument equal
  after normalisation or similarity >= tau), -1 for everything else, unparseable
  included. Nothing sits near zero: a well-formatted wrong click scores exactly what any
  other wrong action scores, so a group's relative advantages only separate right from
  wrong.
- partial (ablation): the share of matching components (type, target, argument) of the
  best-matching reference, in [0, 1]; unparseable 0. Here a wrong click on the right
  kind of element outscores a wrong action type: the ranking the polarized reward avoids.
- format_plus_match (ablation): `format_bonus` for a parseable action plus 1 for a match.

Every kind also reports `correct` (the polarized verdict): the gate counts competence
on it, whatever the reward's scale.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rmsweb.env.actions import Action, Match, ParseError, compare, matches_any, parse_action
from rmsweb.env.types import Box, Element
from rmsweb.errors import UserError

RewardKind = Literal["polarized", "partial", "format_plus_match"]
REWARD_KINDS: tuple[str, ...] = ("polarized", "partial", "format_plus_match")


@dataclass(frozen=True, slots=True)
class Scored:
    reward: float
    correct: bool  # semantically one of the references (the polarized +1)
    parsed: bool  # the output held a parseable action


def parse_references(texts: Sequence[str], where: str) -> list[Action]:
    """Reference action strings -> Actions; an unparseable reference is a data error."""
    actions: list[Action] = []
    for text in texts:
        parsed = parse_action(text)
        if isinstance(parsed, ParseError):
            raise UserError(
                f"{where}: reference action {text!r} does not parse ({parsed.reason}). "
                'References must be in the action syntax, e.g. click(3) or fill(3, "text"); '
                "fix the mining stage's output."
            )
        actions.append(parsed)
    if not actions:
        raise UserError(f"{where}: no reference actions; a state needs at least one to score.")
    return actions


def elements_from_boxes(boxes: Sequence[Any]) -> dict[str, Element] | None:
    """MinedStateRow.boxes (ElementBoxRow: id, x, y, width, height) -> Elements with boxes.

    Only the boxes matter for comparison (a click_xy point inside the target's box);
    role and name are left empty. None when the state has no boxes (text suites).
    """
    if not boxes:
        return None
    return {
        str(b.id): Element(id=str(b.id), role="", name="", box=Box(b.x, b.y, b.width, b.height))
        for b in boxes
    }


def score(
    output_text: str,
    references: Sequence[Action],
    *,
    kind: RewardKind = "polarized",
    elements: Mapping[str, Element] | None = None,
    tau: float = 1.0,
    format_bonus: float = 0.1,
) -> Scored:
    """The reward of one completion (see the module docstring for each kind)."""
    action = parse_action(output_text)
    if isinstance(action, ParseError):
        unparsed = {"polarized": -1.0, "partial": 0.0, "format_plus_match": 0.0}
        return Scored(unparsed[kind], correct=False, parsed=False)
    correct = matches_any(action, references, elements=elements, tau=tau)
    if kind == "polarized":
        return Scored(1.0 if correct else -1.0, correct, parsed=True)
    if kind == "partial":
        best = max(
            _components(compare(action, ref, elements=elements, tau=tau)) for ref in references
        )
        return Scored(best / 3.0, correct, parsed=True)
    if kind == "format_plus_match":
        return Scored(format_bonus + (1.0 if correct else 0.0), correct, parsed=True)
    raise ValueError(f"unknown reward kind {kind!r}; kinds: {', '.join(REWARD_KINDS)}")


def _components(match: Match) -> int:
    return int(match.type_ok) + int(match.target_ok) + int(match.arg_ok)


def invert(scored: Scored) -> Scored:
    """The canary's reward: the same verdict with the reward's sign flipped. `correct`
    keeps the true verdict (logs and the gate's competence read it), so the canary's
    groups pass or fail the gate exactly as the real arm's would."""
    return Scored(-scored.reward, scored.correct, scored.parsed)
