"""The episode runner: a policy over tasks x seeds in N parallel browser contexts.

    async with EpisodeRunner(suite, contexts=2, run="eval/x", stage="eval") as runner:
        stats = await runner.run(policy, suite.task_ids(), suite.seeds("test"), sink,
                                 split="test")

`run_episode` runs one episode (given attempt and reflections); `run` schedules many,
skips the keys the sink already has (resume), writes every finished episode to the
sink and shows a progress bar. A custom `job` replaces the one-episode default per
(task, seed); the collect stage uses it for reflection retries (several attempts, each
a `run_episode` call with the reflections so far).

Environment errors (crash, hang, lost page, episode timeout) are not task failures:
the episode is rerun from scratch on a fresh context, up to `max_env_retries` times;
if it never completes, its EpisodeRow carries the error and success is False.

Policy errors never stop a run either: an output that cannot be parsed or executed
fails that step (the policy sees why in its next observation); an exception of the
policy ends that episode as a failure with `policy_error` set, and an exception of a
custom job is stored as a failed attempt 0 of its (task, seed). A UserError (a key,
URL or setting to fix) is the exception: it stops the run, as every episode would fail.

Navigation: every context carries the navigation guard of `navigation_policy` (live
suites: the safety policy), else of the suite's allowed origins (offline suites).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import struct
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any

from rmsweb.agents.base import ActResult, Policy
from rmsweb.env.actions import TERMINAL_ACTIONS, Action, ParseError, format_action, parse_action
from rmsweb.env.errors import EnvError
from rmsweb.env.types import ActRequest, HistoryItem
from rmsweb.errors import UserError
from rmsweb.store.rows import (
    EpisodeRecord,
    EpisodeRow,
    EpisodeSink,
    ScreenshotRow,
    StepRow,
    episode_key,
)
from rmsweb.suites.base import Outcome, Suite

if TYPE_CHECKING:
    from rmsweb.env.guard import NavigationPolicy
    from rmsweb.env.pool import BrowserPool, Slot
    from rmsweb.env.session import PageSession

log = logging.getLogger(__name__)

# One unit of work of `run`: everything to do for one (task, seed); returns the
# records to write, in order. The default runs attempt 0 once.
Job = Callable[["EpisodeRunner", Policy, str, int], Awaitable[list[EpisodeRecord]]]


@dataclass(slots=True)
class Timing:
    """Where an episode's wall time went (seconds), for benchmarks and logs."""

    reset_s: float = 0.0  # loading and seeding the task, first observation
    policy_s: float = 0.0  # waiting for the policy
    env_s: float = 0.0  # executing actions, evaluating, observing
    steps: int = 0

    def add(self, other: Timing) -> None:
        self.reset_s += other.reset_s
        self.policy_s += other.policy_s
        self.env_s += other.env_s
        self.steps += other.steps


@dataclass(slots=True)
class RunStats:
    episodes: int = 0
    successes: int = 0
    env_errors: int = 0  # episodes that failed for good with an environment error
    env_retries: int = 0  # reruns after environment errors
    policy_errors: int = 0  # episodes ended by an exception of the policy (or of the job)
    skipped: int = 0  # already in the sink
    wall_s: float = 0.0
    timing: Timing = field(default_factory=Timing)
    per_task: dict[str, list[EpisodeRow]] = field(default_factory=dict)

    @property
    def success_rate(self) -> float:
        return self.successes / self.episodes if self.episodes else 0.0


