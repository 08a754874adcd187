"""The live suite kind: open-web tasks (a start URL and a goal), judged after the episode.

What differs from the offline suites:
1. A task is a row of a benchmark's task file (`LiveTaskInfo`); splits are over tasks
   (a task's id hashes to train, val or test), and a task runs once per seed in `seeds`
   (one seed, 0, by default: a live page has no seed to vary).
2. Pages roam the open web under the safety policy (env/guard.py): browser-internal
   schemes and private addresses are refused unless the spec allows private addresses
   (or names the private origins, e.g. a local site standing in for a live one).
3. Success is not readable from the page. `evaluate` only enforces the wall-time budget;
   the episode ends with `answer(...)`, `stop()`, the step limit or the budget, and an
   LLM judge (rmsweb.judge) decides success from the screenshots kept at every step.

No browser imports here (the session does the browsing).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmsweb.env.errors import EnvError
from rmsweb.env.guard import NavigationPolicy, live_policy
from rmsweb.env.types import Box, Expert
from rmsweb.errors import UserError
from rmsweb.suites.base import SPLITS, Outcome

if TYPE_CHECKING:
    from rmsweb.env.session import PageSession

DATA = Path(__file__).parent / "data"


@dataclass(frozen=True, slots=True)
class LiveTaskInfo:
    """One task of a live benchmark, as its task file states it."""

    id: str
    goal: str  # the instruction the policy gets
    start_url: str
    site: str  # WebVoyager's web_name, Online-Mind2Web's website, "" for WebTailBench
    category: str  # what reports group by: site, difficulty level or segment
    reference_length: int | None = None  # Online-Mind2Web's human step count
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. reference answers


def split_of(task_id: str, test_fraction: float, val_fraction: float = 0.0) -> str:
    """The split of a task: "test" for a stable `test_fraction` share of task ids, "val"
    for the next `val_fraction`, else "train".

    u = the first 8 bytes of sha256(task_id) as a number in [0, 1): test is u < t, val is
    t <= u < t + v. Stable across runs, machines and file order, independent of which other
    tasks are selected; the splits are disjoint by construction, and adding or growing
    the val share never moves a task into or out of test.
    """
    u = int.from_bytes(hashlib.sha256(task_id.encode()).digest()[:8], "big") / 2**64
    if u < test_fraction:
        return "test"
    return "val" if u < test_fraction + val_fraction else "train"


def select(
    tasks: Sequence[LiveTaskInfo],
    *,
    benchmark: str,
    sites: Sequence[str] = (),
    categories: Sequence[str] = (),
    limit: int | None = None,
) -> list[LiveTaskInfo]:
    """The tasks on `sites` in `categories` (empty: all), the first `limit` of them."""
    out = [
        t
        for t in tasks
        if (not sites or t.site in sites) and (not categories or t.category in categories)
    ]
    if not out:
        raise UserError(
            f"{benchmark}: no task matches sites={list(sites)} categories={list(categories)}. "
            "`rmsweb suite show " + benchmark + "` lists them."
        )
    return out[:limit] if limit is not None else out


class LiveTask:
    """One live task at one seed: load the start page; the goal is the instruction."""

    expert: Expert | None = None
    screenshot_clip: Box | None = None  # the whole viewport

    def __init__(self, suite: str, info: LiveTaskInfo, seed: int, split: str, max_wall_s: float):
        self.suite = suite
        self.info = info
        self.id = info.id
        self.seed = seed
        self.split = split
        self.start_url = info.start_url
        self.instruction = info.goal
        self.max_wall_s = max_wall_s
        self._started = 0.0

    async def setup(self, session: PageSession) -> str:
        from playwright.async_api import Error as PlaywrightError

        self._started = time.monotonic()
        seconds = session.navigation_timeout_s
        try:
            await session.call(
                session.page.goto(
                    self.start_url, wait_until="domcontentloaded", timeout=seconds * 1000
                ),
                "load start page",
                seconds + 1,
            )
        except PlaywrightError as exc:
            refused = (
                [r for r in session.guard.refusals if r.url == self.start_url]
                if (session.guard is not None)
                else []
            )
            if refused:
                raise UserError(
                    f"{self.id}: the start page {self.start_url} is refused by the navigation "
                    f"guard ({refused[-1].reason}). A local site needs the suite's "
                    "allow_private_network (or its origin among the private origins)."
                ) from None
            # The site is down or unreachable: an environment error, rerun later.
            raise EnvError(f"{self.id}: could not load {self.start_url}: {exc}") from exc
        return self.instruction

    async def evaluate(self, session: PageSession, answer: str | None) -> Outcome:
        """Not done until the policy answers or stops, unless the wall-time budget is
        spent; success is the judge's to decide, after the episode."""
        elapsed = time.monotonic() - self._started
        if elapsed >= self.max_wall_s:
            return Outcome(done=True, info={"budget": f"wall time {elapsed:.0f} s"})
        return Outcome()


