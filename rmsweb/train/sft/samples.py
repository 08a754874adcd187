"""SFT samples: one per step of each (task, seed)'s kept teacher trajectory.

The kept attempt is the shortest success (what the reflection loop keeps); each of
its steps becomes prompt = the chat the policy will see (rmsweb.agents.prompt, no
reflections) and completion = optional thought + the canonical action. With
`prompt.screenshot` on, a step that has a screenshot carries its PNG and its prompt
the image slot, as the policy sees it at eval (rmsweb.agents.hf_policy.render).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from rmsweb.agents.prompt import PromptConfig, build_messages, completion_text, split_thought
from rmsweb.env.actions import Action, format_action
from rmsweb.env.types import HistoryItem
from rmsweb.store.rows import EpisodeRecord


@dataclass
class Sample:
    task_id: str
    seed: int
    step: int
    messages: list[dict]
    completion: str
    screenshot: str | None = None  # sha256 of the step's screenshot, when the prompt shows it
    screenshot_png: bytes | None = None


def kept_records(records: list[EpisodeRecord]) -> list[EpisodeRecord]:
    """Per (task, seed): the successful attempt with the fewest steps (then the earliest)."""
    best: dict[tuple[str, int], EpisodeRecord] = {}
    for rec in records:
        ep = rec.episode
        if not ep.success or ep.error:
            continue
        key = (ep.task_id, ep.seed)
        cur = best.get(key)
        if cur is None or (ep.n_steps, ep.attempt) < (cur.episode.n_steps, cur.episode.attempt):
            best[key] = rec
    return [best[k] for k in sorted(best)]


def within_budget(
    records: list[EpisodeRecord], start: int, demos_per_task: int | None
) -> list[EpisodeRecord]:
    """The records of each task's first `demos_per_task` train seeds (all when None).

    A budget counts train seeds, not successes: a seed whose teacher never succeeded
    spends its place, as a demonstration that could not be had.
    """
    if demos_per_task is None:
        return records
    end = start + demos_per_task
    return [r for r in records if start <= r.episode.seed < end]


def build_samples(
    records: list[EpisodeRecord], prompt: PromptConfig, count_tokens: Callable[[str], int]
) -> list[Sample]:
    """SFT samples from kept episodes; no reflection text ever enters a sample."""
    samples: list[Sample] = []
    for rec in kept_records(records):
        ep = rec.episode
        shots = {s.sha256: s.png for s in rec.screenshots}
        history: list[HistoryItem] = []
        for st in sorted(rec.steps, key=lambda s: s.step):
            action_text = format_action(Action.from_row(st.action)) if st.action else None
            if st.parse_ok and action_text is not None:
                png = shots.get(st.screenshot) if prompt.screenshot and st.screenshot else None
                messages = build_messages(
                    ep.instruction,
                    st.obs_text,
                    history,
                    prompt,
                    count_tokens,
                    with_image=png is not None,
                )
                thought = split_thought(st.output_text) if prompt.thoughts else None
                samples.append(
                    Sample(
                        ep.task_id,
                        ep.seed,
                        st.step,
                        messages,
                        completion_text(action_text, thought),
                        st.screenshot if png is not None else None,
                        png,
                    )
                )
            history.append(HistoryItem(st.output_text, action_text, st.env_error))
    return samples


def write_samples(path: Path, samples: Iterable[Sample]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for s in samples:
            f.write(
                json.dumps(
                    {
                        "task_id": s.task_id,
                        "seed": s.seed,
                        "step": s.step,
                        "prompt": s.messages,
                        "completion": s.completion,
                        "screenshot": s.screenshot,
                    }
                )
                + "\n"
            )
