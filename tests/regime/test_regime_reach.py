"""Reach (pass@G) on constructed states with stub policies, and the val failure states.

The stubs answer the state's right action with a known rule (on a given call, or with
a known probability), so the pass@G that comes out is known in advance."""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict

import pytest

from rmsweb.agents.base import ActResult
from rmsweb.env.types import ActRequest
from rmsweb.regime.accept import accepted, grade_samples, on_target
from rmsweb.regime.failures import val_failure_states
from rmsweb.regime.measures import POOLED, reach_by_task
from rmsweb.regime.probe import ProbeState, probe_states, sampling_policy
from rmsweb.store.rows import ElementBoxRow, StepLabelRow
from rmsweb.store.synthetic import make_episode

RIGHT, WRONG = "Action: click(3)", "Action: click(9)"


def state(i: int, task: str = "click-button") -> ProbeState:
    return ProbeState(
        state_id=f"s{i}",
        kind="mined",
        source="critical",
        task_id=task,
        seed=i,
        episode_id=f"e{i}",
        step=0,
        instruction=f"state {i}",
        obs_text=f'[3] button "ok {i}"',
        screenshot=None,
        history=[],
        references=["click(3)"],
        boxes=[],
        policy_output=WRONG,
    )


class OnCall:
    """Right on the k-th call for a state (k from its instruction's number), else wrong:
    a state whose k < G is reached, one whose k >= G is not."""

    name = "stub"

    def __init__(self, first_right: dict[str, int]) -> None:
        self.first_right = first_right
        self.calls: dict[str, int] = defaultdict(int)

    async def act(self, request: ActRequest) -> ActResult:
        k = self.calls[request.instruction]
        self.calls[request.instruction] += 1
        return ActResult(RIGHT if k == self.first_right[request.instruction] else WRONG)

    async def close(self) -> None:
        pass


class WithProbability:
    """Right with probability p, independently per call (seeded)."""

    name = "stub"

    def __init__(self, p: float, seed: int) -> None:
        self.p = p
        self.rng = random.Random(seed)

    async def act(self, request: ActRequest) -> ActResult:
        return ActResult(RIGHT if self.rng.random() < self.p else WRONG)

    async def close(self) -> None:
        pass


def test_pass_at_g_counts_states_with_a_right_sample_among_g() -> None:
    states = [state(i, task="click-button" if i < 6 else "click-link") for i in range(10)]
    # first right sample on call i % 7: calls 0..3 reach at G = 4, 4..6 never do
    first = {s.instruction: i % 7 for i, s in enumerate(states)}
    policy = OnCall(first)
    asyncio.run(probe_states(policy, states, 4))
    assert all(len(s.samples) == 4 for s in states)
    assert all(policy.calls[s.instruction] == 4 for s in states)  # G reaches the policy
    grade_samples(states, tau=1.0)
    reach = reach_by_task(states, ["click-button", "click-link", "enter-text"])
    # click-button: states 0-5 -> first right at 0,1,2,3,4,5: 4 of 6 reached
    assert (reach["click-button"].reached, reach["click-button"].states) == (4, 6)
    # click-link: states 6-9 -> 6, 0, 1, 2: 3 of 4
    assert (reach["click-link"].reached, reach["click-link"].states) == (3, 4)
    assert reach["enter-text"].states == 0 and reach["enter-text"].rate is None
    assert reach[POOLED].reached == 7 and reach[POOLED].states == 10
    low, high = reach[POOLED].interval
    assert 0 < low < 0.7 < high < 1
    # A larger G reaches more of the same states (the stub restarts its calls)
    for s in states:
        s.samples, s.samples_ok = [], []
    asyncio.run(probe_states(OnCall(first), states, 7))
    grade_samples(states, tau=1.0)
    assert reach_by_task(states, [])[POOLED].reached == 10


@pytest.mark.parametrize(("p", "g"), [(0.1, 8), (0.3, 4), (0.5, 2)])
def test_pass_at_g_matches_one_minus_miss_to_the_g(p: float, g: int) -> None:
    states = [state(i) for i in range(600)]
    asyncio.run(probe_states(WithProbability(p, seed=1), states, g))
    grade_samples(states, tau=1.0)
    r = reach_by_task(states, ["click-button"])[POOLED]
    expected = 1 - (1 - p) ** g
    assert abs(r.rate - expected) < 0.06, (r.rate, expected)
    low, high = r.interval
    assert low <= expected <= high


def test_the_verdict_is_rl_rewards_with_its_tau() -> None:
    refs = ['fill(1, "username")']
    assert not accepted('Action: fill(1, "usernam")', refs, [], 1.0, "t")
    assert accepted('Action: fill(1, "usernam")', refs, [], 0.8, "t")
    assert not accepted("no action here", refs, [], 0.5, "t")
    # click_xy inside the reference element's box is the same click, as in RL
    box = [ElementBoxRow("3", 10.0, 10.0, 20.0, 20.0)]
    assert accepted("Action: click_xy(15, 15)", ["click(3)"], box, 1.0, "t")
    assert not accepted("Action: click_xy(55, 55)", ["click(3)"], box, 1.0, "t")


