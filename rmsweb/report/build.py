"""Build the experiment report from its upstream runs: document, metrics and plot data.

Pure core: runs in, a Report out (`build_report`); `write_report` puts it on
disk (report.md, report.html, plots/*.png, viewer/*.html). Every section is
built from the views; a section whose table no input has says so.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from rmsweb.report import mining, pipeline, plots, queries, retry_study
from rmsweb.report.arms import ArmSummary, Difference
from rmsweb.report.arms_section import arm_episodes, arms_section
from rmsweb.report.checkpoints import checkpoint_section, is_curve_role
from rmsweb.report.document import (
    Document,
    Figure,
    Links,
    Para,
    Section,
    Table,
    to_html,
    to_markdown,
)
from rmsweb.report.grid_section import GridPlan, grid_section
from rmsweb.report.live import live_cells, live_sections
from rmsweb.report.regime_section import regime_section
from rmsweb.report.rl_baselines import RLArm, baselines_blocks
from rmsweb.report.steps_section import steps_section
from rmsweb.report.summary import summary_metrics
from rmsweb.report.tables import (
    REPORT_SPLITS,
    eval_metrics,
    eval_rows_from,
    eval_table,
    num,
    pct,
    per_task_table,
)
from rmsweb.stages import STAGES
from rmsweb.store.layout import run_name
from rmsweb.store.rows import EvalRow

# Plot data files written next to the metrics (DVC `plots:`), with fixed headers so
# an empty section still leaves a valid file: file name -> CSV header.
PLOT_FILES: dict[str, tuple[str, ...]] = {p.file: p.columns for p in STAGES["report"].plots}


@dataclass
class Report:
    document: Document
    metrics: dict[str, Any] = field(default_factory=dict)
    plot_data: dict[str, list[list[Any]]] = field(default_factory=dict)  # file -> rows
    eval_rows: list[EvalRow] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)  # metrics/summary/<name>.json
    arm_summaries: dict[str, ArmSummary] = field(default_factory=dict)
    differences: list[Difference] = field(default_factory=list)


def _absent(what: str, table: str, stage: str) -> Para:
    return Para(
        f"No {table} rows in this report's inputs, so no {what}: the experiment has no "
        f"{stage} run upstream of its evaluated policies, or it wrote nothing.",
        note=True,
    )


def _key(kind: str, run: str, several: bool, name: str) -> str:
    # Runs are named "<stage>/<exp>": "collect/collect/x/yield" would repeat the stage.
    run = run.removeprefix(f"{kind}/")
    return f"{kind}/{run}/{name}" if several else f"{kind}/{name}"


# --------------------------------------------------------------------------- sections


# The split whose numbers head the report (tables.REPORT_SPLITS: test when it was
# evaluated); the others' metrics go under `<split>/` (as in the eval stage).


def _splits(rows: list[EvalRow]) -> list[str]:
    present = list(dict.fromkeys(r.split for r in rows))
    return sorted(present, key=lambda s: REPORT_SPLITS.index(s) if s in REPORT_SPLITS else 99)


def results_section(
    rep: Report, rows: list[EvalRow], viewers: Mapping[str, str] | None = None
) -> list[Section]:
    """The results table, its figure and the per-task table; `viewers` (run -> viewer page)
    links each per-task cell to that run's episodes of the task."""
    top = [r for r in rows if r.task_id == "*"]
    results = Section("Results")
    if not top:
        per_task = Section("Per-task success")
        results.blocks.append(_absent("evaluation results", "episodes (eval)", "eval"))
        per_task.blocks.append(_absent("per-task results", "episodes (eval)", "eval"))
        return [results, per_task]
    headline, *others = _splits(rows)
    head_rows = [r for r in rows if r.split == headline]
    head_top = [r for r in head_rows if r.task_id == "*"]
    per_task = Section(f"Per-task success ({headline} split)")
    results.blocks += [
        eval_table(rows),
        Para(
            "Success: share of successful episodes per task, averaged over tasks; an episode "
            "that still hit an environment error after its retries counts as a failure (Env "
            "errors: how many did). 95% CI: Wilson score interval of the pooled counts. "
            "Steps (solved): mean steps of successful episodes. Parse errors: share of steps "
            "whose output did not parse. Split: val seeds are for choosing hyperparameters "
            f"and checkpoints, test seeds for reporting; the figure, the per-task table and "
            f"the flat metrics are the {headline} split's."
        ),
        Figure(
            "success",
            plots.success_plot(head_top),
            f"Success rate per policy, {headline} split (95% Wilson CI)",
        ),
    ]
    viewers = viewers or {}

    def href(run: str, task: str) -> str | None:
        return f"{viewers[run]}#task={quote(task)}" if run in viewers else None

    per_task.blocks.append(per_task_table(head_rows, href))
    if viewers:
        per_task.blocks.append(
            Para(
                f"Each cell links to that policy's {headline} episodes of the task in its "
                "trajectory viewer (report.html only)."
            )
        )
    rep.metrics.update(eval_metrics(head_rows))
    for split in others:
        split_rows = [r for r in rows if r.split == split]
        rep.metrics.update({f"{split}/{k}": v for k, v in eval_metrics(split_rows).items()})
    rep.plot_data["success.csv"] = [
        [r.policy, r.suite, r.n, r.success_rate, r.ci_low, r.ci_high] for r in head_top
    ]
    return [results, per_task]


