"""`rmsweb sweep show` and `rmsweb sweep pick` (cli.py): read a sweep's results file,
write a chosen point into its spec."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmsweb.compile import discover, load_specs
from rmsweb.compile.dvcfile import SWEEP_DIR
from rmsweb.errors import UserError
from rmsweb.spec import ExperimentSpec, SpecErrors
from rmsweb.spec.loader import display_path
from rmsweb.spec.pick import PickError, pick_comment, write_pick
from rmsweb.spec.points import SweepPoint, sweep_points
from rmsweb.sweep.results import table


def find_sweep(root: Path, name: str) -> tuple[ExperimentSpec, Path]:
    """The spec that declares sweep `name`, and its file."""
    specs, sources, errors = load_specs(discover([root / "experiments"]))
    if errors:
        raise SpecErrors(errors)
    owners = [s for s in specs if name in s.sweep]
    if not owners:
        known = sorted(n for s in specs for n in s.sweep)
        raise UserError(
            f"no sweep {name!r} in {display_path(root / 'experiments')} (sweeps: "
            f"{', '.join(known) or 'none'})."
        )
    return owners[0], sources[owners[0].name]


def results_path(root: Path, name: str) -> Path:
    return root / SWEEP_DIR / f"{name}.json"


def _read_results(root: Path, name: str, spec: ExperimentSpec) -> dict[str, Any]:
    path = results_path(root, name)
    if not path.is_file():
        raise UserError(
            f"sweep {name} has no results yet ({display_path(path)} is missing). Run it: "
            f"`rmsweb repro sweep-{name}_{spec.name}`."
        )
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UserError(f"{display_path(path)} is not JSON ({exc}); rerun the sweep.") from None


def show(name: str, root: Path, as_json: bool, echo: Callable[[str], None]) -> None:
    spec, _ = find_sweep(root, name)
    results = _read_results(root, name, spec)
    echo(json.dumps(results, indent=2) if as_json else table(results))


def _find_point(points: list[SweepPoint], wanted: str, name: str) -> SweepPoint:
    for p in points:
        if wanted in (p.name, p.label):
            return p
    raise UserError(
        f"sweep {name} has no point {wanted!r}; its points: {', '.join(p.name for p in points)}."
    )


def pick(name: str, wanted: str, root: Path, echo: Callable[[str], None]) -> None:
    spec, source = find_sweep(root, name)
    results = _read_results(root, name, spec)
    point = _find_point(sweep_points(spec, name), wanted, name)
    row = next((r for r in results["points"] if r["point"] == point.name), None)
    if row is None or row.get("overrides") != json.loads(json.dumps(point.overrides)):
        raise UserError(
            f"{display_path(results_path(root, name))} was written for another version of "
            f"sweep {name} (point {point.name} is missing or its values differ). Rerun the "
            "sweep before picking from it."
        )
    if row.get("value") is None:
        raise UserError(
            f"point {point.name} has no value in the results (missing: "
            f"{', '.join(row.get('missing', [])) or 'all'}); its stages did not run."
        )
    sweep = spec.sweep[name]
    chosen = {
        key: value
        for axis in point.axes
        for key, value in sweep.axis_values(axis, _index(sweep, axis, point)).items()
    }
    comment = pick_comment(name, f"{SWEEP_DIR}/{name}.json", point.name, row["value"])
    try:
        write_pick(source, chosen, comment)
    except PickError as exc:
        raise UserError(f"{display_path(source)}: {exc}") from None
    best = results.get("best")
    note = "" if best == point.name else f" (the sweep's best by the mean is {best})"
    for key, value in chosen.items():
        echo(f"{display_path(source)}: {key} = {value!r}{note}")
    echo("Now run `rmsweb compile` (and commit the spec with the results file).")


def _index(sweep: Any, axis: str, point: SweepPoint) -> int:
    n = sweep.shape[list(sweep.axes).index(axis)]
    return next(i for i in range(n) if sweep.axis_label(axis, i) == point.axes[axis])


def capacity(name: str, root: Path, expert_file: Path | None, echo: Callable[[str], None]) -> None:
    """`rmsweb sweep capacity`: the capacity measure of a budget sweep (report/capacity.py)."""
    from rmsweb.report.capacity import capacity as measure
    from rmsweb.report.capacity import table as capacity_table

    spec, _ = find_sweep(root, name)
    results = _read_results(root, name, spec)
    expert = None
    if expert_file is not None:
        try:
            data = json.loads(expert_file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise UserError(
                f"{display_path(expert_file)}: cannot read it as JSON ({exc})."
            ) from None
        per_task = data.get("per_task")
        if not isinstance(per_task, dict) or data.get("split") != results["split"]:
            raise UserError(
                f"{display_path(expert_file)} is not an eval metrics file with per_task "
                f"success on {results['split']} (split: {data.get('split')!r}). Give the "
                "expert policy's eval on the sweep's split."
            )
        expert = {str(t): float(v) for t, v in per_task.items()}
    try:
        result = measure(results, expert)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    out = results_path(root, name).with_suffix(".capacity.json")
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    tmp.replace(out)
    echo(capacity_table(result))
    echo(f"written: {display_path(out)}")
