"""G samples of the SFT policy on stored states, at the RL temperature.

A state is probed as the policy would see it live: the request carries the stored page
text, the history rebuilt from the stored steps and the screenshot, so the prompt is the
one eval, mining and RL build (rmsweb.agents.prompt.build_messages, through the policy's
own render). All G x N requests are handed to the policy at once: a batching backend
(hf, vllm) answers them in full batches.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rmsweb.agents.base import Policy
from rmsweb.env.types import ActRequest, HistoryItem, Observation
from rmsweb.store.rows import ElementBoxRow


@dataclass
class ProbeState:
    """One failure state to probe, from the mine run (mined) or the val rollouts (val)."""

    state_id: str
    kind: str  # mined | val: which reach it counts in
    source: str  # critical | fragile (mined states) | first | later (val: failures.py)
    task_id: str
    seed: int
    episode_id: str  # the episode the state comes from (the mine run's, or this run's)
    step: int
    instruction: str
    obs_text: str
    screenshot: str | None
    history: list[HistoryItem]
    references: list[str]  # acceptable actions in the action syntax
    boxes: list[ElementBoxRow]
    policy_output: str | None  # what the policy did there (val: its greedy output)
    samples: list[str] = field(default_factory=list)
    samples_ok: list[bool] = field(default_factory=list)
    samples_on_target: list[bool] = field(default_factory=list)  # action and element right

    @property
    def reached(self) -> bool:
        """At least one sample is acceptable: pass@G."""
        return any(self.samples_ok)

    @property
    def reached_target(self) -> bool:
        """At least one sample has a reference's action and element (value aside)."""
        return any(self.samples_on_target)


def from_mined_row(row: Any) -> ProbeState:
    """A mined_states row (critical or fragile) as a state to probe."""
    return ProbeState(
        state_id=row.state_id,
        kind="mined",
        source=row.source,
        task_id=row.task_id,
        seed=row.seed,
        episode_id=row.episode_id,
        step=row.step,
        instruction=row.instruction,
        obs_text=row.obs_text,
        screenshot=row.screenshot,
        history=list(row.history),
        references=list(row.reference_actions),
        boxes=list(row.boxes),
        policy_output=row.policy_output,
    )


def request_of(state: ProbeState, screenshots: Mapping[str, bytes] | None = None) -> ActRequest:
    """The policy's request in this state (screenshot only where one is stored)."""
    png = (screenshots or {}).get(state.screenshot) if state.screenshot else None
    return ActRequest(
        task_id=state.task_id,
        instruction=state.instruction,
        observation=Observation(url="", title="", text=state.obs_text, screenshot_png=png),
        history=list(state.history),
        seed=state.seed,
        step=state.step,
    )


def sampling_policy(greedy: Any, temperature: float) -> Any:
    """The same checkpoint sampling at `temperature`, sharing `greedy`'s loaded weights
    (hf or vllm backend: both are HFPolicy), so the model is not loaded twice."""
    return type(greedy)(
        greedy.loaded,
        greedy.prompt,
        name=greedy.name,
        batch_size=greedy.batch_size,
        max_new_tokens=greedy.max_new_tokens,
        temperature=temperature,
        seed=greedy.seed,
    )


async def probe_states(
    policy: Policy,
    states: Sequence[ProbeState],
    group_size: int,
    screenshots: Mapping[str, bytes] | None = None,
) -> None:
    """Fill each state's `samples` with `group_size` outputs of `policy` (in order)."""
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    requests = [request_of(s, screenshots) for s in states]
    results = await asyncio.gather(*(policy.act(r) for r in requests for _ in range(group_size)))
    for i, state in enumerate(states):
        state.samples = [r.text for r in results[i * group_size : (i + 1) * group_size]]
