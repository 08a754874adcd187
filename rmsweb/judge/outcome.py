"""What a live-benchmark judge concludes about one episode."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class JudgeOutcome:
    protocol: str
    success: bool
    parse_ok: bool  # the deciding reply had the protocol's form (else: failure)
    reason: str = ""  # the deciding reply (or why no call was made)
    details: dict = field(default_factory=dict)  # e.g. WebJudge key points and scores
