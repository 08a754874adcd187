"""A spec's `sweep:` section: grids of dotted overrides, run on val, ranked by one metric.

    sweep:
      rl-lr:                              # the sweep's name (unique in the project)
        split: val                        # what it reads: never test
        metric: eval.rl.success           # <stage>[.<policy>].<key> of the points' metrics
        base: {seeds: [0]}                # overrides every point shares
        axes:                             # the grid: the product of the axes
          lr: {rl.learning_rate: [1.0e-5, 3.0e-5, 1.0e-4]}
          len: {rl.steps: [50, 150], rl.beta: [0.0, 0.04]}   # two keys: one zipped axis

Each point is an experiment of its own (`<sweep>-<label>`, e.g. `rl-lr-lr3e-05-len150`)
compiled beside the spec: it shares every stage whose config it does not change, and
only the stages its metric needs are planned (rmsweb/compile/graph.py). This module
holds the section's model and the checks that need no other spec; the points
themselves are built in points.py.
"""

from __future__ import annotations

import itertools
import math
import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from .common import NAME_PATTERN, Name, SpecFieldError, SpecModel

# A bound on the grid: each point is a set of DVC stages (a training run or a
# collection each), so a typo such as a 10-value axis crossed with two more is
# refused rather than compiled into thousands of stages.
MAX_POINTS = 64
# The key of an axis that names its points instead of the values (optional).
LABELS = "labels"
# Keys a sweep may not move: the point's identity, the sweep itself, and the splits a
# point reads (a sweep reads its own `split`, set on the metric's policy).
FORBIDDEN_PREFIXES = ("name", "description", "sweep", "report", "eval.splits", "eval.policies")
TRAINING_STAGES = ("collect", "sft", "mine", "rl")
_METRIC = re.compile(
    r"^(?:(?P<stage>collect|sft|mine|rl)|eval\.(?P<policy>[a-z0-9][a-z0-9-]*))"
    r"\.(?P<key>[A-Za-z0-9_]+)$"
)


class Metric:
    """`metric:` parsed: the stage whose metrics file holds it, the eval policy, the key."""

    def __init__(self, text: str) -> None:
        m = _METRIC.match(text)
        if m is None:
            raise ValueError(text)
        self.text = text
        self.stage = m.group("stage") or "eval"
        self.policy: str | None = m.group("policy")
        self.key = m.group("key")


def check_axes(
    axes: dict[str, dict[str, list[Any]]], forbidden: tuple[str, ...], what: str
) -> None:
    """Axes are well formed: dotted keys it may move, equal lengths within an axis, labels,
    and at most MAX_POINTS cells. `what`: sweep or grid, for the messages."""
    if not axes:
        raise SpecFieldError("axes", f"no axes: a {what} needs at least one axis of values.")
    for axis, keys in axes.items():
        values = {k: v for k, v in keys.items() if k != LABELS}
        if not values:
            raise SpecFieldError(
                f"axes.{axis}",
                "the axis has no keys. Fix: map a dotted spec key to its values, e.g. "
                "{rl.learning_rate: [1.0e-5, 3.0e-5]}.",
            )
        lengths = {k: len(v) for k, v in values.items()}
        for key, n in lengths.items():
            _check_key(f"axes.{axis}.{key}", key, forbidden, what)
            if n == 0:
                raise SpecFieldError(
                    f"axes.{axis}.{key}", "empty list of values: give at least one value."
                )
        if len(set(lengths.values())) > 1:
            first = next(iter(values))
            raise SpecFieldError(
                f"axes.{axis}",
                f"the keys of one axis move together, so their lists need equal lengths "
                f"(got {lengths}). Fix: equal lengths, or put {first} on an axis of its own "
                "to cross it with the others.",
            )
        if LABELS in keys:
            labels = keys[LABELS]
            n = next(iter(lengths.values()))
            bad = [x for x in labels if not (isinstance(x, str) and _is_label(x))]
            if len(labels) != n or bad or len(set(labels)) != len(labels):
                raise SpecFieldError(
                    f"axes.{axis}.{LABELS}",
                    f"labels name the axis's {n} values in point names: {n} distinct "
                    "texts of lowercase letters, digits and dashes.",
                )
    shape = AxesGrid.shape_of(axes)
    if math.prod(shape) > MAX_POINTS:
        raise SpecFieldError(
            "axes",
            f"the grid has {math.prod(shape)} points ({' x '.join(str(n) for n in shape)}); "
            f"the limit is {MAX_POINTS}, each point being its own stages. Fix: fewer "
            "values, or zip axes that move together into one axis.",
        )


