"""Teacher habits (rmsweb.agents.mistaken_expert): wasted steps in the same states every
time, named by the rule critic and dropped on a retry by a teacher that follows the
note; blind retries keep them. In memory, on the tasks of test_reflection_mechanism.
"""

from __future__ import annotations

import asyncio

import pytest

from rmsweb.agents.mistaken_expert import HABIT_KINDS, Habits, MistakenExpert
from rmsweb.collect.job import collect_job
from rmsweb.collect.metrics import collection_metrics
from rmsweb.collect.retry import RetryLoop
from rmsweb.collect.teacher import build_teacher
from rmsweb.spec import ExperimentSpec
from rmsweb.spec.common import SpecFieldError

from .test_reflection_mechanism import EXPERTS, FakeExpert, FakeSuite, play

# Many login tasks (the same page as `login`, other task ids): habits key on the task.
LOGINS = {f"login-{i}": FakeExpert("login") for i in range(150)}


def teacher(rate: float | None, experts=EXPERTS, mistakes: float = 0.0) -> MistakenExpert:
    habits = None if rate is None else Habits(rate)
    kinds = ["distractor_click", "wrong_field", "premature_stop"]
    return MistakenExpert(experts, mistakes, mistakes, kinds, ["scroll"], habits=habits)


def habit_steps(t: MistakenExpert, task: str, seed: int, attempt: int = 0, reflections=()):
    rec = asyncio.run(play(t, task, seed, attempt, reflections))
    return rec, t.habit_steps(task, seed, attempt)


def test_habits_fire_in_the_same_states_in_every_episode() -> None:
    t = teacher(0.6)
    seen = {tuple(habit_steps(t, "login", seed)[1]) for seed in range(12)}
    assert len(seen) == 1, "the same state kinds show the same habits on every seed"
    rec, steps = habit_steps(t, "login", 0)
    assert rec.episode.success and rec.episode.n_steps == 3 + len(steps)
    # Over many tasks the share of states (3 per login) with a habit is about the rate.
    t = teacher(0.6, LOGINS)
    fired = sum(len(habit_steps(t, task, 0)[1]) for task in LOGINS)
    assert 0.5 < fired / (3 * len(LOGINS)) < 0.7
    # A later attempt without reflections (a blind retry) repeats them.
    assert habit_steps(t, "login-3", 5, attempt=2)[1] == habit_steps(t, "login-3", 5)[1]


def test_rate_zero_or_none_is_the_teacher_without_habits() -> None:
    def outputs(t: MistakenExpert) -> list[list[str]]:
        return [
            [x.output_text for x in asyncio.run(play(t, task, s, attempt=a)).steps]
            for task in ("click", "login")
            for s in range(15)
            for a in range(2)
        ]

    plain = outputs(teacher(None, mistakes=0.5))
    assert outputs(teacher(0.0, mistakes=0.5)) == plain
    assert outputs(teacher(0.6, mistakes=0.5)) != plain  # the comparison can tell
    t = teacher(0.0, LOGINS)
    assert all(not habit_steps(t, task, 0)[1] for task in list(LOGINS)[:50])


def test_a_lower_rate_fires_in_a_subset_of_the_states() -> None:
    def states(rate: float) -> set:
        t = teacher(rate, LOGINS)
        return {(task, h) for task in list(LOGINS)[:60] for _, h in habit_steps(t, task, 0)[1]}

    low, high = states(0.3), states(0.9)
    assert low and low < high