class EpisodeRunner:
    """Runs episodes of one suite on a BrowserPool (started and closed with the runner)."""

    def __init__(
        self,
        suite: Suite,
        *,
        contexts: int = 2,
        max_steps: int | None = None,
        screenshots: bool = False,
        set_of_marks: bool = False,
        viewport: tuple[int, int] = (1024, 768),
        action_timeout_s: float = 5.0,
        episode_timeout_s: float = 60.0,
        max_env_retries: int = 2,
        run: str = "",
        stage: str = "",
        progress: bool = True,
        executable: str | None = None,
        navigation_policy: NavigationPolicy | None = None,
        navigation_timeout_s: float | None = None,
        recycle_after: int = 200,
    ) -> None:
        """`recycle_after`: episodes per browser context before a fresh one (1: every
        episode starts with no cookies or storage from the last, as live sites need)."""
        self.suite = suite
        self.contexts = contexts
        self.max_steps = max_steps or suite.max_steps
        self.screenshots = screenshots or set_of_marks
        self.set_of_marks = set_of_marks
        self.viewport = viewport
        self.action_timeout_s = action_timeout_s
        self.episode_timeout_s = episode_timeout_s
        self.max_env_retries = max_env_retries
        self.run_name = run
        self.stage = stage
        self.progress = progress
        self._executable = executable
        self.navigation_policy = navigation_policy
        self.navigation_timeout_s = navigation_timeout_s
        self.recycle_after = recycle_after
        self.pool: BrowserPool | None = None
        self.timing = Timing()  # summed over every episode this runner ran

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> EpisodeRunner:
        from rmsweb.env.pool import BrowserPool

        await self.suite.start()
        try:
            policy = self.navigation_policy
            self.pool = await BrowserPool(
                self.contexts,
                viewport=self.viewport,
                # the offline policy of the suite's origins (known once it started)
                allowed_origins=self.suite.allowed_origins if policy is None else None,
                policy=policy,
                executable=self._executable,
                recycle_after=self.recycle_after,
            ).start()
        except BaseException:
            await self.suite.close()
            raise
        return self

    async def close(self) -> None:
        try:
            if self.pool is not None:
                await self.pool.close()
                self.pool = None
        finally:
            await self.suite.close()

    async def __aenter__(self) -> EpisodeRunner:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # ------------------------------------------------------------------ one episode

    async def run_episode(
        self,
        policy: Policy,
        task_id: str,
        seed: int,
        *,
        split: str = "train",
        attempt: int = 0,
        reflections: Sequence[str] = (),
    ) -> EpisodeRecord:
        """Run one episode to the end (rerunning it after environment errors)."""
        if self.pool is None:
            raise RuntimeError("runner not started: use `async with EpisodeRunner(...)`")
        started_at = time.time()
        t0 = time.perf_counter()
        last_error = ""
        for env_try in range(self.max_env_retries + 1):
            async with self.pool.slot() as slot:
                timing = Timing()
                budget = asyncio.timeout(self.episode_timeout_s)
                try:
                    async with budget:
                        record = await self._episode(
                            slot, policy, task_id, seed, split, attempt, reflections, timing
                        )
                except EnvError as exc:
                    last_error = str(exc)
                except TimeoutError:
                    if not budget.expired():
                        raise  # a timeout of the policy's own, not the episode's
                    last_error = f"episode took longer than {self.episode_timeout_s:g} s"
                else:
                    self.timing.add(timing)
                    ep = record.episode
                    ep.env_retries = env_try
                    ep.started_at = started_at
                    ep.wall_s = time.perf_counter() - t0
                    return record
                log.warning(
                    "%s seed %d try %d: environment error: %s", task_id, seed, env_try, last_error
                )
                self.pool.discard(slot)
        # Retries exhausted: the episode is reported as an environment error.
        row = self._episode_row(task_id, seed, split, policy, attempt)
        row.error = last_error
        row.env_retries = self.max_env_retries
        row.started_at = started_at
        row.wall_s = time.perf_counter() - t0
        return EpisodeRecord(episode=row, steps=[])

    def _episode_row(
        self, task_id: str, seed: int, split: str, policy: Policy, attempt: int
    ) -> EpisodeRow:
        return EpisodeRow(
            episode_id=episode_key(task_id, seed, policy.name, attempt),
            run=self.run_name,
            stage=self.stage,
            suite=self.suite.name,
            task_id=task_id,
            seed=seed,
            split=split,
            policy=policy.name,
            attempt=attempt,
        )

    async def _episode(
        self,
        slot: Slot,
        policy: Policy,
        task_id: str,
        seed: int,
        split: str,
        attempt: int,
        reflections: Sequence[str],
        timing: Timing,
    ) -> EpisodeRecord:
        from rmsweb.env.session import PageSession

        assert self.pool is not None
        t = time.perf_counter()
        page = await self.pool.page(slot)
        task = self.suite.task(task_id, seed, split)
        session = PageSession(
            page,
            action_timeout_s=self.action_timeout_s,
            exclude=self.suite.exclude,
            allowed_origins=self.suite.allowed_origins,
            blocked=slot.blocked,
            navigation_timeout_s=self.navigation_timeout_s,
        )
        row = self._episode_row(task_id, seed, split, policy, attempt)
        steps: list[StepRow] = []
        shots: dict[str, ScreenshotRow] = {}
        try:
            instruction = await task.setup(session)
            row.instruction = instruction
            session.track_navigation()
            obs = await session.observe(screenshot=self.screenshots, marks=self.set_of_marks)
            timing.reset_s += time.perf_counter() - t
            history: list[HistoryItem] = []
            outcome = Outcome()
            for step in range(self.max_steps):
                t = time.perf_counter()
                result = await _act_or_fail(
                    policy,
                    ActRequest(
                        task_id=task_id,
                        instruction=instruction,
                        observation=obs,
                        history=list(history),
                        reflections=list(reflections),
                        seed=seed,
                        step=step,
                        attempt=attempt,
                    ),
                    row,
                )
                if result is None:
                    break  # the policy raised: the episode ends here, as a failure
                # Stored as text whatever the policy returned (the parser refuses non-text).
                output = result.text if isinstance(result.text, str) else repr(result.text)
                t_policy = time.perf_counter() - t
                timing.policy_s += t_policy
                t = time.perf_counter()
                row.tokens_in += result.tokens_in
                row.tokens_out += result.tokens_out
                action, parse_error, error = await _execute_output(session, result.text)
                if action is not None and action.type == "answer":
                    row.answer = action.text
                outcome = await task.evaluate(session, row.answer)
                done = outcome.done or (action is not None and action.type in TERMINAL_ACTIONS)
                sha = _keep_screenshot(obs.screenshot_png, shots)
                steps.append(
                    StepRow(
                        episode_id=row.episode_id,
                        step=step,
                        url=obs.url,
                        obs_text=obs.text,
                        screenshot=sha,
                        output_text=output,
                        action=action.to_row() if action else None,
                        parse_ok=action is not None,
                        env_error=error if action is not None else None,
                        reward=outcome.reward,
                        done=done,
                        latency_s=result.latency_s or t_policy,
                        parse_error=parse_error,
                    )
                )
                history.append(
                    HistoryItem(
                        output_text=output,
                        action_text=format_action(action) if action else None,
                        error=error,
                    )
                )
                if not done:
                    obs = await session.observe(
                        screenshot=self.screenshots, marks=self.set_of_marks, last_error=error
                    )
                timing.env_s += time.perf_counter() - t
                timing.steps += 1
                if done:
                    break
            if self.screenshots and (not steps or not _claimed(steps[-1])):
                # Judges need the page after the last action, which no step row shows.
                if steps and steps[-1].done:  # not observed since that action
                    obs = await session.observe(screenshot=True, marks=self.set_of_marks)
                row.final_screenshot = _keep_screenshot(obs.screenshot_png, shots)
        finally:
            session.close()
        row.success = outcome.success
        row.reward = outcome.reward
        row.n_steps = len(steps)
        return EpisodeRecord(episode=row, steps=steps, screenshots=list(shots.values()))

    # ------------------------------------------------------------------ many episodes

    async def run(
        self,
        policy: Policy,
        tasks: Sequence[str],
        seeds: Sequence[int],
        sink: EpisodeSink,
        *,
        split: str = "train",
        job: Job | None = None,
        description: str | None = None,
        shard: tuple[int, int] = (0, 1),
    ) -> RunStats:
        """Run `job` (default: one episode, attempt 0) for every task x seed not yet in
        the sink, `contexts` at a time; write each job's records to the sink in order.

        A (task, seed) counts as done when its attempt-0 episode key is in
        `sink.completed_keys()`; custom jobs should write attempt 0 among their records.
        A job's records are written as one unit (`sink.write_unit`: all or none).
        `shard` (index, count): only units index, index + count, ... of `units(tasks, seeds)`
        (one node's share of a multi-node run; rmsweb.rollout.sharded).
        """
        done_keys = sink.completed_keys()
        index, count = shard
        mine = units(tasks, seeds)[index::count]
        share = set(mine)
        # Seed-major, so the first units done cover every task.
        todo = [
            (t, s)
            for s in seeds
            for t in tasks
            if (t, s) in share and episode_key(t, s, policy.name, 0) not in done_keys
        ]
        stats = RunStats(skipped=len(mine) - len(todo))
        run_job: Job = job or _single_episode(split)
        queue: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
        for item in todo:
            queue.put_nowait(item)
        t0 = time.perf_counter()
        timing_before = Timing()
        timing_before.add(self.timing)

        with _Progress(
            self.progress, description or f"{policy.name} on {self.suite.name}", len(todo)
        ) as bar:

            async def worker() -> None:
                while True:
                    try:
                        task_id, seed = queue.get_nowait()
                    except asyncio.QueueEmpty:
                        return
                    try:
                        records = await run_job(self, policy, task_id, seed)
                    except UserError:
                        raise
                    except Exception as exc:  # the job's own bug: this (task, seed) fails
                        records = [_failed_job_record(self, policy, task_id, seed, split, exc)]
                    # All or none: a rerun skips a unit whose attempt 0 is stored.
                    sink.write_unit(records)
                    for rec in records:
                        _count(stats, rec)
                    bar.advance(stats)

            workers = [asyncio.create_task(worker()) for _ in range(self.contexts)]
            try:
                await asyncio.gather(*workers)
            except BaseException:
                for w in workers:
                    w.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
                raise
        stats.wall_s = time.perf_counter() - t0
        stats.timing = Timing(
            reset_s=self.timing.reset_s - timing_before.reset_s,
            policy_s=self.timing.policy_s - timing_before.policy_s,
            env_s=self.timing.env_s - timing_before.env_s,
            steps=self.timing.steps - timing_before.steps,
        )
        return stats