class AxesGrid:
    """The cells of named axes (`self.axes`), shared by sweeps and a spec's grid."""

    axes: dict[str, dict[str, list[Any]]]

    @staticmethod
    def shape_of(axes: dict[str, dict[str, list[Any]]]) -> list[int]:
        return [len(next(v for k, v in keys.items() if k != LABELS)) for keys in axes.values()]

    @property
    def shape(self) -> list[int]:
        return self.shape_of(self.axes)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def grid(self) -> list[list[tuple[str, int]]]:
        """Each point as [(axis, index of its value)], the first axis slowest."""
        ranges = [
            [(axis, i) for i in range(n)] for axis, n in zip(self.axes, self.shape, strict=True)
        ]
        return [list(p) for p in itertools.product(*ranges)]

    def axis_values(self, axis: str, index: int) -> dict[str, Any]:
        """Dotted key -> value of one axis at `index`."""
        return {k: v[index] for k, v in self.axes[axis].items() if k != LABELS}

    def axis_label(self, axis: str, index: int) -> str:
        """How one axis value reads in a point name: its label, else the value(s)."""
        keys = self.axes[axis]
        if LABELS in keys:
            return str(keys[LABELS][index])
        parts = [value_label(v) for v in self.axis_values(axis, index).values()]
        if any(p is None for p in parts):
            return str(index)  # a list or mapping value: its position
        label = "-".join(p for p in parts if p is not None)
        # Two values that read the same (e.g. "a b" and "a-b"): fall back to positions.
        n = next(len(v) for k, v in keys.items() if k != LABELS)
        seen = {
            "-".join(str(value_label(v)) for v in self.axis_values(axis, j).values())
            for j in range(n)
        }
        return label if len(seen) == n else str(index)