def collect_section(rep: Report, data: dict[str, list[dict]]) -> Section:
    sec = Section("Collection: reflection retries")
    attempts, first, kept = (
        data["collect_attempts"],
        data["collect_first_success"],
        data["collect_kept"],
    )
    if not attempts:
        sec.blocks.append(_absent("collection yield", "episodes (collect)", "collect"))
        return sec
    several = len(kept) > 1
    rows_out = []
    for k in kept:
        run = k["run"]
        units = [u for u in first if u["run"] == run]
        total = sum(u["units"] for u in units)
        solved = 0
        for a in (a for a in attempts if a["run"] == run):
            solved += sum(u["units"] for u in units if u["first_ok"] == a["attempt"])
            share = solved / total if total else 0.0
            rate = a["successes"] / a["attempts"]
            rows_out.append([run, a["attempt"], a["attempts"], a["successes"], rate, share])
            if a["attempt"] == 0:
                rep.metrics[_key("collect", run, several, "first_try_yield")] = share
        rep.metrics[_key("collect", run, several, "yield")] = solved / total if total else None
        rep.metrics[_key("collect", run, several, "kept")] = k["kept"]
        rep.metrics[_key("collect", run, several, "kept_steps_mean")] = k["kept_steps_mean"]
        rep.metrics[_key("collect", run, several, "kept_over_gold")] = k["kept_over_gold"]
        rep.metrics[_key("collect", run, several, "detour_fraction")] = k["detour_fraction"]
        tokens = (k["tokens_in"] or 0) + (k["tokens_out"] or 0)
        rep.metrics[_key("collect", run, several, "tokens_per_kept")] = (
            tokens / k["kept"] if k["kept"] else None
        )
    rep.plot_data["yield.csv"] = rows_out
    sec.blocks.append(
        Table(
            ["Run", "Attempt", "Episodes", "Successes", "Attempt success", "Yield"],
            [[r[0], str(r[1]), str(r[2]), str(r[3]), pct(r[4]), pct(r[5])] for r in rows_out],
            ["left", "right", "right", "right", "right", "right"],
        )
    )
    sec.blocks.append(
        Para(
            "Attempt success: share of that attempt's episodes that succeeded (attempt k > 0 "
            "runs only where attempts before it failed or took detours). Yield: share of "
            "(task, seed) units solved at this attempt or an earlier one."
        )
    )

    def per_kept(total: float | None, k: dict, digits: int) -> str:
        return num(total / k["kept"], digits) if k["kept"] and total is not None else "—"

    sec.blocks.append(
        Table(
            [
                "Run",
                "Units",
                "Kept",
                "Steps kept (mean)",
                "Steps kept (median)",
                "Steps, first-try successes",
                "Kept steps / gold",
                "Detoured successes",
                "Teacher calls / kept",
                "Teacher tokens / kept",
                "Teacher s / kept",
            ],
            [
                [
                    k["run"],
                    str(k["units"]),
                    str(k["kept"]),
                    num(k["kept_steps_mean"], 2),
                    num(k["kept_steps_median"], 1),
                    num(k["attempt0_steps_mean"], 2),
                    num(k["kept_over_gold"], 3),
                    pct(k["detour_fraction"]) if k["detour_fraction"] is not None else "—",
                    per_kept(k["teacher_calls"], k, 2),
                    per_kept((k["tokens_in"] or 0) + (k["tokens_out"] or 0), k, 0),
                    per_kept(k["wall_s"], k, 1),
                ]
                for k in kept
            ],
            ["left", *["right"] * 10],
        )
    )
    sec.blocks.append(
        Para(
            "Kept: the shortest successful attempt of each unit (what SFT trains on). "
            "Gold: the task-level reference length (the median of the scripted expert's "
            "lengths on the task's collect.reference_seeds train seeds, else the shortest "
            "success seen for the task; never the judged seed's own); a success with more "
            "steps took a detour. Teacher cost counts every attempt, kept or not (calls: one per "
            "step plus one per reflection; tokens of both)."
        )
    )
    sec.blocks.append(
        Figure("yield", plots.yield_plot(attempts, first), "Attempt success and yield by attempt")
    )
    if data["collect_kept_steps"]:
        sec.blocks.append(
            Figure(
                "kept_steps",
                plots.kept_steps_plot(data["collect_kept_steps"]),
                "Steps of kept trajectories",
            )
        )
    return sec


