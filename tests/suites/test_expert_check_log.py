"""The committed expert check (benchmarks/results/suite_check_test_50.txt) matches the
experts: the same task set, and every gold length within its tolerance of the logged
mean. Change an expert or a gold length and this fails until the check is rerun and its
output committed:

    (date -u; echo '$ time rmsweb suite check miniwob'; time rmsweb suite check miniwob) \\
        > benchmarks/results/suite_check_test_50.txt 2>&1

(50 default test seeds per task, about 10 minutes on 2 cores.) Reading a file is quick,
but it belongs with the slow tier's 50-seed expert run (tests/suites/test_miniwob_experts.py),
which measures the gold lengths again.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rmsweb.suites.miniwob_experts import EXPERTS
from rmsweb.suites.miniwob_experts.gold import GOLD_STEPS, GOLD_TOLERANCE, GOLD_TOLERANCE_OF

LOG = Path(__file__).parents[2] / "benchmarks" / "results" / "suite_check_test_50.txt"
ROW = re.compile(r"│ (\S+)\s*│\s*(\d+) │\s*(\d+)% │\s*([\d.]+) │\s*(\d+) │\s*(\d+) │")

pytestmark = pytest.mark.slow


def logged() -> dict[str, tuple[int, int, float]]:
    """task -> (episodes, success %, mean steps) as the committed log prints them."""
    rows = {}
    for line in LOG.read_text(encoding="utf-8").splitlines():
        if m := ROW.fullmatch(line.strip()):
            rows[m.group(1)] = (int(m.group(2)), int(m.group(3)), float(m.group(4)))
    return rows


def test_the_log_says_how_and_when_it_was_made() -> None:
    head = LOG.read_text(encoding="utf-8").splitlines()[:2]
    assert re.match(r"# \d{4}-\d\d-\d\d \d\d:\d\d UTC, commit [0-9a-f]{7,}", head[0]), head
    assert head[1] == "$ time rmsweb suite check miniwob", head
    assert "miniwob experts, test split, 50 seeds per task" in LOG.read_text(encoding="utf-8")


def test_the_logged_task_set_is_the_expert_set() -> None:
    tasks = set(logged())
    assert tasks == set(EXPERTS), (
        f"experts not in the log: {sorted(set(EXPERTS) - tasks)}; "
        f"logged tasks without an expert: {sorted(tasks - set(EXPERTS))}"
    )


def test_every_gold_length_agrees_with_the_log() -> None:
    rows = logged()
    off = {}
    for task, (episodes, success, steps) in sorted(rows.items()):
        assert episodes == 50 and success >= 95, (task, episodes, success)
        # the log prints one decimal: 0.05 of rounding on top of the rerun tolerance
        tolerance = GOLD_TOLERANCE_OF.get(task, GOLD_TOLERANCE) + 0.05
        if task in GOLD_STEPS and abs(GOLD_STEPS[task] - steps) > tolerance:
            off[task] = (GOLD_STEPS[task], steps)
    assert not off, f"gold length vs the committed log's mean (beyond tolerance): {off}"
