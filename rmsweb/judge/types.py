"""What a judge says about an attempt, what a reflector writes, and their signatures.

The collect stage's retry loop (rmsweb.collect.retry) and the mining stage both take
judges and reflectors of these types; the concrete ones live beside this module.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from rmsweb.store.rows import EpisodeRecord


@dataclass(frozen=True)
class Verdict:
    success: bool
    detour: bool = False
    reference_length: int | None = None  # task-level reference length, when known
    redundant_steps: tuple[int, ...] = ()  # wasted steps, seen in the trajectory alone


@dataclass
class Reflection:
    attempt: int  # the attempt reflected on
    text: str
    source: str
    tokens_in: int = 0
    tokens_out: int = 0


JudgeFn = Callable[[EpisodeRecord], Awaitable[Verdict]]
ReflectFn = Callable[[EpisodeRecord, Verdict, Sequence[str]], Awaitable[Reflection]]


def is_detour(n_steps: int, reference_length: int | None, slack: float) -> bool:
    return reference_length is not None and n_steps > reference_length * (1 + slack)


class ChatModel(Protocol):
    """A chat endpoint (an OpenAI-compatible teacher or judge): (text, usage) per call."""

    async def chat(self, messages: list[dict[str, Any]]) -> tuple[str, dict[str, int]]: ...


@dataclass(frozen=True, slots=True)
class JudgeOutcome:
    """What a live-benchmark judge (WebVoyager, WebJudge, WebTailBench) concludes about an
    episode."""

    protocol: str
    success: bool
    # the deciding reply had the protocol's form; false: a judge failure (no usable
    # reply after the retries), a failure counted apart from a judged one
    parse_ok: bool
    reason: str = ""  # the deciding reply (or why no call was made)
    details: dict = field(default_factory=dict)  # e.g. WebJudge key points and scores
