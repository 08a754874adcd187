"""The policy protocol: every actor (scripted expert, random, HF model, OpenAI endpoint).

The request type (`ActRequest`, `HistoryItem`) lives in rmsweb.env.types, below every
package that builds or answers one.

A policy answers one request at a time, asynchronously; backends that batch
(transformers generate) coalesce concurrent requests internally, so the episode
runner stays a plain loop per episode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from rmsweb.env.types import ActRequest


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
