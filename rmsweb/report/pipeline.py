"""The report's view of the pipeline itself: wall time and cost per stage, and the SFT loss.

Read from what the upstream stages wrote beside their outputs: each stage's metrics
JSON (`wall_s`, the SFT losses, the eval's val success) and the SFT stage's loss CSV,
at metrics/<kind>/<stem>.json(.loss.csv) for the run folder runs/<kind>/<owner>/<suffix>
(the compiler's naming, rmsweb/compile/graph.py `Stage.metrics`; dvc.yaml lists them as
the report's deps). Tokens and dollars come from the run tables: the episodes' cost is
the policy's tokens at its spec prices (eval policies' `prices`), the judgments' the
judge's (`suite.judge.prices`). Compute time has no price in a spec, so training stages
show their minutes only.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmsweb.report import plots
from rmsweb.report.document import Figure, Para, Section, Table
from rmsweb.report.tables import num
from rmsweb.stages import STAGES
from rmsweb.store.layout import run_name

LOSS_FILE = "loss.csv"  # the sft stage's plot file (rmsweb/stages.py)
RL_CURVES_FILE = "curves.csv"  # the rl stage's


@dataclass
class StageRecord:
    """One input stage of the report, as its metrics file describes it."""

    role: str  # the report's --in role: sft-s0, eval-rl-s1, <experiment>.collect
    run: str  # its run name, runs/<run>: sft/miniwob-cpu/s0
    metrics: dict[str, Any] = field(default_factory=dict)  # {} when the file is missing

    @property
    def kind(self) -> str:
        return self.run.split("/", 1)[0]

    @property
    def own(self) -> bool:
        """A stage of this report's experiment (not of a `report.compare` one)."""
        return "." not in self.role


def metrics_file(run_dir: Path, metrics_root: Path) -> Path | None:
    """The metrics JSON of the stage that wrote `run_dir` (runs/<kind>/<owner>/<suffix>);
    None for a folder outside a runs/ tree."""
    parts = Path(run_dir).parts
    if "runs" not in parts:
        return None
    below = parts[len(parts) - parts[::-1].index("runs") :]  # after the last runs/
    if len(below) < 2:
        return None
    kind, owner, *suffix = below
    return Path(metrics_root) / kind / ("-".join([owner, *suffix]) + ".json")


def read_stage_records(inputs: Mapping[str, Path], metrics_root: Path) -> dict[str, StageRecord]:
    """Role -> its stage's record, for every input (checkpoint folders included)."""
    out: dict[str, StageRecord] = {}
    for role, path in inputs.items():
        file = metrics_file(path, metrics_root)
        found = file is not None and file.is_file()
        metrics = json.loads(file.read_text(encoding="utf-8")) if found else {}
        out[role] = StageRecord(role, run_name(Path(path)), metrics)
    return out


def read_loss_curves(inputs: Mapping[str, Path], metrics_root: Path) -> dict[str, list[dict]]:
    """Role -> the rows (step, loss, learning_rate) of each SFT input's loss CSV."""
    return read_curves(inputs, metrics_root, "sft", LOSS_FILE)


def read_rl_curves(inputs: Mapping[str, Path], metrics_root: Path) -> dict[str, list[dict]]:
    """Role -> the rows of each RL input's curves CSV (one per step; kl_to_sft and
    entropy only at the probe steps)."""
    return read_curves(inputs, metrics_root, "rl", RL_CURVES_FILE)


def read_curves(
    inputs: Mapping[str, Path], metrics_root: Path, kind: str, plot_file: str
) -> dict[str, list[dict]]:
    """Role -> the numeric rows of a plot CSV that the `kind` stages write beside their
    metrics file (empty cells left out)."""
    out: dict[str, list[dict]] = {}
    for role, path in inputs.items():
        file = metrics_file(path, metrics_root)
        if file is None or not run_name(Path(path)).startswith(kind + "/"):
            continue
        file = file.with_suffix("." + plot_file)
        if file.is_file():
            with file.open(encoding="utf-8", newline="") as f:
                out[role] = [
                    {k: float(v) for k, v in row.items() if v not in ("", None)}
                    for row in csv.DictReader(f)
                ]
    return out


def stage_wall_s(kind: str, metrics: Mapping[str, Any]) -> float | None:
    """Seconds the stage ran: its `wall_s`; an eval's also sums its other splits'."""
    wall = metrics.get("wall_s")
    if wall is None:
        return None
    if kind == "eval":
        wall += sum(
            v.get("wall_s") or 0.0 for v in metrics.values() if isinstance(v, dict) and "split" in v
        )
    return float(wall)


def _order(records: Mapping[str, StageRecord]) -> list[StageRecord]:
    rank = {k: i for i, k in enumerate(STAGES)}
    return sorted(records.values(), key=lambda r: (not r.own, rank.get(r.kind, 99), r.role))


