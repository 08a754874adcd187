"""The variants of a spec's grid: one resolved experiment per cell (grid.py).

A variant is the spec with the cell's values applied as dotted overrides (the same merge
as `-o key=value`), named `<spec>-<label>`, with no grid, sweeps or report of its own and
every eval policy as the spec has it. The cell equal to the spec's own values is the
spec itself (`own`), so the default of a study is not run twice. `check_grid` builds
them all when a spec is loaded, so a bad key or value fails `rmsweb validate` at the
grid's line.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from .experiment import ExperimentSpec
from .loader import Located, Pos, SpecError, SpecErrors, _position, merge_located, validate_located
from .naming import MAX_NAME, _nested, point_name, shown_value
from .report import ReportSpec

_MISSING = object()


@dataclass(frozen=True)
class Variant:
    parent: str  # the spec whose grid it is a cell of
    name: str  # <parent>-<label>, or the parent's own name for its own cell
    label: str  # the cell's label, e.g. b25
    cell: dict[str, str]  # axis -> the label of its value
    overrides: dict[str, Any]  # dotted key -> value
    spec: ExperimentSpec
    own: bool  # the spec's own values: this variant is the spec
    shown: dict[str, str] = field(default_factory=dict)  # axis -> its value(s) as text


def _get(data: Any, dotted: str) -> Any:
    node = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def variant_data(spec_data: dict[str, Any], name: str, overrides: dict[str, Any]) -> dict:
    data = copy.deepcopy(spec_data)
    data.pop("sweep", None)
    data["grid"] = None
    parent = data["name"]
    data["name"] = name
    data["description"] = f"{parent} at {overrides} (a cell of its grid)"[:400]
    data["report"] = ReportSpec().model_dump(mode="json")
    located = Located(data, {}, name)
    for key, value in overrides.items():
        located = merge_located(located, Located(_nested(key, value), {}, name))
    return located.data


def grid_variants(spec: ExperimentSpec) -> list[Variant]:
    """Every cell of the spec's grid, in grid order (none without a grid). Raises
    SpecErrors keyed `grid.axes.<axis>.<key>`, positioned at line 1 of the variant:
    `check_grid` moves them to the spec's lines."""
    if spec.grid is None:
        return []
    grid = spec.grid
    data = spec.model_dump(mode="json")
    out: list[Variant] = []
    errors: list[SpecError] = []
    for cell in grid.grid():
        labels = {axis: grid.axis_label(axis, i) for axis, i in cell}
        overrides: dict[str, Any] = {}
        where: dict[str, str] = {}
        for axis, i in cell:
            for key, value in grid.axis_values(axis, i).items():
                overrides[key] = value
                where[key] = f"grid.axes.{axis}.{key}"
        own = all(_get(data, k) == v for k, v in overrides.items())
        name = spec.name if own else point_name(spec.name, labels)
        label = point_name("", labels).lstrip("-")
        shown = {axis: shown_value(grid.axis_values(axis, i)) for axis, i in cell}
        if own:
            out.append(Variant(spec.name, name, label, labels, overrides, spec, True, shown))
            continue
        if len(name) > MAX_NAME:
            errors.append(
                SpecError(
                    Pos(name, 1, 1),
                    "grid",
                    f"variant name {name!r} is longer than {MAX_NAME} characters. Fix: a "
                    "shorter spec name, or `labels:` on the axes.",
                )
            )
            continue
        try:
            variant = validate_located(Located(variant_data(data, name, overrides), {}, name))
        except SpecErrors as exc:
            for e in exc.errors:
                owner = next(
                    (w for k, w in where.items() if e.key == k or e.key.startswith(k + ".")),
                    "grid",
                )
                errors.append(SpecError(e.pos, owner, f"{e.key}: {e.message} (variant {name})"))
            continue
        out.append(Variant(spec.name, name, label, labels, overrides, variant, False, shown))
    if errors:
        raise SpecErrors(errors)
    return out


def other_variants(spec: ExperimentSpec) -> list[Variant]:
    """The variants that are experiments of their own (every cell but the spec's)."""
    return [v for v in grid_variants(spec) if not v.own]


def check_grid(spec: ExperimentSpec, located: Located) -> list[Variant]:
    """Every variant, validated; errors at the spec's own lines."""
    try:
        return grid_variants(spec)
    except SpecErrors as exc:
        errors = []
        for e in exc.errors:
            parts = e.key.split(".")
            path = tuple([*parts[:3], ".".join(parts[3:])] if len(parts) > 3 else parts)
            errors.append(SpecError(_position(path, located), e.key, e.message))
        raise SpecErrors(errors) from None


__all__ = ["Variant", "check_grid", "grid_variants", "other_variants"]
