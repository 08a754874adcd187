"""The spec package's list of MiniWoB tasks with an expert matches the experts' registry.

rmsweb.spec may not import rmsweb.suites (layering), so it keeps the list as data;
this test keeps the two equal.
"""

from __future__ import annotations

from rmsweb.spec.miniwob_tasks import MINIWOB_EXPERT_TASKS, MINIWOB_TASKS
from rmsweb.suites.miniwob_experts import EXPERTS
from rmsweb.suites.miniwob_experts.gold import GOLD_STEPS, MULTI_STEP


def test_expert_task_list_equals_the_registry() -> None:
    assert sorted(MINIWOB_EXPERT_TASKS) == sorted(EXPERTS)
    assert len(set(MINIWOB_EXPERT_TASKS)) == len(MINIWOB_EXPERT_TASKS)
    assert set(MINIWOB_EXPERT_TASKS) <= set(MINIWOB_TASKS)


def test_gold_table_covers_every_expert() -> None:
    # GOLD_STEPS: mean expert steps on the 50 default test seeds (the slow tier of
    # test_miniwob_experts.py measures them again)
    assert set(GOLD_STEPS) == set(EXPERTS)
    assert len(EXPERTS) >= 40
    # multi-step tasks: a mean gold length of 3 steps or more
    assert {t for t, n in GOLD_STEPS.items() if n >= 3} == set(MULTI_STEP)
    assert len(MULTI_STEP) >= 10
