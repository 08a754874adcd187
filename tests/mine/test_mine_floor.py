"""The floor's next round: which tasks get more mine seeds (rmsweb/mine/floor.py)."""

from __future__ import annotations

from rmsweb.mine.floor import TaskTally, next_round


def test_next_round_takes_tasks_below_the_floor_that_fail_often_enough() -> None:
    tallies = {
        "often-few": TaskTally(episodes=64, failed=16, failure_states=8),  # 25%, below floor
        "often-enough": TaskTally(episodes=64, failed=30, failure_states=25),  # at the floor
        "rare": TaskTally(episodes=64, failed=3, failure_states=3),  # 4.7% < 10%
        "capped": TaskTally(episodes=64, failed=20, failure_states=5),  # no seeds left
        "edge": TaskTally(episodes=10, failed=1, failure_states=0),  # exactly 10%
    }
    done = {"often-few": 16, "often-enough": 16, "rare": 16, "capped": 48, "edge": 16}
    assert next_round(tallies, done, floor=20, min_rate=0.1, cap=48) == ["edge", "often-few"]
    # A task with no rollouts stored yet (all env errors) is not given more seeds.
    assert next_round({}, {"x": 16}, floor=20, min_rate=0.1, cap=48) == []
    # A zero floor never asks for more.
    assert next_round(tallies, done, floor=0, min_rate=0.0, cap=48) == []


def test_a_rounds_tally_ignores_episodes_stored_for_later_rounds() -> None:
    """A killed run may have stored part of round 2 before dying: the rerun's decision
    for round 2 must count round 1's seeds only, or it takes different tasks."""
    from rmsweb.mine.floor import tally
    from rmsweb.store.synthetic import make_episode

    def ep(task: str, seed: int, success: bool) -> object:
        return make_episode(run="r", task=task, seed=seed, policy="sft", success=success, n_steps=2)

    round_1 = [ep("a", 0, False), ep("a", 1, True), ep("b", 0, True), ep("b", 1, True)]
    round_2 = [ep("a", 2, False), ep("b", 2, False), ep("b", 3, False)]
    played = {"a": {0, 1}, "b": {0, 1}}
    assert tally(round_1 + round_2, played) == tally(round_1)
    assert tally(round_1, played)["a"].failure_rate == 0.5
    assert tally(round_1 + round_2)["b"].failed == 2  # without `played`, every record counts