def units(tasks: Sequence[str], seeds: Sequence[int]) -> list[tuple[str, int]]:
    """The (task, seed) units of a run in the order that shares them out: unit i goes to
    node i % n. Task-major, so each node gets about 1/n of every task's seeds."""
    return [(t, s) for t in tasks for s in seeds]


async def _act_or_fail(policy: Policy, request: ActRequest, row: EpisodeRow) -> ActResult | None:
    """The policy's answer, or None when it raised (a bug, a failed call): then
    `row.policy_error` says why. EnvError and UserError go up (rerun; stop the run)."""
    try:
        return await policy.act(request)
    except (EnvError, UserError):
        raise
    except Exception as exc:
        row.policy_error = describe_exception(exc)
        log.warning("%s seed %d: the policy raised %s", row.task_id, row.seed, row.policy_error)
        return None


async def _execute_output(
    session: PageSession, text: str
) -> tuple[Action | None, str | None, str | None]:
    """Parse a policy output and execute it: (action, parse error, step error).

    An unparsable output is not executed; the policy sees why in the next observation.
    An exception of the parser (the output is not text) or of executing the action
    fails this step the same way; only an EnvError (the browser is gone) goes up.
    """
    try:
        parsed = parse_action(text)
    except Exception as exc:
        reason = f"the parser raised {describe_exception(exc)}"
        return None, reason, f"could not parse the action: {reason}"
    if isinstance(parsed, ParseError):
        return None, parsed.reason, f"could not parse the action: {parsed.reason}"
    try:
        return parsed, None, await session.execute(parsed)
    except EnvError:
        raise
    except Exception as exc:
        return parsed, None, f"could not execute {format_action(parsed)}: {describe_exception(exc)}"


