"""What a suite is: tasks with a setup, a 0/1 evaluation and (offline suites) an expert.

A `Task` is one task at one seed (an episode's task). `setup` puts the page into the
task's start state and returns the instruction; `evaluate` reads the outcome after each
step. Both get the episode's PageSession, so every browser call has a timeout.

No browser imports here: these are protocols and plain values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from rmsweb.env.types import Box, Expert

if TYPE_CHECKING:
    from rmsweb.env.session import PageSession

SPLITS = ("train", "val", "test")


@dataclass(frozen=True, slots=True)
class Outcome:
    """The task's verdict after a step. `reward` is the suite's raw reward; `success`
    is the 0/1 outcome reports count; `done` ends the episode."""

    reward: float = 0.0
    success: bool = False
    done: bool = False
    info: dict[str, Any] = field(default_factory=dict)


class Task(Protocol):
    suite: str
    id: str  # task name, e.g. "click-button"
    seed: int
    split: str
    start_url: str
    instruction: str  # known after setup()
    expert: Expert | None
    screenshot_clip: Box | None  # the part of the page screenshots show (None: viewport)

    async def setup(self, session: PageSession) -> str:
        """Load and seed the start state; return the instruction."""
        ...

    async def evaluate(self, session: PageSession, answer: str | None) -> Outcome:
        """Read the outcome now. Raise EnvError when the task page is gone."""
        ...


class Suite(Protocol):
    name: str
    max_steps: int
    # Origins pages may load documents from; None: anywhere (live suites).
    allowed_origins: tuple[str, ...] | None
    exclude: tuple[str, ...]  # CSS selectors hidden from observations (the task's own UI)

    def task_ids(self, split: str | None = None) -> list[str]:
        """The tasks of `split` (None: all). Offline suites split seeds, not tasks: every
        task is in every split. Live suites split tasks (a task is in one split)."""
        ...

    def seeds(self, split: str) -> list[int]: ...

    def task(self, task_id: str, seed: int, split: str) -> Task: ...

    def expert(self, task_id: str) -> Expert | None: ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...
