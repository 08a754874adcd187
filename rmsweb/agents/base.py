"""The policy protocol: every actor (scripted expert, random, HF model, OpenAI endpoint).

A policy answers one request at a time, asynchronously; backends that batch
(transformers generate) coalesce concurrent requests internally, so the episode
runner stays a plain loop per episode.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from rmsweb.env.types import Observation


@dataclass(slots=True)
class HistoryItem:
    """One earlier step of the episode as the prompt shows it."""

    output_text: str
    action_text: str | None  # formatted action, None if the output did not parse
    error: str | None  # env error of executing it


@dataclass(slots=True)
class ActRequest:
    task_id: str
    instruction: str
    observation: Observation
    history: list[HistoryItem] = field(default_factory=list)
    reflections: list[str] = field(default_factory=list)  # teachers only (recipe part R)
    seed: int = 0  # episode seed: lets stochastic policies be reproducible
    step: int = 0
    attempt: int = 0


@dataclass(slots=True)
class ActResult:
    text: str  # raw output: optional "Thought: ..." then "Action: ..."
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    token_logprobs: list[float] | None = None  # per generated token, where the backend has them


class Policy(Protocol):
    name: str

    async def act(self, request: ActRequest) -> ActResult: ...

    async def close(self) -> None: ...
