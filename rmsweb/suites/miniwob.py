"""The offline MiniWoB++ suite: the `miniwob` package's pages, served on 127.0.0.1.

Per episode: load /miniwob/<task>.html, wait for the sync cover, lift the task's time
limit (else rewards shrink with wall time and slow policies lose episodes), seed with
`Math.seedrandom(seed)`, start with `core.startEpisodeReal()` and read the instruction
with `core.getUtterance()`. After each step the raw reward globals give the outcome:
success means WOB_DONE_GLOBAL and a raw reward of 1 (every part right; partial credit
such as click-checkboxes' mean score counts as a failure).
"""

from __future__ import annotations

import difflib
import itertools
import secrets
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rmsweb.env.errors import EnvError
from rmsweb.env.types import Box, Expert
from rmsweb.errors import UserError
from rmsweb.spec.miniwob_tasks import MINIWOB_TASKS
from rmsweb.suites.base import SPLITS, Outcome
from rmsweb.suites.miniwob_experts import EXPERTS
from rmsweb.suites.miniwob_html import html_root

if TYPE_CHECKING:
    from rmsweb.env.server import StaticServer
    from rmsweb.env.session import PageSession

NAME = "miniwob"
# MiniWoB's splits are seed ranges; it has one more than live suites: the mine stage's
# own seeds (live suites mine their train tasks).
MINIWOB_SPLITS = (*SPLITS, "mine")
# The task's own chrome: the instruction box (the policy gets the instruction as
# text), the reward HUD, the start cover and the click visualiser.
EXCLUDE = ("#query", "#reward-display", "#sync-task-cover", "#click-canvas")
# Effectively no time limit (ms); setTimeout accepts at most 2**31-1.
NO_TIME_LIMIT_MS = 100_000_000

START_JS = """async ([seed, token, limit]) => {
  for (let i = 0; i < 500 && !document.getElementById('sync-task-cover'); i++) {
    await new Promise((r) => setTimeout(r, 10));
  }
  if (typeof core === 'undefined' || !document.getElementById('sync-task-cover')) return null;
  core.EPISODE_MAX_TIME = limit;
  Math.seedrandom(seed);
  core.startEpisodeReal();
  window.__rmswebEpisode = token;
  const wrap = document.getElementById('wrap') || document.body;
  const r = wrap.getBoundingClientRect();
  // natural-language tasks (e.g. email-inbox-forward-nl) return {utterance, fields}
  let u = core.getUtterance();
  if (u && typeof u === 'object') u = u.utterance;
  return {utterance: String(u), box: [r.left, r.top, r.width, r.height]};
}"""

STATE_JS = """() => ({
  token: window.__rmswebEpisode || null,
  done: typeof WOB_DONE_GLOBAL === 'undefined' ? null : WOB_DONE_GLOBAL,
  raw: typeof WOB_RAW_REWARD_GLOBAL === 'undefined' ? 0 : WOB_RAW_REWARD_GLOBAL,
  reason: typeof WOB_REWARD_REASON === 'undefined' ? null : WOB_REWARD_REASON,
})"""


def resolve_tasks(names: Sequence[str]) -> list[str]:
    """Check task names; an unknown one is a UserError listing the closest names."""
    out = []
    for name in names:
        if name not in MINIWOB_TASKS:
            close = difflib.get_close_matches(name, MINIWOB_TASKS, n=5, cutoff=0.5)
            hint = f" Closest: {', '.join(close)}." if close else ""
            raise UserError(
                f"unknown MiniWoB task {name!r}.{hint} `rmsweb suite list miniwob` lists all."
            )
        out.append(name)
    return out


