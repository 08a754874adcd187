"""RL states: the prompt exactly as the policy sees it, plus what the reward compares with.

A state is rebuilt from a mined_states row with the same prompt builder eval, SFT and
mining use (rmsweb.agents.prompt.build_messages), so RL trains on the prompts the
policy is later evaluated on.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rmsweb.agents.prompt import PromptConfig, TokenCounter, approx_tokens, build_messages
from rmsweb.env.types import Element
from rmsweb.errors import UserError
from rmsweb.train.salvage_ds.reward import elements_from_boxes, parse_references


@dataclass
class RLState:
    state_id: str
    messages: list[dict]  # the chat prompt (system + user), as build_messages makes it
    references: list[str]  # acceptable actions in the action syntax; [0] is the anchor's
    elements: Mapping[str, Element] | None = None  # element boxes, for click_xy rewards
    image: Any = None  # PIL image when the prompt shows the screenshot
    weight: float = 1.0  # criticality weight: how often the state is drawn
    failure_mode: str | None = None
    task_id: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def state_from_row(
    row: Any,  # rmsweb.store.rows.MinedStateRow
    prompt: PromptConfig,
    count_tokens: TokenCounter = approx_tokens,
    screenshots: Mapping[str, bytes] | None = None,
) -> RLState:
    """One mined state -> an RLState (prompt messages, parsed references, boxes, image)."""
    where = f"mined state {row.state_id!r}"
    parse_references(row.reference_actions, where)  # fail early on unusable references
    image = None
    with_image = prompt.screenshot and row.screenshot is not None
    if with_image:
        png = (screenshots or {}).get(row.screenshot)
        if png is None:
            raise UserError(
                f"{where}: screenshot {row.screenshot} is not in the mine run's screenshots "
                "table, but model.prompt.screenshot is on. Rerun the mine stage."
            )
        from PIL import Image

        image = Image.open(io.BytesIO(png)).convert("RGB")
    messages = build_messages(
        row.instruction,
        row.obs_text,
        list(row.history),
        prompt,
        count_tokens,
        with_image=with_image,
    )
    return RLState(
        state_id=row.state_id,
        messages=messages,
        references=list(row.reference_actions),
        elements=elements_from_boxes(row.boxes),
        image=image,
        weight=float(row.weight),
        failure_mode=row.failure_mode,
        task_id=row.task_id,
    )