def _cost(c: Mapping[str, Any]) -> tuple[float | None, int]:
    """(dollars, tokens) of one run: None dollars when it spent tokens nobody priced."""
    tokens = int(c.get("tokens_in") or 0) + int(c.get("tokens_out") or 0)
    cost = c.get("cost_usd")
    return (0.0 if cost is None and tokens == 0 else cost), tokens


def _usd(cost: float | None) -> str:
    if cost is None:
        return "unpriced"
    return f"${cost:.4f}" if cost < 1 else f"${cost:,.2f}"


def stages_section(
    rep: Any, records: Mapping[str, StageRecord], costs: list[dict[str, Any]]
) -> Section:
    """Wall time, episodes, tokens and dollars of every input stage, in pipeline order;
    totals over this experiment's own stages (`stages/wall_s`, `stages/cost_usd`)."""
    sec = Section("Stages: wall time and cost")
    if not records:
        sec.blocks.append(Para("No input stages.", note=True))
        return sec
    cost_of = {c["run"]: c for c in costs}
    rows, bars = [], []
    walls: list[float] = []  # own stages
    dollars: list[float | None] = []
    for rec in _order(records):
        wall = stage_wall_s(rec.kind, rec.metrics)
        c = cost_of.get(rec.run, {})
        cost, _ = _cost(c)
        rows.append(
            [
                rec.role,
                rec.run,
                num(wall / 60, 1) if wall is not None else "—",
                str(c.get("episodes") or 0),
                f"{int(c.get('tokens_in') or 0):,} / {int(c.get('tokens_out') or 0):,}",
                _usd(cost),
            ]
        )
        if wall is not None:
            bars.append((rec.role, wall / 60))
        if rec.own:
            if c:  # a run with tables; checkpoint folders spend no tokens
                dollars.append(cost)
            if wall is not None:
                walls.append(wall)
                rep.metrics[f"stages/{rec.role}/wall_s"] = round(wall, 1)
    known = [d for d in dollars if d is not None]
    total_usd = "—" if not dollars else _usd(sum(known) if known else None)
    if known and None in dollars:
        total_usd += " + unpriced tokens"
    total_wall = num(sum(walls) / 60, 1) if walls else "—"
    rows.append(["total (this experiment's)", "", total_wall, "", "", total_usd])
    if walls:
        rep.metrics["stages/wall_s"] = round(sum(walls), 1)
    if known:
        rep.metrics["stages/cost_usd"] = round(sum(known), 6)
    sec.blocks += [
        Table(
            ["Stage", "Run", "Wall (min)", "Episodes", "Tokens in / out", "Cost"],
            rows,
            ["left", "left", "right", "right", "right", "right"],
        ),
        Para(
            "Wall: the stage's last run as it recorded it in its metrics file (a resumed "
            "stage counts its last run only; an eval sums its splits). Cost: the tokens "
            "at the spec's prices (an eval policy's `prices`, the judge's "
            "`suite.judge.prices`); `unpriced`: tokens the spec gives no price for (an "
            "LLM teacher, the scripted policies' bookkeeping); training stages spend compute "
            "time, which a spec does not price. The report's own time is not included."
        ),
    ]
    if bars:
        sec.blocks.append(Figure("stages", plots.stage_time_plot(bars), "Minutes per stage"))
    return sec


def sft_section(
    rep: Any, curves: Mapping[str, list[dict]], records: Mapping[str, StageRecord]
) -> Section:
    """The SFT loss per logged step (per training seed), and each run's summary."""
    sec = Section("SFT: training loss")
    if not curves:
        sec.blocks.append(
            Para(
                "No SFT loss curve among this report's inputs (the experiment evaluates "
                "no SFT-trained policy, or its SFT stage wrote no loss file).",
                note=True,
            )
        )
        return sec
    rows = []
    for role, curve in curves.items():
        m = records[role].metrics if role in records else {}
        losses = [r["loss"] for r in curve if "loss" in r]
        rows.append(
            [
                role,
                str(m.get("steps", int(curve[-1]["step"]) if curve else 0)),
                num(losses[0] if losses else None, 3),
                num(losses[-1] if losses else None, 4),
                num(m.get("eval_loss"), 4),
                num(m.get("samples_per_s"), 0),
                num(m["wall_s"] / 60, 1) if m.get("wall_s") is not None else "—",
            ]
        )
        if "." not in role and losses:
            rep.metrics[f"sft/{role}/loss_final"] = losses[-1]
    sec.blocks += [
        Table(
            [
                "Run",
                "Steps",
                "Loss (first log)",
                "Loss (last log)",
                "Held-out loss",
                "Samples/s",
                "Wall (min)",
            ],
            rows,
            ["left", *["right"] * 6],
        ),
        Para(
            "Loss: the training loss on the action tokens, averaged over each logging "
            "interval; held-out loss: on the SFT stage's held-out samples at the end."
        ),
        Figure("sft_loss", plots.sft_loss_plot(curves), "SFT training loss per step (log scale)"),
    ]
    return sec
