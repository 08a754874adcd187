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
from rmsweb.report.pipeline import (
    read_curves,
    read_loss_curves,
    read_rl_curves,
    read_stage_records,
)
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


def main(io: StageIO) -> None:
    spec = io.spec.report
    # Every declared input must exist; only those holding tables feed the report
    # (checkpoint folders such as sft/ and model/ are deps, not data).
    inputs = {role: io.input(role) for role in io.inputs}
    runs = {role: path for role, path in inputs.items() if is_run_dir(path)}
    metrics_root = io.metrics.parents[1]
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
            arms=[(row.label, row.arm) for row in spec.arms],
            comparisons=[(c.a, c.b) for c in spec.comparisons],
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