def test_on_target_counts_the_right_action_and_element_whatever_the_value() -> None:
    refs = ['fill(1, "username")']
    assert on_target('Action: fill(1, "garbled")', refs, [], "t")
    assert not on_target('Action: fill(2, "username")', refs, [], "t")  # another field
    assert not on_target("Action: click(1)", refs, [], "t")  # another action type
    assert not on_target("no action here", refs, [], "t")
    box = [ElementBoxRow("3", 10.0, 10.0, 20.0, 20.0)]
    assert on_target("Action: click_xy(15, 15)", ["click(3)"], box, "t")
    # Reach on target >= reach: a state whose samples type a wrong value into the right
    # field is on target and not reached; one with a wrong field is neither.
    a, b, c = state(0), state(1), state(2)
    for s in (a, b, c):
        s.references = ['fill(1, "joe")']
    a.samples = ['Action: fill(1, "jo")', 'Action: fill(1, "joe")']
    b.samples = ['Action: fill(1, "jo")', 'Action: fill(1, "j")']
    c.samples = ['Action: fill(2, "joe")', "Action: click(1)"]
    grade_samples([a, b, c], tau=1.0)
    assert [s.reached for s in (a, b, c)] == [True, False, False]
    assert [s.reached_target for s in (a, b, c)] == [True, True, False]
    target = reach_by_task([a, b, c], ["click-button"], on_target=True)[POOLED]
    assert (target.reached, target.states) == (2, 3)
    assert reach_by_task([a, b, c], ["click-button"])[POOLED].reached == 1


def test_sampling_policy_shares_the_model_and_takes_the_rl_temperature() -> None:
    from rmsweb.agents.hf_policy import HFPolicy
    from rmsweb.agents.prompt import PromptConfig

    loaded = object()
    greedy = HFPolicy(loaded, PromptConfig(), name="sft", batch_size=5, max_new_tokens=7, seed=3)
    sampler = sampling_policy(greedy, 0.7)
    assert type(sampler) is HFPolicy and sampler.loaded is loaded
    assert sampler.temperature == 0.7 and greedy.temperature == 0.0
    assert (sampler.seed, sampler.batch_size, sampler.max_new_tokens) == (3, 5, 7)


def _labels(rec, acceptable: dict[int, list[str]]) -> None:
    eid = rec.episode.episode_id
    rec.labels = [StepLabelRow(eid, step, "oracle", acts) for step, acts in acceptable.items()]


def test_val_failure_states_are_the_labelled_steps_greedy_got_wrong() -> None:
    # make_episode's outputs: step 0 click(4), step 1 fill(1, "user"), step 2 click(4)
    rec = make_episode(
        run="regime/x/s0", task="enter-text", seed=5, policy="sft", success=False, n_steps=3
    )
    _labels(rec, {0: ["click(4)"], 1: ['fill(1, "usr")'], 2: []})
    again = make_episode(
        run="regime/x/s0",
        task="enter-text",
        seed=5,
        policy="sft",
        success=False,
        n_steps=3,
        attempt=1,
    )
    _labels(again, {0: ["click(4)"], 1: ['fill(1, "usr")'], 2: []})  # the same states
    broken = make_episode(
        run="regime/x/s0",
        task="enter-text",
        seed=6,
        policy="sft",
        success=False,
        n_steps=3,
        env_error="page crashed",
    )
    _labels(broken, {0: ["click(9)"]})
    found = val_failure_states([rec, again, broken], tau=1.0)
    # step 0 was right, step 2 had no label to grade, the broken episode says nothing
    assert [(s.step, s.references, s.policy_output) for s in found] == [
        (1, ['fill(1, "usr")'], 'Thought: type the name.\nAction: fill(1, "user")')
    ]
    assert found[0].kind == "val" and len(found[0].history) == 1
    assert found[0].source == "first"  # step 0 was right: step 1 is the first wrong step
    # RL's tau decides what a failure is: at 0.7, "user" is "usr"
    assert val_failure_states([rec], tau=0.7) == []


def test_val_failure_states_after_the_first_wrong_step_are_later() -> None:
    rec = make_episode(
        run="regime/x/s0", task="enter-text", seed=5, policy="sft", success=False, n_steps=3
    )
    _labels(rec, {0: ["click(5)"], 1: ['fill(1, "usr")'], 2: ["click(4)"]})
    found = val_failure_states([rec], tau=1.0)
    assert [(s.step, s.source) for s in found] == [(0, "first"), (1, "later")]
