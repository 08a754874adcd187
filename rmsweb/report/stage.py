"""The `report` pipeline stage: one experiment's report from its upstream runs.

Writes `out/` (report.md, report.html, plots/, viewer/) under a temporary
sibling renamed at the end, so DVC never caches half a report; then the plot
data files next to the metrics and the flat metrics JSON.
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
from rmsweb.stage_io import StageIO
from rmsweb.store.layout import is_run_dir


def _write_csv_atomic(path: Path, header: Sequence[str], rows: list[list[Any]]) -> None:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(buf.getvalue(), encoding="utf-8")
    tmp.replace(path)


def main(io: StageIO) -> None:
    spec = io.spec.report
    # Every declared input must exist; only those holding tables feed the report
    # (checkpoint folders such as sft/ and model/ are deps, not data).
    inputs = {role: io.input(role) for role in io.inputs}
    runs = {role: path for role, path in inputs.items() if is_run_dir(path)}
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
        )
        shutil.rmtree(io.out, ignore_errors=True)
        tmp.rename(io.out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for name, header in PLOT_FILES.items():
        _write_csv_atomic(io.plot_path(name), header, rep.plot_data[name])
    io.write_metrics(rep.metrics)
