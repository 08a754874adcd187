"""A spec's `grid:` section: the study run again at other values of a few settings.

    grid:                                   # e.g. the demonstration budget study
      axes:
        budget: {sft.demos_per_task: [25, 75, 200], labels: [b25, b75, b200]}

Unlike a sweep (which chooses a setting on val), a grid is part of what a study
reports: each cell is a variant of the spec, `<spec>-<label>` (e.g.
`miniwob-cpu-budget-b25`), with every eval policy on the spec's own splits, compiled
beside it and sharing every stage whose config it does not change (one collection for
every budget: `sft.demos_per_task` is SFT's). A cell equal to the spec's own values is
the spec itself. `extends:` inherits the grid, so each arm of a study (a spec that
changes one thing) is run on the same cells; `grid: null` opts an arm out (a control
run at the default only). A report whose spec has a grid shows each arm and each
comparison per cell, and a table and figure of the comparisons against the axis
(rmsweb/report/grid_section.py). Variants are built in variants.py.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from .common import Name, SpecModel
from .sweep import AxesGrid, check_axes

# Keys a grid may not move: the variant's identity, the sections that make it a variant
# (a grid, a sweep, a report of its own) and its evals (each cell is measured as the
# spec is, on the same splits).
FORBIDDEN_PREFIXES = ("name", "description", "extends", "sweep", "grid", "report", "eval")


class GridSpec(SpecModel, AxesGrid):
    """Named axes of dotted overrides; the variants are their product (module doc)."""

    axes: dict[Name, dict[str, list[Any]]] = Field(
        ...,
        description="Named axes: each maps dotted keys to value lists (the keys of one axis "
        "move together). The variants are the product of the axes; an optional `labels:` "
        "list names an axis's values in variant names (<spec>-<label>).",
    )

    @model_validator(mode="after")
    def _axes_well_formed(self) -> GridSpec:
        check_axes(self.axes, FORBIDDEN_PREFIXES, "grid")
        return self


__all__ = ["FORBIDDEN_PREFIXES", "GridSpec"]
