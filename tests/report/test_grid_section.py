"""A study's grid in its report: arms and comparisons expanded per cell, the comparison
table and figure against the axis, and the baseline's capacity."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rmsweb.report.arms import Episode
from rmsweb.report.arms_section import arms_section
from rmsweb.report.document import Figure, Table
from rmsweb.report.grid_section import Cell, expand, grid_section

CELLS = [Cell("b25", "budget 25", False), Cell("b100", "budget 100", True)]
ARMS = [
    ("SFT", "bud/sft"),
    ("Full", "bud/rl"),
    ("Canary", "bud-canary/rl"),
    ("Expert", "bud/expert"),
]
COMPARISONS = [("Full", "SFT"), ("Canary", "SFT")]


def test_gridded_arms_and_comparisons_are_expanded_per_cell() -> None:
    arms, comparisons, plan = expand(CELLS, {"bud"}, ARMS, COMPARISONS)
    assert ("SFT [budget 25]", "bud-b25/sft") in arms
    assert ("Full [budget 100]", "bud/rl") in arms  # the own cell is the spec itself
    assert ("Canary", "bud-canary/rl") in arms  # no grid: as it is
    assert comparisons == [
        ("Full [budget 25]", "SFT [budget 25]"),
        ("Full [budget 100]", "SFT [budget 100]"),
        ("Canary", "SFT [budget 100]"),  # a control without cells: at the own cell only
    ]
    assert plan.comparisons == {
        ("Full", "SFT"): {"b25": ("bud-b25/rl", "bud-b25/sft"), "b100": ("bud/rl", "bud/sft")}
    }
    assert plan.baseline == {"b25": "bud-b25/sft", "b100": "bud/sft"}
    assert plan.expert == "bud/expert"


def _episodes() -> list[Episode]:
    """Two tasks x 10 test seeds x 2 training seeds. At 25 demonstrations SFT solves 2/10
    of `fill` and 5/10 of `click`; at 100, 9/10 and 6/10 (fill is data-limited, click
    is not). RL adds 2 units of fill at 25 and nothing at 100. The expert solves all."""
    out = []

    def add(arm: str, task: str, solved: int, seeds: tuple = (0, 1)) -> None:
        for s in seeds:
            out.extend(Episode(arm, s, task, u, u < solved, 3) for u in range(10))

    add("bud-b25/sft", "fill", 2)
    add("bud-b25/sft", "click", 5)
    add("bud-b25/rl", "fill", 4)
    add("bud-b25/rl", "click", 5)
    add("bud/sft", "fill", 9)
    add("bud/sft", "click", 6)
    add("bud/rl", "fill", 9)
    add("bud/rl", "click", 6)
    add("bud/expert", "fill", 10, (None,))
    add("bud/expert", "click", 10, (None,))
    return out


def test_capacity_runs_from_the_own_cell_to_the_last() -> None:
    from rmsweb.report.grid_section import GridPlan, capacity_rows

    cells = [Cell("b25", "25", False), Cell("b50", "50", True), Cell("b200", "200", False)]
    base = {"b25": "x-b25/sft", "b50": "x/sft", "b200": "x-b200/sft"}
    episodes = [
        Episode(arm, 0, "t", u, u < solved, 1)
        for arm, solved in (("x-b25/sft", 1), ("x/sft", 2), ("x-b200/sft", 6))
        for u in range(10)
    ]
    low, high, rows, ci = capacity_rows(GridPlan(cells, baseline=base), episodes)
    assert (low, high) == ("b50", "b200")
    assert rows["t"]["sft_low"] == pytest.approx(0.2) and rows["t"]["share"] == pytest.approx(0.5)
    # 10 episodes a budget: the share of 0.5 is known only roughly
    share_low, share_high = rows["t"]["share_ci"]
    assert share_low < 0.5 < share_high and ci["episodes_per_task"]["low"] == {"t": 10}


def test_the_section_tabulates_each_cell_and_the_capacity() -> None:
    arms, comparisons, plan = expand(CELLS, {"bud"}, ARMS[:2] + ARMS[3:], COMPARISONS[:1])
    rep = SimpleNamespace(metrics={})
    episodes = _episodes()
    arms_section(rep, episodes, arms, comparisons)
    sec = grid_section(rep, plan, episodes, "budget")
    table, _, figure, capacity = sec.blocks[:4]
    assert isinstance(table, Table) and isinstance(figure, Figure) and figure.png
    assert table.rows[0][:2] == ["budget 25", "+10.0"]  # (0.4 - 0.2) / 2 tasks
    assert table.rows[1][0] == "budget 100 (the spec's own)" and table.rows[1][1] == "+0.0"
    assert rep.metrics["grid/b25/Full-vs-SFT/success"] == pytest.approx(0.1)
    # Capacity of SFT from 25 to 100: fill closes 0.7 of 0.8, click 0.1 of 0.5.
    assert isinstance(capacity, Table)
    rows = {r[0]: r for r in capacity.rows}
    assert rows["fill"][4] == "87.5" and rows["fill"][6] == "data-limited"
    assert rows["click"][4] == "20.0" and rows["click"][6] == "capacity-limited"
    assert rows["fill"][5].startswith("[") and rows["fill"][5].endswith("]")
    assert rep.metrics["grid/capacity/data_limited_share"] == pytest.approx(0.8 / 1.3, abs=1e-4)
    low, high = (rep.metrics[f"grid/capacity/closed_share_ci_{k}"] for k in ("low", "high"))
    assert low < rep.metrics["grid/capacity/closed_share"] < high


def test_the_report_stage_finds_the_compared_specs_with_cells() -> None:
    from rmsweb.report.stage import grid_plan
    from rmsweb.spec import ExperimentSpec

    spec = ExperimentSpec.model_validate(
        {
            "name": "bud",
            "suite": {"kind": "miniwob", "tasks": ["click-button"], "train": {"count": 100}},
            "sft": {"demos_per_task": 100},
            "grid": {
                "axes": {"budget": {"sft.demos_per_task": [25, 100], "labels": ["b25", "b100"]}}
            },
            "report": {"compare": ["bud-ctl", "bud-canary"]},
        }
    )
    roles = ["eval-rl-s0", "bud-b25.eval-rl-s0", "bud-ctl.eval-rl-s0", "bud-ctl-b25.eval-rl-s0"]
    roles.append("bud-canary.eval-rl-s0")
    arms = [("Full", "bud/rl"), ("Ctl", "bud-ctl/rl"), ("Canary", "bud-canary/rl")]
    out_arms, _, plan, axis = grid_plan(spec, roles, arms, [("Full", "Ctl")])
    assert axis == "budget"
    assert [c.shown for c in plan.cells] == ["budget 25", "budget 100"]
    assert ("Ctl [budget 25]", "bud-ctl-b25/rl") in out_arms
    assert ("Canary", "bud-canary/rl") in out_arms  # its cells are not among the inputs
    assert plan.comparisons[("Full", "Ctl")]["b25"] == ("bud-b25/rl", "bud-ctl-b25/rl")
