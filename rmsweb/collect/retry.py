"""Reflection-conditioned retries (RMSWeb recipe part R), as a small pure loop.

How this departs from plain rollouts:
1. After each attempt a judge decides: success without detours ends the loop.
   A success with detours (more steps than the task-level reference length times
   (1 + detour_slack), or wasted steps the trajectory shows) or a failure is
   retried (rmsweb.judge.outcome).
2. In `reflect` mode a reflector writes a short reflection on the attempt from
   the trajectory and outcome alone, and the next attempt is conditioned on all
   reflections so far. In `blind` mode the teacher simply tries again; in `none`
   mode there is one attempt.
3. `reflect` and `blind` share the cap on attempts (1 + max_retries, or
   teacher_budget); `none` makes one. The cap is not the cost: attempts, teacher
   calls (reflections included) and tokens differ per mode and are reported with
   the yields (rmsweb.collect.metrics), so comparisons state what each arm spent.
4. The kept attempt is the shortest successful one (ties: the earliest). The
   SFT samples built from it never contain the reflection text.
Every attempt and every reflection is returned for storage.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from rmsweb.judge.types import JudgeFn, ReflectFn, Reflection, Verdict
from rmsweb.store.rows import EpisodeRecord


@dataclass
class RetryOutcome:
    attempts: list[EpisodeRecord] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    reflections: list[Reflection] = field(default_factory=list)

    @property
    def kept(self) -> int | None:
        """Index of the kept attempt: the shortest success, earliest on ties."""
        wins = [i for i, v in enumerate(self.verdicts) if v.success]
        if not wins:
            return None
        return min(wins, key=lambda i: (self.attempts[i].episode.n_steps, i))


AttemptFn = Callable[[int, Sequence[str]], Awaitable[EpisodeRecord]]


class RetryLoop:
    def __init__(self, mode: str, max_retries: int, budget: int | None = None) -> None:
        if mode not in ("none", "blind", "reflect"):
            raise ValueError(f"unknown retry mode {mode!r}")
        self.mode = mode
        self.attempts = 1 if mode == "none" else 1 + max_retries
        if budget is not None:
            self.attempts = min(self.attempts, budget)

    async def run(self, attempt: AttemptFn, judge: JudgeFn, reflect: ReflectFn) -> RetryOutcome:
        out = RetryOutcome()
        texts: list[str] = []
        for k in range(self.attempts):
            record = await attempt(k, tuple(texts) if self.mode == "reflect" else ())
            verdict = await judge(record)
            out.attempts.append(record)
            out.verdicts.append(verdict)
            if verdict.success and not verdict.detour:
                break
            if k + 1 < self.attempts and self.mode == "reflect":
                reflection = await reflect(record, verdict, tuple(texts))
                out.reflections.append(reflection)
                texts.append(reflection.text)
        return out
