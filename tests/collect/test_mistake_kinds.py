"""The mistake kinds that do not heal themselves, on real MiniWoB pages (headless Chromium):
each, injected at a non-final step (step 0, on the seeds whose gold takes >= 2 steps),
fails the episode on >= 90% of seeds; and the scripted teacher reports which mistake it
made where (for the critic's scores per kind), while the gold expert solves the same seeds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from rmsweb.agents.expert import ExpertPolicy
from rmsweb.agents.mistaken_expert import ERROR_KINDS, UNTARGETED, MistakenExpert
from rmsweb.rollout.runner import EpisodeRunner
from rmsweb.store.rows import MemorySink
from rmsweb.suites.miniwob import MiniWoB
from rmsweb.suites.miniwob_experts import EXPERTS

pytestmark = pytest.mark.browser

# Non-healing kinds and tasks with experts where they fit (transform tasks for
# literal_value: case and date format; multi-field forms; a select and a form).
NON_HEALING = {
    "literal_value": ["enter-text-2", "enter-date"],
    "one_field_short": ["login-user", "enter-password"],
    "wrong_label": ["choose-list", "login-user"],
}
SEEDS = list(range(10))


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()


@pytest.fixture(scope="module")
def runner(loop: asyncio.AbstractEventLoop) -> Iterator[EpisodeRunner]:
    tasks = sorted({t for ts in NON_HEALING.values() for t in ts})
    suite = MiniWoB(tasks, train_seeds=SEEDS, test_seeds=range(100, 101))
    r = EpisodeRunner(suite, contexts=2, progress=False, screenshots=False)
    loop.run_until_complete(r.start())
    yield r
    loop.run_until_complete(r.close())


def test_two_new_kinds_at_least_are_ones_no_critic_rule_targets() -> None:
    new = {"literal_value", "one_field_short", "wrong_label"}
    assert new <= set(ERROR_KINDS)
    assert len(new & UNTARGETED) >= 2


@pytest.mark.parametrize("kind", sorted(NON_HEALING))
def test_a_non_healing_kind_at_a_non_final_step_fails_the_episode(loop, runner, kind) -> None:
    tasks = NON_HEALING[kind]
    gold = MemorySink()
    loop.run_until_complete(runner.run(ExpertPolicy(EXPERTS), tasks, SEEDS, gold, split="train"))
    gold_steps = {(r.episode.task_id, r.episode.seed): r.episode.n_steps for r in gold.records}
    assert all(r.episode.success for r in gold.records)
    teacher = MistakenExpert(
        {t: EXPERTS[t] for t in tasks},
        error_rate=1.0,
        detour_rate=0.0,
        error_kinds={kind: 1.0},
        detour_kinds=["scroll"],
        max_mistake_step=1,  # the mistake at step 0
    )
    # Seeds whose gold takes >= 2 steps: there step 0 is not the last.
    seeds = [s for s in SEEDS if all(gold_steps[(t, s)] >= 2 for t in tasks)]
    assert len(seeds) >= 7
    sink = MemorySink()
    loop.run_until_complete(runner.run(teacher, tasks, seeds, sink, split="train"))
    assert len(sink.records) == len(tasks) * len(seeds)
    for r in sink.records:
        ep = r.episode
        made = teacher.mistake_of(ep.task_id, ep.seed, ep.attempt)
        assert made == (0, kind), (ep.task_id, ep.seed, made)
    for task in tasks:
        runs = [r.episode for r in sink.records if r.episode.task_id == task]
        failed = sum(not e.success for e in runs)
        assert failed >= 0.9 * len(runs), (kind, task, failed, len(runs))


def test_the_critic_is_not_written_for_a_literal_value(loop, runner) -> None:
    """No rule reads a typed value as a transformation of the goal's text: on enter-text-2
    the literal fill at step 0 looks right to the critic, which blames the submit after
    it, while the oracle's first bad step is the fill. Measured, not tuned."""
    from rmsweb.agents.advice import named_steps
    from rmsweb.judge.critic import critique
    from rmsweb.judge.oracle import LabelingPolicy, OracleLabels, bad_steps
    from rmsweb.judge.types import Verdict

    task = "enter-text-2"
    teacher = MistakenExpert(
        {task: EXPERTS[task]}, 1.0, 0.0, {"literal_value": 1.0}, ["scroll"], max_mistake_step=1
    )
    labels = OracleLabels({task: EXPERTS[task]})
    sink = MemorySink()
    policy = LabelingPolicy(teacher, labels)
    loop.run_until_complete(runner.run(policy, [task], SEEDS, sink, split="train"))
    made = [r for r in sink.records if teacher.mistake_of(task, r.episode.seed, 0)]
    assert len(made) >= 3  # seeds whose asked case differs from the goal's text
    hits = 0
    for r in made:
        assert not r.episode.success
        bad = bad_steps(r, labels)
        assert bad and bad[0] == 0  # the oracle's first error: the literal fill
        named = named_steps(critique(r, Verdict(False)))
        hits += bool(named) and named[0] == bad[0]
    assert hits <= len(made) // 2, (hits, len(made))
