"""The mining section sets the mined policy beside the evaluated one: per task, the
mining rollouts' failure rate and the greedy SFT policy's on val (same training seed)."""

from __future__ import annotations

from rmsweb.report.mining import mine_section, task_gaps


class _Rep:
    def __init__(self) -> None:
        self.metrics: dict = {}
        self.plot_data: dict = {}


ROWS = [
    {"run": "mine/demo/s0", "task_id": "click-button", "episodes": 40, "failures": 2},
    {"run": "mine/demo/s0", "task_id": "login-user", "episodes": 40, "failures": 40},
    {"run": "mine/demo/s1", "task_id": "click-button", "episodes": 40, "failures": 10},
    {"run": "eval/demo/sft/s0", "task_id": "click-button", "episodes": 25, "failures": 20},
    {"run": "eval/demo/sft/s0", "task_id": "login-user", "episodes": 25, "failures": 5},
]


def test_each_mine_run_meets_the_val_eval_of_its_own_seed() -> None:
    gaps = {(g["run"], g["task_id"]): g for g in task_gaps(ROWS)}
    assert gaps["mine/demo/s0", "click-button"]["mine_failure"] == 0.05
    assert gaps["mine/demo/s0", "click-button"]["val_failure"] == 0.8
    assert gaps["mine/demo/s0", "login-user"]["val_failure"] == 0.2
    # seed 1 has no val eval of its SFT checkpoint: no number is borrowed from seed 0
    assert gaps["mine/demo/s1", "click-button"]["val_failure"] is None
    assert len(gaps) == 3  # eval rows are not mine runs


def test_the_section_shows_the_gap_and_records_both_rates() -> None:
    states = [
        {
            "run": "mine/demo/s0",
            "source": "critical",
            "failure_mode": "wrong_element",
            "states": 3,
            "weight": 3.0,
            "tasks": 1,
        },
    ]
    rep = _Rep()
    sec = mine_section(rep, {"states": states, "rollouts": [], "per_task": ROWS[:2] + ROWS[3:]})
    md = "\n".join(b.to_markdown() for b in sec.blocks if hasattr(b, "to_markdown"))
    assert "Failing (greedy, val)" in md
    assert "-75.0" in md  # click-button: 5% failing in mining, 80% greedy on val
    assert rep.metrics["mine/task/click-button/mine_failure"] == 0.05
    assert rep.metrics["mine/task/click-button/val_failure"] == 0.8
