"""The `sweep` pipeline stage (`rmsweb sweep report`): a sweep's table, CSV and figure.

Its inputs are the points' stages that hold the metric, as `<point>.<role>` (dvc.yaml
lists their metrics files as deps), and with `against:` each point's baseline eval runs
as `<point>.against-<role>`, whose episodes are paired with the metric's; it writes metrics/sweep/<name>.json (the table and
the best point), .csv and .png, and the markdown table into its output folder.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from rmsweb.compile.graph import AGAINST
from rmsweb.report.pipeline import metrics_file
from rmsweb.report.stage import write_csv_atomic
from rmsweb.spec.points import sweep_points
from rmsweb.spec.sweep import Metric
from rmsweb.stage_io import StageInputError, StageIO
from rmsweb.sweep.results import (
    csv_rows,
    figure,
    pair_with_baseline,
    read_point,
    summarize,
    table,
)


def main(io: StageIO) -> None:
    name = io.policy or ""
    if name not in io.spec.sweep:
        raise StageInputError(
            f"experiment {io.exp!r} has no sweep {name!r} (has: {', '.join(io.spec.sweep)})."
        )
    sweep = io.spec.sweep[name]
    metric = Metric(sweep.metric)
    metrics_root = io.metrics.parents[1]
    results = []
    for point in sweep_points(io.spec, name):
        files: dict[str, Path] = {}
        runs: dict[str, Path] = {}  # the metric's eval runs, role -> run folder
        baseline: dict[str, Path] = {}  # the `against` policy's eval runs
        for role, path in io.inputs.items():
            owner, _, own_role = role.partition(".")
            if owner != point.name:
                continue
            if own_role.startswith(AGAINST):
                baseline[own_role.removeprefix(AGAINST)] = Path(path)
                continue
            runs[own_role] = Path(path)
            file = metrics_file(path, metrics_root)
            if file is not None:
                files[own_role] = file
        result = read_point(point.name, point.shown, point.overrides, files, metric.key)
        if sweep.against is not None:
            if not baseline:
                raise StageInputError(
                    f"sweep {name} pairs with {sweep.against}, but point {point.name} has no "
                    f"{sweep.against} eval among the inputs. Fix: run `rmsweb compile`."
                )
            pair_with_baseline(result, runs, baseline, sweep.against, sweep.split)
        results.append(result)
    summary = summarize(name, io.exp, sweep.model_dump(mode="json"), results)
    header, rows = csv_rows(summary)
    write_csv_atomic(io.plot_path("csv"), header, rows)
    png = io.plot_path("png")
    tmp_png = png.with_name(f".{png.name}.{os.getpid()}.tmp")
    tmp_png.write_bytes(figure(summary))
    tmp_png.replace(png)
    tmp = io.out.with_name(f".{io.out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / "table.md").write_text(table(summary), encoding="utf-8")
    shutil.rmtree(io.out, ignore_errors=True)
    tmp.rename(io.out)
    io.write_metrics(summary)