class LiveSuite:
    """A live benchmark over `tasks`, split into train, val and test by task-id hash.

    `navigation_policy` is the safety policy the runner gives the browser pool
    (allowed_origins is None: the open web)."""

    exclude: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] | None = None

    def __init__(
        self,
        name: str,
        tasks: Sequence[LiveTaskInfo],
        *,
        test_fraction: float = 0.5,
        val_fraction: float = 0.0,
        seeds: Sequence[int] = (0,),
        max_steps: int = 15,
        max_wall_s: float = 300.0,
        allow_private_network: bool = False,
        private_origins: Sequence[str] = (),
    ) -> None:
        self.name = name
        self.max_steps = max_steps
        self.max_wall_s = max_wall_s
        self.navigation_policy: NavigationPolicy = live_policy(
            allow_private=allow_private_network, private_origins=private_origins
        )
        self._tasks = {t.id: t for t in tasks}
        if len(self._tasks) != len(tasks):
            raise UserError(f"{name}: a task id appears twice in the task list.")
        self._split = {t.id: split_of(t.id, test_fraction, val_fraction) for t in tasks}
        self._seeds = list(seeds)

    def hold_out_all(self) -> LiveSuite:
        """Every task is test: the benchmark's full test set, for a spec's `eval.suites`
        entry with `split: all` (the policies trained on another suite). Episodes keep the
        suite kind as their suite; the evaluation suite's name is in the run's name
        (eval/<experiment>/<suite>-<policy>/s<seed>)."""
        self._split = dict.fromkeys(self._tasks, "test")
        return self

    def info(self, task_id: str) -> LiveTaskInfo:
        if task_id not in self._tasks:
            raise UserError(f"{self.name}: no task {task_id!r} in this suite's task list.")
        return self._tasks[task_id]

    def task_ids(self, split: str | None = None) -> list[str]:
        """Every task id, or those of one split."""
        if split is not None:
            _check_split(split)
        return [t for t in self._tasks if split is None or self._split[t] == split]

    def split(self, task_id: str) -> str:
        return self._split[self.info(task_id).id]

    def seeds(self, split: str) -> list[int]:
        _check_split(split)
        return list(self._seeds)

    def expert(self, task_id: str) -> Expert | None:
        return None

    def task(self, task_id: str, seed: int, split: str) -> LiveTask:
        info = self.info(task_id)
        _check_split(split)
        if self._split[task_id] != split:
            raise UserError(
                f"{self.name}: task {task_id} belongs to the {self._split[task_id]} split, "
                f"not {split} (held-out tasks are never trained on)."
            )
        return LiveTask(self.name, info, seed, split, self.max_wall_s)

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise UserError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}.")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSON-lines file; a bad line is a UserError naming file and line."""
    import json

    rows = []
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read task file {path}: {exc.strerror or exc}") from None
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{lineno}: not JSON ({exc.msg}).") from None
        if not isinstance(row, dict):
            raise UserError(f"{path}:{lineno}: expected a JSON object per line.")
        rows.append(row)
    return rows


def require(row: dict[str, Any], keys: Sequence[str], where: str) -> None:
    """A UserError naming `where` (file:line) when `row` lacks one of `keys`."""
    missing = [k for k in keys if not isinstance(row.get(k), str | int) or row.get(k) == ""]
    if missing:
        raise UserError(f"{where}: missing or empty {', '.join(missing)}.")