def describe_exception(exc: BaseException, limit: int = 500) -> str:
    """What to store about an error: 'ValueError: bad input (at /path/to/x.py:12)'."""
    text = f"{type(exc).__name__}: {exc}".rstrip(": ")
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        text += f" (at {frames[-1].filename}:{frames[-1].lineno})"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _failed_job_record(
    runner: EpisodeRunner, policy: Policy, task_id: str, seed: int, split: str, exc: Exception
) -> EpisodeRecord:
    """A job raised: store its (task, seed) as a failed attempt 0, so the run goes on and
    a rerun does not retry it forever."""
    log.warning("%s seed %d: the job raised %s", task_id, seed, describe_exception(exc))
    row = runner._episode_row(task_id, seed, split, policy, 0)
    row.policy_error = f"job failed: {describe_exception(exc)}"
    return EpisodeRecord(episode=row, steps=[])


def _single_episode(split: str) -> Job:
    async def job(
        runner: EpisodeRunner, policy: Policy, task_id: str, seed: int
    ) -> list[EpisodeRecord]:
        return [await runner.run_episode(policy, task_id, seed, split=split)]

    return job


def _count(stats: RunStats, rec: EpisodeRecord) -> None:
    ep = rec.episode
    stats.episodes += 1
    stats.successes += int(ep.success)
    stats.env_errors += int(ep.error is not None)
    stats.env_retries += ep.env_retries
    stats.policy_errors += int(ep.policy_error is not None)
    stats.per_task.setdefault(ep.task_id, []).append(ep)


def _claimed(step: StepRow) -> bool:
    """The step ended the episode with answer()/stop(): its screenshot is the last page."""
    return step.action is not None and step.action.type in TERMINAL_ACTIONS


def _keep_screenshot(png: bytes | None, shots: dict[str, ScreenshotRow]) -> str | None:
    if png is None:
        return None
    sha = hashlib.sha256(png).hexdigest()
    if sha not in shots:
        width, height = png_size(png)
        shots[sha] = ScreenshotRow(sha256=sha, png=png, width=width, height=height)
    return sha


def png_size(png: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk (no image library needed)."""
    if png[:8] != b"\x89PNG\r\n\x1a\n" or len(png) < 24:
        return 0, 0
    width, height = struct.unpack(">II", png[16:24])
    return int(width), int(height)


class _Progress:
    """A rich progress bar with the running success rate; a no-op when disabled."""

    def __init__(self, enabled: bool, description: str, total: int) -> None:
        self.enabled = enabled and total > 0
        self.description = description
        self.total = total
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                transient=False,
            )
            self._progress.__enter__()
            self._task = self._progress.add_task(self.description, total=self.total, info="")
        return self

    def advance(self, stats: RunStats) -> None:
        if self._progress is not None:
            info = f"success {stats.success_rate:.0%}"
            if stats.env_errors or stats.env_retries:
                info += f"  env errors {stats.env_errors} (reruns {stats.env_retries})"
            if stats.policy_errors:
                info += f"  policy errors {stats.policy_errors}"
            self._progress.update(self._task, advance=1, info=info)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(None, None, None)
