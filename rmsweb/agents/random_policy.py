"""The floor: uniform over the valid actions on visible elements, seeded per episode.

Valid actions: click any element, fill any text field with a random word, select any
option of a drop-down. Navigation, answers and stop are left out (they would end most
episodes at once or leave the task). Seeded by (seed, attempt, step, task) so a rerun of
an episode after an environment error takes the same actions.
"""

from __future__ import annotations

import random
import time

from rmsweb.agents.base import ActResult
from rmsweb.env.actions import Action, click, fill, format_action, select
from rmsweb.env.types import ActRequest, Observation

TEXT_ROLES = {"textbox", "searchbox", "combobox"}
WORDS = ("hello", "test", "bob", "submit", "42", "yes", "alpha", "x")


def valid_actions(obs: Observation, rng: random.Random) -> list[Action]:
    actions: list[Action] = []
    for eid, el in obs.elements.items():
        if "disabled" in el.states:
            continue
        actions.append(click(eid))
        if el.role in TEXT_ROLES and not el.options and "readonly" not in el.states:
            actions.append(fill(eid, rng.choice(WORDS)))
        actions.extend(select(eid, o) for o in el.options)
    return actions


class RandomPolicy:
    def __init__(self, name: str = "random", seed: int = 0) -> None:
        self.name = name
        self.seed = seed

    async def act(self, request: ActRequest) -> ActResult:
        t = time.perf_counter()
        rng = random.Random(
            f"{self.seed}/{request.task_id}/{request.seed}/{request.attempt}/{request.step}"
        )
        actions = valid_actions(request.observation, rng)
        text = format_action(rng.choice(actions)) if actions else 'scroll("down")'
        return ActResult(text=text, latency_s=time.perf_counter() - t)

    async def close(self) -> None:
        pass
