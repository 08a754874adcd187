"""The points of a spec's sweeps: one resolved experiment per grid point.

A point is the spec with the sweep's `base` and the point's axis values applied as
dotted overrides (the same merge as `-o key=value`: a `kind` change replaces the
section), its own name `<sweep>-<label>`, no sweeps and no report of its own, and the
metric's eval policy evaluated on the sweep's split only. `check_sweeps` builds them
all when a spec is loaded, so a bad axis key or value fails `rmsweb validate` at the
axis's line rather than at compile or run time.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .common import NAME_PATTERN
from .experiment import ExperimentSpec
from .loader import (
    Located,
    Pos,
    SpecError,
    SpecErrors,
    _position,
    apply_overrides,
    load_located,
    merge_located,
    validate_located,
)
from .naming import MAX_NAME, _nested, point_name, shown_value
from .report import ReportSpec
from .sweep import Metric, SweepSpec
from .variants import check_grid


@dataclass(frozen=True)
class SweepPoint:
    sweep: str  # the sweep's name
    name: str  # the point's experiment name: <sweep>-<label>
    label: str
    axes: dict[str, str]  # axis -> the label of its value here (in the point's name)
    overrides: dict[str, Any]  # dotted key -> value (base first, then the axes)
    spec: ExperimentSpec
    shown: dict[str, str] = field(default_factory=dict)  # axis -> its value(s) as text


def point_data(
    spec_data: dict[str, Any], name: str, sweep: SweepSpec, overrides: dict[str, Any]
) -> dict[str, Any]:
    """The point's spec as plain data (before validation)."""
    data = copy.deepcopy(spec_data)
    data.pop("sweep", None)
    data["name"] = name
    data["description"] = f"A point of sweep {name.split('-')[0]}: {overrides}"[:400]
    data["report"] = ReportSpec().model_dump(mode="json")
    located = Located(data, {}, name)
    for key, value in overrides.items():
        located = merge_located(located, Located(_nested(key, value), {}, name))
    data = located.data
    metric = Metric(sweep.metric)
    if metric.policy is not None:
        # Only the metric's policy (and the one it is paired with) on the sweep's split:
        # never test (other policies are left as they are; compile plans none of their
        # stages for a point).
        read = {metric.policy, sweep.against}
        data["eval"]["policies"] = [
            {**p, "splits": [sweep.split]} if p.get("name") in read else p
            for p in data["eval"]["policies"]
        ]
    return data


# Specs are frozen, so a spec's points never change: loading, planning and rendering a
# project each asked for them, and building them (validating every point) was a third
# of a compile. Keyed by the spec's identity; the entry holds the spec, so that identity
# is not reused while it is cached.
_CACHE: OrderedDict[tuple[int, str], tuple[ExperimentSpec, list[SweepPoint]]] = OrderedDict()
_CACHE_SIZE = 256


def sweep_points(spec: ExperimentSpec, sweep_name: str) -> list[SweepPoint]:
    """The points of one sweep, in grid order (first axis slowest). Raises SpecErrors whose
    keys are relative to the spec (`sweep.<name>.axes.<axis>.<key>`), positioned at line 1
    of the point: `check_sweeps` moves them to the spec's lines."""
    key = (id(spec), sweep_name)
    if key in _CACHE and _CACHE[key][0] is spec:
        _CACHE.move_to_end(key)
        return list(_CACHE[key][1])
    points = _build_points(spec, sweep_name)
    _CACHE[key] = (spec, points)
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return list(points)