class SweepSpec(SpecModel, AxesGrid):
    """One grid over a spec (module doc)."""

    split: Literal["train", "val", "test"] = Field(
        "val",
        description="The split the metric reads: val for an eval metric, train for a "
        "collection or training metric. test is refused: a sweep chooses settings.",
    )
    metric: str = Field(
        ...,
        description="What the points are ranked by: `eval.<policy>.<key>` (e.g. "
        "eval.rl.success, on `split`) or `<collect|sft|mine|rl>.<key>` (e.g. "
        "collect.yield), read from that stage's metrics file of each point and seed.",
    )
    goal: Literal["max", "min"] = Field("max", description="Whether higher or lower is better.")
    against: Name | None = Field(
        None,
        description="An eval policy of the spec (e.g. sft) that each point's metric policy "
        "is paired with, on the sweep's split: the table adds the paired difference "
        "(metric policy - this one) over the (task, episode seed) units both ran, with a "
        "unit-bootstrap interval, and a seed interval with two or more seeds. For an "
        "`eval.<policy>.success` metric only.",
    )
    base: dict[str, Any] = Field(
        default_factory=dict,
        description="Dotted overrides every point shares (e.g. seeds: [0]), applied before "
        "the axes.",
    )
    axes: dict[Name, dict[str, list[Any]]] = Field(
        ...,
        description="Named axes: each maps dotted keys to value lists. The grid is the "
        "product of the axes; the keys of one axis move together (zipped, equal lengths). "
        "An optional `labels:` list names the axis's values in point names.",
    )
    jobs: Literal["together", "separate"] = Field(
        "together",
        description="SkyPilot: `together` runs the sweep's points inside the spec's own task; "
        "`separate` also writes one task file per point (sky/<point>.yaml), each a managed "
        "job named by the point's run key.",
    )

    @field_validator("split")
    @classmethod
    def _never_test(cls, split: str) -> str:
        if split == "test":
            raise ValueError(
                "a sweep chooses settings, so it must not read the test split (that is read "
                "once per reported number). Fix: split: val (train for a collection metric)."
            )
        return split

    @field_validator("metric")
    @classmethod
    def _metric_form(cls, metric: str) -> str:
        try:
            Metric(metric)
        except ValueError:
            raise ValueError(
                f"metric {metric!r} is not `eval.<policy>.<key>` or `<stage>.<key>` with stage "
                f"one of {', '.join(TRAINING_STAGES)}. E.g. eval.rl.success, collect.yield."
            ) from None
        return metric

    @model_validator(mode="after")
    def _split_fits_metric(self) -> SweepSpec:
        metric = Metric(self.metric)
        want = "val" if metric.stage == "eval" else "train"
        if self.split != want:
            raise SpecFieldError(
                "split",
                f"metric {self.metric} reads the {want} split ("
                + ("a held-out eval" if want == "val" else "what the stage trains or collects on")
                + f"), not {self.split}. Fix: split: {want}.",
            )
        return self

    @model_validator(mode="after")
    def _against_pairs_episodes(self) -> SweepSpec:
        if self.against is None:
            return self
        metric = Metric(self.metric)
        if metric.stage != "eval" or metric.key != "success":
            raise SpecFieldError(
                "against",
                f"against pairs eval episodes, but metric {self.metric} is not "
                "`eval.<policy>.success`. Fix: remove against, or rank by eval.<policy>.success.",
            )
        if self.against == metric.policy:
            raise SpecFieldError(
                "against",
                f"against names the metric's own policy ({self.against}): a point would be "
                "paired with itself. Fix: name the baseline policy, e.g. against: sft.",
            )
        return self

    @model_validator(mode="after")
    def _axes_well_formed(self) -> SweepSpec:
        for key in self.base:
            _check_key(f"base.{key}", key, FORBIDDEN_PREFIXES, "sweep")
        check_axes(self.axes, FORBIDDEN_PREFIXES, "sweep")
        return self


def _is_label(text: str) -> bool:
    return re.fullmatch(r"[a-z0-9][a-z0-9-]*", text) is not None


def _check_key(where: str, key: str, forbidden: tuple[str, ...], what: str) -> None:
    if not key or any(not part for part in key.split(".")):
        raise SpecFieldError(where, f"{key!r} is not a dotted key such as rl.learning_rate.")
    for prefix in forbidden:
        if key == prefix or key.startswith(prefix + "."):
            raise SpecFieldError(
                where,
                f"a {what} cannot set {key}: "
                + (
                    "each point reads only the sweep's `split`, on the metric's policy."
                    if what == "sweep" and prefix.startswith("eval.")
                    else "it is the point's own (name, report) or a sweep or grid itself."
                ),
            )


def value_label(value: Any) -> str | None:
    """A value as it reads in a point name (letters, digits, dashes), None for a list or
    mapping (named by its position instead)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        text = repr(value).replace("+", "").replace(".", "p")
        return text if re.fullmatch(r"-?[a-z0-9-]+", text) else None
    if isinstance(value, str):
        text = re.sub(r"[^a-z0-9]+", "-", value.lower()).strip("-")
        return text or None
    if value is None:
        return "null"
    return None


__all__ = [
    "LABELS",
    "MAX_POINTS",
    "NAME_PATTERN",
    "AxesGrid",
    "Metric",
    "SweepSpec",
    "check_axes",
    "value_label",
]