@pytest.mark.parametrize("kind", HABIT_KINDS)
def test_each_habit_is_named_by_the_critic_and_dropped_on_a_followed_retry(kind: str) -> None:
    """A collection of the login task with one habit kind at rate 1: the reflection names
    the wasted step(s); the retry of a teacher that follows notes (adherence 1) is the
    gold path, and it is kept; a blind retry repeats the habit."""
    records = collect("reflect", 1.0, [kind])
    by_unit: dict[int, list] = {}
    for r in records:
        by_unit.setdefault(r.episode.seed, []).append(r)
    for attempts in by_unit.values():
        first = attempts[0]
        assert first.episode.success and first.episode.n_steps > 3, "the habit cost a step"
        named = set(first.reflections[0].named_steps)
        wasted = set(first.reflections[0].oracle_bad_steps or [])
        assert wasted and wasted <= named, "the critic names every wasted step"
        assert attempts[-1].episode.n_steps == 3 and attempts[-1].episode.success
    metrics, _ = collection_metrics(records, 3)
    assert metrics["kept_mean_steps"] == 3.0 and metrics["steps_saved"] > 0.2
    blind = collect("blind", 1.0, [kind])
    assert all(r.episode.n_steps == blind[0].episode.n_steps for r in blind[:3])
    assert collection_metrics(blind, 3)[0]["steps_saved"] == 0.0


def test_adherence_zero_keeps_the_habits_and_saves_nothing() -> None:
    deaf = collect("reflect", 1.0, list(HABIT_KINDS), adherence=0.0)
    assert collection_metrics(deaf, 3)[0]["steps_saved"] == 0.0
    heard = collect("reflect", 1.0, list(HABIT_KINDS))
    assert collection_metrics(heard, 3)[0]["steps_saved"] > 0.2


def collect(retry: str, rate: float, kinds: list[str], adherence: float = 1.0, seeds: int = 4):
    """The collect job over the login task with habits from the spec (no other mistakes)."""
    s = ExperimentSpec.model_validate(
        {
            "name": "habits",
            "collect": {
                "teacher": {
                    "kind": "expert",
                    "adherence": adherence,
                    "habits": {"rate": rate, "kinds": kinds},
                },
                "retry": retry,
                "max_retries": 2,
            },
        }
    )

    async def go() -> list:
        t = build_teacher(s, FakeSuite(), play=lambda policy, task, seed: play(policy, task, seed))
        job = collect_job(RetryLoop(retry, 2), t.judge, t.reflector, labels=t.labels)

        class Runner:
            async def run_episode(self, policy, task_id, seed, *, split, attempt, reflections):
                return await play(policy, task_id, seed, attempt, reflections)

        out = []
        for seed in range(seeds):
            out += await job(Runner(), t.policy, "login", seed)
        return out

    return asyncio.run(go())


def test_habits_spec_is_left_out_while_null_and_checked() -> None:
    base = {"name": "h", "collect": {"teacher": {"kind": "expert"}}}
    plain = ExperimentSpec.model_validate(base)
    assert "habits" not in plain.model_dump(mode="json")["collect"]["teacher"]
    on = ExperimentSpec.model_validate(
        {"name": "h", "collect": {"teacher": {"kind": "expert", "habits": {"rate": 0.6}}}}
    )
    dumped = on.model_dump(mode="json")["collect"]["teacher"]["habits"]
    assert dumped == {"rate": 0.6, "kinds": list(HABIT_KINDS)}
    assert ExperimentSpec.model_validate(on.model_dump(mode="json")) == on
    with pytest.raises((SpecFieldError, ValueError)):
        ExperimentSpec.model_validate(
            {"name": "h", "collect": {"teacher": {"kind": "expert", "habits": {"rate": 1.5}}}}
        )
    with pytest.raises((SpecFieldError, ValueError)):
        ExperimentSpec.model_validate(
            {"name": "h", "collect": {"teacher": {"habits": {"kinds": ["inspect", "inspect"]}}}}
        )


def test_the_steps_saved_interval_does_not_depend_on_the_episodes_order() -> None:
    import random

    from rmsweb.collect.metrics import steps_saved

    pairs = [(4, 3), (3, 3), (5, 3), (4, 4), (6, 3), (3, 3), (4, 3)] * 3
    shuffled = pairs[:]
    random.Random(1).shuffle(shuffled)
    # A collection resumed after a kill stores its episodes in another order.
    assert steps_saved(shuffled) == steps_saved(pairs)
    assert steps_saved(pairs)["steps_saved_ci_low"] < steps_saved(pairs)["steps_saved"]