def _build_points(spec: ExperimentSpec, sweep_name: str) -> list[SweepPoint]:
    sweep = spec.sweep[sweep_name]
    data = spec.model_dump(mode="json")
    points: list[SweepPoint] = []
    errors: list[SpecError] = []
    policies = [p.name for p in spec.eval.policies]
    if sweep.against is not None and sweep.against not in policies:
        raise SpecErrors(
            [
                SpecError(
                    Pos(spec.name, 1, 1),
                    f"sweep.{sweep_name}.against",
                    f"{sweep.against!r} is not an eval policy of {spec.name} (has: "
                    f"{', '.join(policies)}). Fix: name one of them, e.g. against: sft.",
                )
            ]
        )
    for cell in sweep.grid():
        labels = {axis: sweep.axis_label(axis, i) for axis, i in cell}
        name = point_name(sweep_name, labels)
        overrides = dict(sweep.base)
        where: dict[str, str] = {k: f"sweep.{sweep_name}.base.{k}" for k in sweep.base}
        for axis, i in cell:
            for key, value in sweep.axis_values(axis, i).items():
                overrides[key] = value
                where[key] = f"sweep.{sweep_name}.axes.{axis}.{key}"
        if any(p.name == name for p in points):
            errors.append(
                SpecError(
                    Pos(name, 1, 1),
                    f"sweep.{sweep_name}.axes",
                    f"two points are both named {name!r}. Fix: `labels:` on an axis.",
                )
            )
            continue
        if len(name) > MAX_NAME:
            errors.append(
                SpecError(
                    Pos(name, 1, 1),
                    f"sweep.{sweep_name}",
                    f"point name {name!r} is longer than {MAX_NAME} characters. Fix: shorter "
                    "sweep or axis names, or `labels:` on the axes.",
                )
            )
            continue
        try:
            point = validate_located(Located(point_data(data, name, sweep, overrides), {}, name))
        except SpecErrors as exc:
            for e in exc.errors:
                owner = next(
                    (w for k, w in where.items() if e.key == k or e.key.startswith(k + ".")),
                    f"sweep.{sweep_name}",
                )
                value = next((overrides[k] for k in where if where[k] == owner), None)
                at = f" (point {name}: {owner.rsplit('.', 1)[-1]}={value!r})" if value else ""
                errors.append(SpecError(e.pos, owner, f"{e.key}: {e.message}{at}"))
            continue
        # A section's worth of settings (a mapping or list) reads as its label in a table.
        shown = {
            axis: labels[axis]
            if any(isinstance(v, (dict, list)) for v in sweep.axis_values(axis, i).values())
            else shown_value(sweep.axis_values(axis, i))
            for axis, i in cell
        }
        points.append(
            SweepPoint(
                sweep_name, name, name[len(sweep_name) + 1 :], labels, overrides, point, shown
            )
        )
    if errors:
        raise SpecErrors(_unique(errors))
    return points


def all_points(spec: ExperimentSpec) -> list[SweepPoint]:
    return [p for name in spec.sweep for p in sweep_points(spec, name)]


def _unique(errors: list[SpecError]) -> list[SpecError]:
    out: list[SpecError] = []
    for e in errors:
        if all(
            (e.key, e.message.split(" (point ")[0]) != (o.key, o.message.split(" (point ")[0])
            for o in out
        ):
            out.append(e)
    return out


def check_sweeps(spec: ExperimentSpec, located: Located) -> list[SweepPoint]:
    """Every point of every sweep, validated; errors at the spec's own lines."""
    points: list[SweepPoint] = []
    errors: list[SpecError] = []
    for name in spec.sweep:
        try:
            points += sweep_points(spec, name)
        except SpecErrors as exc:
            for e in exc.errors:
                path = tuple(_split_key(e.key))
                pos = _position(path, located)
                errors.append(SpecError(pos, e.key, e.message))
    if errors:
        raise SpecErrors(errors)
    return points


def load_experiment(path: str | Path, overrides: Sequence[str] = ()) -> ExperimentSpec:
    """Load, merge and validate one spec file, every point of its sweeps and every cell
    of its grid; raises
    SpecErrors with every problem, each at its line (what `rmsweb validate` runs)."""
    located = apply_overrides(load_located(Path(path)), overrides)
    spec = validate_located(located)
    if spec.sweep:
        check_sweeps(spec, located)  # a bad axis fails here, at its line
    if spec.grid is not None:
        check_grid(spec, located)
    return spec


def _split_key(key: str) -> list[str]:
    """sweep.<name>.axes.<axis>.<dotted key> -> its YAML path (the dotted key is one
    YAML key)."""
    parts = key.split(".")
    if len(parts) > 4 and parts[2] == "axes":
        return [*parts[:4], ".".join(parts[4:])]
    if len(parts) > 3 and parts[2] == "base":
        return [*parts[:3], ".".join(parts[3:])]
    return parts


__all__ = [
    "NAME_PATTERN",
    "SweepPoint",
    "all_points",
    "check_sweeps",
    "load_experiment",
    "point_data",
    "sweep_points",
]