class MiniWoBTask:
    """One MiniWoB task at one seed."""

    suite = NAME

    def __init__(self, task_id: str, seed: int, split: str, base_url: str, expert: Expert | None):
        self.id = task_id
        self.seed = seed
        self.split = split
        self.start_url = f"{base_url}/miniwob/{task_id}.html"
        self.instruction = ""
        self.expert = expert
        self.screenshot_clip: Box | None = None
        self._token = ""

    async def setup(self, session: PageSession) -> str:
        page = session.page
        ms = session.action_timeout_s * 1000
        await session.call(
            page.goto(self.start_url, wait_until="load", timeout=ms),
            "load task page",
            ms / 1000 + 1,
        )
        self._token = secrets.token_hex(6)
        started = await session.evaluate(
            START_JS, [self.seed, self._token, NO_TIME_LIMIT_MS], "start episode"
        )
        if not started:
            raise EnvError(f"{self.id}: the task page did not initialise (no core.js / cover)")
        self.instruction = started["utterance"]
        x, y, w, h = started["box"]
        self.screenshot_clip = Box(x, y, w, h)
        session.screenshot_clip = self.screenshot_clip
        # The episode lives in this document: leaving or reloading it is a step error
        # the policy sees (the guard refuses it), not a lost page rerun as an env error.
        session.pin_page()
        return self.instruction

    async def evaluate(self, session: PageSession, answer: str | None) -> Outcome:
        state = await session.evaluate(STATE_JS, None, "read reward")
        if state["token"] != self._token:
            raise EnvError(f"{self.id}: the task page was reloaded or left ({session.page.url})")
        done = bool(state["done"])
        raw = float(state["raw"] or 0.0) if done else 0.0
        return Outcome(
            reward=raw,
            success=done and raw >= 1.0 - 1e-6,
            done=done,
            info={"reason": state["reason"]} if state["reason"] else {},
        )


class MiniWoB:
    """The MiniWoB++ suite over `tasks`, with disjoint train and test seeds."""

    name = NAME
    exclude = EXCLUDE

    def __init__(
        self,
        tasks: Sequence[str],
        *,
        train_seeds: Sequence[int] = range(0, 100),
        test_seeds: Sequence[int] = range(100_000, 100_050),
        val_seeds: Sequence[int] = range(50_000, 50_010),
        mine_seeds: Sequence[int] = range(200_000, 200_200),
        max_steps: int = 10,
    ) -> None:
        self.tasks = resolve_tasks(tasks)
        self._seeds = {
            "train": list(train_seeds),
            "val": list(val_seeds),
            "test": list(test_seeds),
            "mine": list(mine_seeds),
        }
        for a, b in itertools.combinations(MINIWOB_SPLITS, 2):
            overlap = set(self._seeds[a]) & set(self._seeds[b])
            if overlap:
                raise ValueError(f"{a} and {b} seeds overlap (e.g. {min(overlap)})")
        self.max_steps = max_steps
        self._server: StaticServer | None = None
        self.allowed_origins: tuple[str, ...] | None = None

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("MiniWoB suite not started: `await suite.start()` first")
        return self._server.origin

    async def start(self) -> None:
        from rmsweb.env.server import StaticServer

        if self._server is None:
            self._server = StaticServer(html_root())
            self.allowed_origins = (self._server.origin,)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    def task_ids(self, split: str | None = None) -> list[str]:
        """Every task, in every split: MiniWoB's splits are seed ranges."""
        if split is not None and split not in MINIWOB_SPLITS:
            raise UserError(f"unknown split {split!r}; use one of {', '.join(MINIWOB_SPLITS)}.")
        return list(self.tasks)

    def seeds(self, split: str) -> list[int]:
        if split not in MINIWOB_SPLITS:
            raise UserError(f"unknown split {split!r}; use one of {', '.join(MINIWOB_SPLITS)}.")
        return list(self._seeds[split])

    def expert(self, task_id: str) -> Expert | None:
        return EXPERTS.get(task_id)

    def task(self, task_id: str, seed: int, split: str) -> MiniWoBTask:
        if task_id not in self.tasks:
            resolve_tasks([task_id])  # raises for names MiniWoB does not have
            raise UserError(f"task {task_id!r} is not part of this suite's task list")
        return MiniWoBTask(task_id, seed, split, self.base_url, self.expert(task_id))
