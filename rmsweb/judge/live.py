"""Judging live episodes: the benchmark's LLM judge decides success, before the episode is stored.

A live page cannot say whether its task was done. After each episode the benchmark's
own judge (rmsweb.judge.protocols: WebVoyager, WebJudge, WebTailBench) reads the goal,
the final answer, the actions and the screenshots, and `LiveJudge.judge` writes its
verdict into the record:
1. success, and reward 1.0 / 0.0, from the verdict (an unparsable verdict is a failure);
2. the task's category (site, level or segment), so reports can group by it, and its
   goal where the episode never got to read it (an environment error before the start
   page loaded), so an export still says what the task was;
3. the judge's calls as JudgmentRows on the record. The ShardWriter stores them in the
   same shard as the episode, so a resumed run never holds an episode without its
   judgments and never pays to judge it twice.
An episode that ended in an environment error is not judged: it counts as a failure
(as in eval metrics), and the judge would grade a trajectory that never ran.

`LiveJudge.verdict` is the same judgment as a JudgeFn for the collect stage's retry loop:
a judged failure, or a success with more page actions than the task's reference length
(Online-Mind2Web's human step count) times 1 + detour_slack, is retried.

Answers are cached on disk (client.py) under `judge_cache_dir()`: outside every DVC
output, so they survive stage reruns and a re-judged trajectory costs nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmsweb.env.actions import TERMINAL_ACTIONS
from rmsweb.judge.client import JudgeClient
from rmsweb.judge.episode import JudgeInput, from_record
from rmsweb.judge.protocols import build_judge_client, judge_episode, judge_options, protocol_for
from rmsweb.judge.types import JudgeOutcome, Verdict, is_detour
from rmsweb.store.rows import EpisodeRecord, JudgmentRow

if TYPE_CHECKING:
    from rmsweb.suites.live import LiveSuite

CACHE_ENV = "RMSWEB_JUDGE_CACHE"
DEFAULT_CACHE = Path(".rmsweb-cache") / "judge"


def judge_cache_dir() -> Path:
    """Where judge answers are cached: $RMSWEB_JUDGE_CACHE, else .rmsweb-cache/judge
    below the working directory (the project root when DVC runs a stage)."""
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE)


def page_actions(record: EpisodeRecord) -> int:
    """Steps that acted in the page: the final answer()/stop() is a claim, not an action
    (Online-Mind2Web's reference lengths count page actions only)."""
    return sum(
        1 for s in record.steps if s.action is not None and s.action.type not in TERMINAL_ACTIONS
    )


class LiveJudge:
    """The judge of one live suite's episodes (see the module docstring)."""

    def __init__(
        self,
        client: JudgeClient,
        protocol: str,
        *,
        options: Mapping[str, Any] | None = None,
        categories: Mapping[str, str] | None = None,
        goals: Mapping[str, str] | None = None,
        reference_lengths: Mapping[str, int | None] | None = None,
        detour_slack: float = 0.2,
    ) -> None:
        self.client = client
        self.protocol = protocol
        self.options = dict(options or {})
        self.categories = dict(categories or {})
        self.goals = dict(goals or {})
        self.reference_lengths = dict(reference_lengths or {})
        self.detour_slack = detour_slack

    async def judge(self, record: EpisodeRecord) -> JudgeOutcome | None:
        """Judge a stored-to-be episode in place; None when it was not judged (env error)."""
        ep = record.episode
        ep.category = self.categories.get(ep.task_id, ep.category)
        ep.instruction = ep.instruction or self.goals.get(ep.task_id, "")
        if ep.error is not None:
            ep.success, ep.reward = False, 0.0
            return None
        outcome = await self.judge_input(from_record(record))
        ep.success, ep.reward = outcome.success, float(outcome.success)
        record.judgments.extend(self.client.take_rows(ep.episode_id))
        return outcome

    async def judge_input(self, inp: JudgeInput) -> JudgeOutcome:
        """Judge a trajectory (a stored episode's, or an imported run's); its calls stay
        in `client.rows` until taken."""
        return await judge_episode(self.protocol, inp, self.client, **self.options)

    def take_rows(self, episode_id: str) -> list[JudgmentRow]:
        return self.client.take_rows(episode_id)

    async def verdict(self, record: EpisodeRecord) -> Verdict:
        """A JudgeFn (rmsweb.judge.types) for the retry loop: judge, then look for detours."""
        await self.judge(record)
        reference = self.reference_lengths.get(record.episode.task_id)
        success = record.episode.success
        detour = success and is_detour(page_actions(record), reference, self.detour_slack)
        return Verdict(success, detour, reference)

    async def close(self) -> None:
        await self.client.close()


def build_live_judge(
    suite_spec: Any,
    suite: LiveSuite,
    *,
    cache_dir: Path | None = None,
    detour_slack: float = 0.2,
) -> LiveJudge:
    """The judge of a live suite spec (its `judge:` section), for the tasks of `suite`."""
    spec = suite_spec.judge
    infos = [suite.info(t) for t in suite.task_ids()]
    return LiveJudge(
        build_judge_client(spec, cache_dir=cache_dir or judge_cache_dir()),
        protocol_for(suite_spec.kind, spec.protocol),
        options=judge_options(spec),
        categories={t.id: t.category for t in infos},
        goals={t.id: t.goal for t in infos},
        reference_lengths={t.id: t.reference_length for t in infos},
        detour_slack=detour_slack,
    )
