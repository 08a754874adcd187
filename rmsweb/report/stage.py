"""The `report` pipeline stage: one experiment's report from its upstream runs.

Writes `out/` (report.md, report.html, plots/, viewer/) under a temporary sibling
renamed at the end, so DVC never caches half a report; then, beside the metrics:
the plot data files, the flat metrics JSON (every number of the report), the
experiment's summary (metrics/summary/<name>.json, the file DVC's default views
read) and the figures as PNGs (metrics/figures/<name>/, what `dvc plots show`
renders, offline). It reads what the upstream stages wrote beside their outputs
(metrics files, the SFT loss CSV), which dvc.yaml lists as its deps.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rmsweb.report.build import PLOT_FILES, write_report
from rmsweb.report.checkpoints import CURVE_FILE, KIND
from rmsweb.report.grid_section import Cell, GridPlan, expand
from rmsweb.report.pipeline import (
    read_curves,
    read_loss_curves,
    read_rl_curves,
    read_stage_records,
)
from rmsweb.report.rl_baselines import rl_arms
from rmsweb.stage_io import StageIO, write_json_atomic
from rmsweb.store.layout import is_run_dir


def summary_path(metrics: Path) -> Path:
    """metrics/report/<name>.json -> metrics/summary/<name>.json (dvcfile.py declares it)."""
    return metrics.parents[1] / "summary" / metrics.name


def figures_dir(metrics: Path) -> Path:
    """metrics/report/<name>.json -> metrics/figures/<name>/ (dvcfile.py declares it)."""
    return metrics.parents[1] / "figures" / metrics.stem


def write_csv_atomic(path: Path, header: Sequence[str], rows: list[list[Any]]) -> None:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(buf.getvalue(), encoding="utf-8")
    tmp.replace(path)


def _replace_dir(src: Path, dest: Path) -> None:
    """Copy src's files to dest as a whole: built beside it, then swapped in."""
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp)
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)


def side_by_side_roles(spec: Any, inputs: Sequence[str]) -> list[tuple[str, str]]:
    """(SFT eval role, RL eval role) per training seed where both policies are evaluated."""
    by_source: dict[str, str] = {}
    for p in spec.eval.policies:
        if p.kind == "checkpoint":
            by_source.setdefault(p.source, p.name)
    if not {"sft", "rl"} <= by_source.keys():
        return []
    pairs = [
        (f"eval-{by_source['sft']}-s{seed}", f"eval-{by_source['rl']}-s{seed}")
        for seed in spec.seeds
    ]
    return [(a, b) for a, b in pairs if a in inputs and b in inputs]


def compared_specs(io: StageIO) -> dict[str, Any]:
    """The report.compare experiments' resolved specs (from params.yaml), by name."""
    from rmsweb.spec import load_from_params

    if io.params is None or not io.params.is_file():
        return {}
    return {name: load_from_params(io.params, name) for name in io.spec.report.compare}


def grid_plan(
    spec: Any, roles: Sequence[str], arms: list[tuple[str, str]], comparisons: list[tuple[str, str]]
) -> tuple[list[tuple[str, str]], list[tuple[str, str]], GridPlan | None, str]:
    """With a grid: the arms and comparisons per cell, the plan of the grid section and
    the axis's name (report/grid_section.py). The experiments with cells: the spec, and
    each compared one whose cells are among the inputs (`<cell>.<role>`)."""
    if spec.grid is None:
        return arms, comparisons, None, ""
    from rmsweb.spec.variants import grid_variants

    variants = grid_variants(spec)
    cells = [
        Cell(v.label, "; ".join(f"{a} {t}" for a, t in v.shown.items()), v.own) for v in variants
    ]
    others = {v.label for v in variants if not v.own}
    prefixes = {role.split(".", 1)[0] for role in roles if "." in role}
    gridded = {spec.name} | {
        c for c in spec.report.compare if others and {f"{c}-{o}" for o in others} <= prefixes
    }
    arms, comparisons, plan = expand(cells, gridded, arms, comparisons)
    return arms, comparisons, plan, " x ".join(spec.grid.axes)


def main(io: StageIO) -> None:
    spec = io.spec.report
    # Every declared input must exist; only those holding tables feed the report
    # (checkpoint folders such as sft/ and model/ are deps, not data).
    inputs = {role: io.input(role) for role in io.inputs}
    runs = {role: path for role, path in inputs.items() if is_run_dir(path)}
    metrics_root = io.metrics.parents[1]
    arms, comparisons, grid, grid_axis = grid_plan(
        io.spec,
        list(inputs),
        [(row.label, row.arm) for row in spec.arms],
        [(c.a, c.b) for c in spec.comparisons],
    )
    tmp = io.out.with_name(f".{io.out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        rep = write_report(
            tmp,
            runs,
            title=spec.title or io.spec.name,
            viewer=spec.viewer,
            viewer_max_episodes=spec.viewer_max_episodes,
            experiment=io.spec.name,
            arms=arms,
            comparisons=comparisons,
            grid=grid,
            grid_axis=grid_axis,
            rl_arms=rl_arms(io.spec, compared_specs(io)),
            stages=read_stage_records(inputs, metrics_root),
            loss_curves=read_loss_curves(inputs, metrics_root),
            rl_curves=read_rl_curves(inputs, metrics_root),
            checkpoint_curves=read_curves(inputs, metrics_root, KIND, CURVE_FILE),
            side_by_side=side_by_side_roles(io.spec, list(runs)),
        )
        _replace_dir(tmp / "plots", figures_dir(io.metrics))
        shutil.rmtree(io.out, ignore_errors=True)
        tmp.rename(io.out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for name, header in PLOT_FILES.items():
        write_csv_atomic(io.plot_path(name), header, rep.plot_data[name])
    write_json_atomic(summary_path(io.metrics), rep.summary)
    io.write_metrics(rep.metrics)