def _mean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None and not math.isnan(v)]
    return sum(vals) / len(vals) if vals else None


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and math.isfinite(v)


def rl_section(
    rep: Report,
    curve: list[dict],
    reasons: list[dict],
    stages: Mapping[str, pipeline.StageRecord] | None = None,
    drift: Mapping[str, list[dict]] | None = None,
    rl_arms: Sequence[RLArm] = (),
) -> Section:
    """Per RL run: steps, gate outcomes, rewards, losses, the groups that had contrast but
    the competence bounds alone rejected, and the KL to the SFT policy at the end (from
    the RL stage's metrics file, `kl_to_sft_final`); `drift` (role -> the stage's curves
    CSV rows) adds the KL to SFT and the policy's entropy at the probe steps; `rl_arms`
    (rl_baselines.rl_arms of the report's specs) how each RL arm's loss differs from
    Salvage-DS, written from its rl spec."""
    sec = Section("RL: rewards, gate and losses")
    kl_of = {r.run: r.metrics.get("kl_to_sft_final") for r in (stages or {}).values()}
    if not curve:
        sec.blocks.append(_absent("RL curves", "rl_groups", "rl"))
        sec.blocks += baselines_blocks(rl_arms)
        return sec
    runs = list(dict.fromkeys(r["run"] for r in curve))
    several = len(runs) > 1
    table_rows = []
    for run in runs:
        rs = [r for r in curve if r["run"] == run]
        groups = sum(r["groups"] for r in rs)
        accepted = sum(r["accepted"] for r in rs)
        tenth = max(1, len(rs) // 10)
        first = _mean([r["reward_mean"] for r in rs[:tenth]])
        last = _mean([r["reward_mean"] for r in rs[-tenth:]])
        by_reason = defaultdict(int)
        for r in reasons:
            if r["run"] == run:
                by_reason[r["reason"]] += r["groups"]
        mix = ", ".join(
            f"{name} {pct(n / groups, 0)}"
            for name, n in sorted(by_reason.items(), key=lambda kv: -kv[1])
        )
        # too_hard / too_easy: the group had contrast (std >= min_std) and the competence
        # bounds alone turned it away; all_wrong / all_right / low_std had none.
        with_contrast = by_reason.get("too_hard", 0) + by_reason.get("too_easy", 0)
        kl = kl_of.get(run)
        table_rows.append(
            [
                run,
                str(len(rs)),
                str(groups),
                pct(accepted / groups),
                mix,
                num(first, 3),
                num(last, 3),
                num(_mean([r["pg_loss"] for r in rs]), 4),
                num(_mean([r["anchor_loss"] for r in rs]), 4),
                str(with_contrast),
                "—" if kl is None else num(kl, 4),
            ]
        )
        rep.metrics[_key("rl", run, several, "competence_rejected_with_contrast")] = with_contrast
        if kl is not None:
            rep.metrics[_key("rl", run, several, "kl_to_sft_final")] = kl
        rep.metrics[_key("rl", run, several, "steps")] = len(rs)
        rep.metrics[_key("rl", run, several, "accept_rate")] = accepted / groups
        rep.metrics[_key("rl", run, several, "reward_first")] = first
        rep.metrics[_key("rl", run, several, "reward_last")] = last
    sec.blocks.append(
        Table(
            [
                "Run",
                "Steps",
                "Groups",
                "Accepted",
                "Gate decisions",
                "Reward (first 10%)",
                "Reward (last 10%)",
                "PG loss",
                "Anchor NLL",
                "Rejected with contrast",
                "KL to SFT (end)",
            ],
            table_rows,
            ["left", "right", "right", "right", "left", *["right"] * 6],
        )
    )
    sec.blocks.append(
        Para(
            "Rejected with contrast: groups whose rewards differed (so the policy gradient "
            "had a signal) that the competence bounds alone turned away. With a +-1 reward "
            "and G samples, bounds of [1/G, 1 - 1/G] (0.125, 0.875 at G = 8, the defaults) "
            "reject exactly the groups without contrast: the gate is then GRPO's "
            "zero-variance filter, and this column is 0. KL to SFT: the exact per-token KL "
            "of the final policy to the SFT checkpoint on its own samples (rl.kl_probe_states "
            "states)."
        )
    )
    if drift and any(_finite(r.get("entropy")) for rows in drift.values() for r in rows):
        sec.blocks.append(
            Figure(
                "rl_drift",
                plots.rl_drift_plot(drift),
                "KL to the SFT policy and the policy's token entropy at RL's checkpoints "
                "(exact, on the policy's own samples of rl.kl_probe_states states)",
            )
        )
    sec.blocks.append(
        Figure(
            "rl",
            plots.rl_plot(curve, reasons),
            "Mean group reward (band: mean within-group std), gate decisions, losses",
        )
    )
    rep.plot_data["rl.csv"] = [
        [
            r["run"],
            r["step"],
            r["groups"],
            r["reward_mean"],
            r["reward_std"],
            r["accepted"] / r["groups"],
            r["pg_loss"],
            r["anchor_loss"],
        ]
        for r in curve
    ]
    sec.blocks += baselines_blocks(rl_arms)
    return sec


def inputs_section(runs: Mapping[str, Path], counts: dict[str, dict[str, int]]) -> Section:
    tables = ["episodes", "steps", "mined_states", "rl_groups"]
    return Section(
        "Inputs",
        [
            Table(
                ["Role", "Run", *tables],
                [
                    [role, run_name(path), *(str(counts[role].get(t, 0)) for t in tables)]
                    for role, path in runs.items()
                ],
                ["left", "left", *["right"] * len(tables)],
            )
        ],
    )


# --------------------------------------------------------------------------- assembly


def _steps_vs_expert(
    rep: Report, results: Section, rows: list[EvalRow], matched: list[dict]
) -> None:
    """Steps of solved episodes over the expert's on the same episodes (matched)."""
    label = {r.run: r.policy for r in rows if r.task_id == "*"}
    lines = [m for m in matched if m["run"] in label]
    if not lines:
        return
    results.blocks.append(
        Table(
            ["Policy", "Solved episodes", "Steps / expert's steps"],
            [[label[m["run"]], str(m["matched"]), num(m["steps_over_expert"], 3)] for m in lines],
            ["left", "right", "right"],
        )
    )
    results.blocks.append(
        Para(
            "Steps / expert's steps: for each solved episode, its steps over the expert's on "
            "the same task and seed, averaged; 1.0 means no detours. Unlike the mean steps "
            "above it does not depend on which tasks a policy solves."
        )
    )
    for m in lines:
        rep.metrics[f"steps_over_expert/{label[m['run']]}"] = m["steps_over_expert"]


def _label_compared(rows: list[EvalRow]) -> None:
    """With compared experiments the same policy name comes from several runs: label
    each row by its run (`<experiment>/<policy>`) so tables and metric keys stay apart."""
    names = [r.policy for r in rows if r.task_id == "*"]
    if len(names) != len(set(names)):
        for r in rows:
            r.policy = r.run.removeprefix("eval/")


def build_report(
    runs: Mapping[str, Path],
    *,
    title: str,
    experiment: str = "",
    arms: Sequence[tuple[str, str]] = (),
    comparisons: Sequence[tuple[str, str]] = (),
    stages: Mapping[str, pipeline.StageRecord] | None = None,
    loss_curves: Mapping[str, list[dict]] | None = None,
    rl_curves: Mapping[str, list[dict]] | None = None,
    checkpoint_curves: Mapping[str, list[dict]] | None = None,
    viewers: Mapping[str, str] | None = None,
    grid: GridPlan | None = None,
    grid_axis: str = "",
    rl_arms: Sequence[RLArm] = (),
) -> Report:
    """The report over the given runs (role -> run folder; roles as the stage's --in).

    `experiment` names the arms of this report's own inputs; `arms` are (label,
    <experiment>/<policy>) rows and `comparisons` (a, b) pairs of the arms section.
    `stages` (role -> the stage's metrics file, every input incl. checkpoint folders)
    and `loss_curves` (SFT role -> loss rows) are what the stages wrote beside their
    outputs (report/pipeline.py); `checkpoint_curves` (evalckpt role -> its curve rows)
    the val success per RL checkpoint (report/checkpoints.py); `viewers` (run name ->
    viewer page) turns the per-task cells into links.
    """
    stages = stages or {}
    from rmsweb.store.views import connect

    named = {run_name(path): Path(path) for path in runs.values()}
    con = connect(named)
    try:
        data = queries.run_all(con)
        episodes = arm_episodes(con, runs, experiment or title)
        live = live_cells(con)
        data.update(retry_study.queries(con))
        mined = mining.mining_data(con)
        rows = eval_rows_from(data["eval_by_task"])
        _label_compared(rows)
        counts: dict[str, dict[str, int]] = {}
        for role, path in runs.items():
            name = run_name(path).replace("'", "''")
            counts[role] = {
                t: con.execute(f"SELECT count(*) FROM {t} WHERE run = '{name}'").fetchone()[0]
                for t in ("episodes", "steps", "mined_states", "rl_groups")
            }
    finally:
        con.close()
    # Policies in the order of the inputs (the spec's eval.policies order), not by name.
    order = {run_name(p): i for i, p in enumerate(runs.values())}
    rows.sort(key=lambda r: (r.task_id != "*", order.get(r.run, len(order)), r.task_id))
    n_eval = sum(1 for r in rows if r.task_id == "*")
    doc = Document(title, f"{n_eval} evaluated policies; {len(runs)} input runs.", [])
    rep = Report(doc, eval_rows=rows)
    doc.sections += results_section(rep, rows, viewers)
    _steps_vs_expert(rep, doc.sections[0], rows, data["steps_vs_expert"])
    doc.sections.append(arms_section(rep, episodes, arms, comparisons))
    if grid is not None:  # a study's grid: the comparisons against its axis
        doc.sections.append(grid_section(rep, grid, episodes, grid_axis))
    steps = steps_section(
        rep.metrics,
        episodes,
        [(d.a, d.b) for d in rep.differences],
        {arm: label for label, arm in arms},
    )
    if steps is not None:  # only where two SFT arms are compared (the data comparison)
        doc.sections.append(steps)
    doc.sections += live_sections(rep, live)
    doc.sections.append(collect_section(rep, data))
    collects = {r.run: r.metrics for r in stages.values() if r.kind == "collect"}
    doc.sections.append(retry_study.section(rep.metrics, data, collects))
    doc.sections.append(pipeline.sft_section(rep, loss_curves or {}, stages))
    doc.sections.append(mining.mine_section(rep, mined))
    regime = regime_section(rep.metrics, stages)
    if regime is not None:  # specs with an rl policy on a suite with a scripted expert
        doc.sections.append(regime)
    doc.sections.append(
        rl_section(rep, data["rl_curve"], data["rl_reasons"], stages, rl_curves or {}, rl_arms)
    )
    per_checkpoint = checkpoint_section(rep, checkpoint_curves or {}, stages, experiment or title)
    if per_checkpoint is not None:  # only where a policy sets every_checkpoint
        doc.sections.append(per_checkpoint)
    doc.sections.append(pipeline.stages_section(rep, stages, data["stage_costs"]))
    doc.sections.append(inputs_section(runs, counts))
    for name in PLOT_FILES:
        rep.plot_data.setdefault(name, [])
    rep.summary = summary_metrics(
        experiment or title, rep.metrics, {r: s.metrics for r, s in stages.items()}
    )
    return rep


def _viewer_pages(runs: Mapping[str, Path]) -> dict[str, str]:
    """Role -> viewer page (relative to the report) of every input with episodes, but the
    val runs of every RL checkpoint (evalckpt: `rmsweb view <run> --split val` shows one)."""
    from rmsweb.store.layout import part_files

    return {
        role: f"viewer/{role}.html"
        for role, p in runs.items()
        if part_files(Path(p), "episodes") and not is_curve_role(role)
    }


def write_report(
    out: Path,
    runs: Mapping[str, Path],
    *,
    title: str,
    viewer: bool = True,
    viewer_max_episodes: int = 200,
    experiment: str = "",
    arms: Sequence[tuple[str, str]] = (),
    comparisons: Sequence[tuple[str, str]] = (),
    stages: Mapping[str, pipeline.StageRecord] | None = None,
    loss_curves: Mapping[str, list[dict]] | None = None,
    rl_curves: Mapping[str, list[dict]] | None = None,
    checkpoint_curves: Mapping[str, list[dict]] | None = None,
    side_by_side: Sequence[tuple[str, str]] = (),
    grid: GridPlan | None = None,
    grid_axis: str = "",
    rl_arms: Sequence[RLArm] = (),
) -> Report:
    """Write report.md, report.html, plots/*.png and (optionally) the viewers to `out`:
    viewer/<role>.html per input with episodes (the report's split), and
    viewer/<a>-vs-<b>.html for each (role a, role b) of `side_by_side`."""
    from rmsweb.report.viewer import write_compare, write_viewer

    pages = _viewer_pages(runs) if viewer else {}
    rep = build_report(
        runs,
        title=title,
        experiment=experiment,
        arms=arms,
        comparisons=comparisons,
        stages=stages,
        loss_curves=loss_curves,
        rl_curves=rl_curves,
        checkpoint_curves=checkpoint_curves,
        viewers={run_name(Path(runs[role])): page for role, page in pages.items()},
        grid=grid,
        grid_axis=grid_axis,
        rl_arms=rl_arms,
    )
    out.mkdir(parents=True, exist_ok=True)
    if pages:
        links = []
        for role, page in pages.items():
            write_viewer(Path(runs[role]), out / page, max_episodes=viewer_max_episodes)
            links.append((f"{role}: {run_name(runs[role])}", page))
        for a, b in side_by_side:
            if a in pages and b in pages:
                page = f"viewer/{a}-vs-{b}.html"
                write_compare(
                    Path(runs[a]), Path(runs[b]), out / page, max_units=viewer_max_episodes
                )
                links.append((f"{a} and {b} side by side, on the same (task, seed)", page))
        rep.document.sections.append(
            Section(
                "Trajectory viewers",
                [
                    Links(links),
                    Para(
                        "Each viewer holds the report's split (test where the run has it); "
                        "`rmsweb view <run> --split val` writes one of another split."
                    ),
                ],
            )
        )
    plots_dir = out / "plots"
    plots_dir.mkdir(exist_ok=True)
    for fig in rep.document.figures():
        (plots_dir / f"{fig.name}.png").write_bytes(fig.png)
    (out / "report.md").write_text(to_markdown(rep.document), encoding="utf-8")
    (out / "report.html").write_text(to_html(rep.document), encoding="utf-8")
    return rep
