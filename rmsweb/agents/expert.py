"""The scripted expert as a Policy: it acts with the first of its acceptable actions.

Experts see only what a policy sees (instruction, observation, history) and answer in
the action syntax, so their trajectories are ordinary training data.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from rmsweb.agents.base import ActResult
from rmsweb.env.actions import format_action
from rmsweb.env.types import ActRequest, Expert


class ExpertPolicy:
    """Acts for every task that has an expert in `experts` (task id -> expert)."""

    def __init__(self, experts: Mapping[str, Expert], name: str = "expert") -> None:
        self.experts = dict(experts)
        self.name = name

    async def act(self, request: ActRequest) -> ActResult:
        t = time.perf_counter()
        expert = self.experts.get(request.task_id)
        if expert is None:
            raise KeyError(f"no expert for task {request.task_id!r}")
        actions = expert.acceptable_actions(
            request.instruction, request.observation, request.history
        )
        # Nothing to suggest (e.g. the page is in a state the script does not know):
        # stop rather than wander, so the episode ends as a plain failure.
        text = format_action(actions[0]) if actions else "stop()"
        return ActResult(text=text, latency_s=time.perf_counter() - t)

    async def close(self) -> None:
        pass
