"""The spec package's list of MiniWoB tasks with an expert matches the experts' registry.

rmsweb.spec may not import rmsweb.suites (layering), so it keeps the list as data;
this test keeps the two equal.
"""

from __future__ import annotations

from rmsweb.spec.miniwob_tasks import MINIWOB_EXPERT_TASKS, MINIWOB_TASKS
from rmsweb.suites.miniwob_experts import EXPERTS


def test_expert_task_list_equals_the_registry() -> None:
    assert sorted(MINIWOB_EXPERT_TASKS) == sorted(EXPERTS)
    assert len(set(MINIWOB_EXPERT_TASKS)) == len(MINIWOB_EXPERT_TASKS)
    assert set(MINIWOB_EXPERT_TASKS) <= set(MINIWOB_TASKS)
