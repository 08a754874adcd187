"""The reference length for detours is task-level: the median gold length over the task's
reference seeds with the judged seed left out (never that seed's own gold), and no
reflection quotes it."""

from __future__ import annotations

import asyncio
import re

from rmsweb.collect.teacher import task_gold_lengths
from rmsweb.judge.critic import critique
from rmsweb.judge.outcome import attempt_judge
from rmsweb.judge.reference import ReferenceLengths
from rmsweb.judge.types import Verdict
from rmsweb.store.rows import EpisodeRecord, EpisodeRow, StepRow

# The gold expert's length per seed of task "t" (seed 0 is unusually long).
GOLD = {0: 9, 1: 2, 2: 3, 3: 3, 4: 4, 5: 2}


def record(task: str, seed: int, n_steps: int, success: bool = True) -> EpisodeRecord:
    row = EpisodeRow(f"{task}/{seed}", "collect/x", "collect", "fake", task, seed, "train", "p")
    row.success, row.n_steps, row.reward = success, n_steps, float(success)
    row.instruction = 'Click on the "ok" button.'
    steps = [
        StepRow(
            row.episode_id,
            i,
            "u",
            '[1] button "ok"',
            None,
            "click(1)",
            None,
            True,
            None,
            0.0,
            False,
            0.0,
        )
        for i in range(n_steps)
    ]
    return EpisodeRecord(row, steps)


def test_reference_is_the_median_gold_of_other_seeds_never_the_judged_one() -> None:
    played: list[tuple[str, int]] = []

    async def play(policy, task, seed):
        played.append((task, seed))
        return record(task, seed, GOLD[seed])

    async def go():
        gold = task_gold_lengths(object(), play, seeds=[0, 1, 2, 3, 4])
        # seed 0: median of seeds 1-4 (2, 3, 3, 4) = 3, not its own 9
        assert await gold(record("t", 0, 5)) == 3
        # seed 2: median of 9, 2, 3, 4 = 3.5, rounded up
        assert await gold(record("t", 2, 5)) == 4
        # a seed outside the reference set: median of all five
        assert await gold(record("t", 5, 5)) == 3
        # each reference seed played once per task
        assert sorted(played) == [("t", s) for s in range(5)]
        # the judged seed's own gold changes nothing of its reference
        GOLD[0] = 1
        again = task_gold_lengths(object(), play, seeds=[0, 1, 2, 3, 4])
        assert await again(record("t", 0, 5)) == 3

    asyncio.run(go())
    GOLD[0] = 9


def test_no_reference_seeds_falls_back_to_the_shortest_success_seen() -> None:
    async def play(policy, task, seed):
        raise AssertionError("no gold is played without reference seeds")

    async def go():
        gold = task_gold_lengths(object(), play, seeds=[])
        judge = attempt_judge(ReferenceLengths(gold), 0.2)
        first = await judge(record("t", 1, 2))
        assert first.reference_length is None
        later = await judge(record("t", 2, 4))
        assert later.reference_length == 2 and later.detour

    asyncio.run(go())


def test_the_reflection_on_a_long_success_quotes_no_reference_number() -> None:
    rec = record("t", 0, 7)
    text = critique(rec, Verdict(True, True, reference_length=6))
    outcome = text.split(". ")[0]
    assert outcome == "The attempt succeeded in 7 steps, more than the task usually takes"
    unnumbered = re.sub(r"Steps? \d+(-\d+)?:", "", text)
    assert "6" not in unnumbered, text  # the reference length appears nowhere
