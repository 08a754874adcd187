"""The report's arms section: each arm's test success over training seeds, and paired
differences between arms (the paper-table view). Numbers come from rmsweb.report.arms;
this module only fetches episodes, picks rows and renders."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmsweb.report import plots
from rmsweb.report.arms import (
    ArmSummary,
    Difference,
    Episode,
    arm_of_run,
    group_by_arm,
    paired_difference,
    summarize,
)
from rmsweb.report.document import Figure, Para, Section, Table
from rmsweb.report.tables import pct

if TYPE_CHECKING:
    import duckdb

SPLIT = "test"  # every number of this section is on the held-out test split

EPISODES_SQL = """
SELECT run, task_id, seed, success AND error IS NULL AS success, n_steps
FROM episodes WHERE stage = 'eval' AND split = '{split}'
"""


def experiment_of_role(role: str, experiment: str) -> str:
    """A compared experiment's inputs are named `<experiment>.<role>`; ours have no prefix."""
    return role.split(".", 1)[0] if "." in role else experiment


def arm_episodes(
    con: duckdb.DuckDBPyConnection,
    runs: Mapping[str, Path],
    experiment: str,
    split: str = SPLIT,
) -> list[Episode]:
    from rmsweb.store.layout import run_name

    arm_of: dict[str, tuple[str, int | None]] = {}
    for role, path in runs.items():
        parts = Path(path).parts
        if "eval" in parts:
            arm_of[run_name(path)] = arm_of_run(parts, experiment_of_role(role, experiment))
    out = []
    for run, task, seed, success, steps in con.execute(EPISODES_SQL.format(split=split)).fetchall():
        if run in arm_of:
            arm, train_seed = arm_of[run]
            out.append(Episode(arm, train_seed, task, int(seed), bool(success), int(steps)))
    return out


def _interval(low: float | None, high: float | None) -> str:
    return "—" if low is None or high is None else f"[{100 * low:.1f}, {100 * high:.1f}]"


def _signed(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:+.1f}"


def _resolve(name: str, labels: Mapping[str, str]) -> str:
    """An arm id from a label or an id."""
    by_label = {label: arm for arm, label in labels.items()}
    return by_label.get(name, name)


def _default_labels(arms: Sequence[str]) -> dict[str, str]:
    """The policy name when every arm is of one experiment, else <experiment>/<policy>."""
    one_experiment = len({arm.rsplit("/", 1)[0] for arm in arms}) == 1
    return {arm: arm.rsplit("/", 1)[1] if one_experiment else arm for arm in arms}


def default_comparisons(arms: Sequence[str]) -> list[tuple[str, str]]:
    """rl - sft of each experiment that evaluates both."""
    pairs = []
    for arm in arms:
        exp, policy = arm.rsplit("/", 1)
        if policy == "rl" and f"{exp}/sft" in arms:
            pairs.append((arm, f"{exp}/sft"))
    return pairs


def arms_section(
    rep: Any,
    episodes: Sequence[Episode],
    rows: Sequence[tuple[str, str]] = (),
    comparisons: Sequence[tuple[str, str]] = (),
) -> Section:
    """`rows`: (label, arm) in table order (empty: every arm); `comparisons`: (a, b) by
    label or arm id (empty: rl - sft per experiment)."""
    sec = Section("Arms over training seeds (test split)")
    by_arm = group_by_arm(episodes)
    if not by_arm:
        sec.blocks.append(Para("No eval episodes on the test split in this report's inputs.", True))
        return sec
    labels = {arm: label for label, arm in rows} or _default_labels(list(by_arm))
    missing = [arm for arm in labels if arm not in by_arm]
    if missing:
        sec.blocks.append(
            Para(f"Not evaluated in this report's inputs: {', '.join(missing)}.", note=True)
        )
    order = [arm for arm in labels if arm in by_arm]
    summaries = {arm: summarize(arm, by_arm[arm]) for arm in order}
    sec.blocks += [
        _summary_table(summaries, labels),
        Para(
            "Success: test split, mean over training seeds of each seed's success (tasks "
            "weigh equally). 95% CI over seeds: t-interval of the per-seed successes (none "
            "with one seed). Pooled: Wilson interval of all episodes of all seeds together "
            "(ignores the spread between training runs, so it is narrower)."
        ),
        Figure(
            "arms",
            plots.arms_plot([(labels[arm], summary) for arm, summary in summaries.items()]),
            "Test success per arm (bars: 95% CI over seeds, else pooled Wilson)",
        ),
    ]
    pairs = [(_resolve(a, labels), _resolve(b, labels)) for a, b in comparisons] or (
        default_comparisons(order)
    )
    diffs = [
        paired_difference(a, b, by_arm[a], by_arm[b])
        for a, b in pairs
        if a in by_arm and b in by_arm
    ]
    if diffs:
        sec.blocks += [
            _difference_table(diffs, labels),
            Para(
                "A − B: paired over the (task, test seed) units both arms ran, each unit "
                "averaged over the arm's training seeds, tasks weighing equally; 95% CI: "
                "bootstrap over units within tasks (2,000 resamples), which holds the training "
                "runs fixed. Per seed: seed k of A minus seed k of B on the same units (a "
                "one-run arm pairs with every seed); 95% CI over seeds: t-interval of those, "
                "the spread of training runs. An arm is called better only when both intervals "
                "exclude 0 (the unit interval alone with one seed). Steps on solved: mean steps "
                "of A over B on the units both solved, minus 1 (negative: A is shorter), "
                "with the unit bootstrap; per seed: the same on each seed pair's units, "
                "with a t-interval over seeds."
            ),
        ]
    for arm, s in summaries.items():
        rep.metrics[f"arm/{arm}/success"] = round(s.mean, 4)
        rep.metrics[f"arm/{arm}/seeds"] = len(s.seeds)
        if s.seed_low is not None:
            rep.metrics[f"arm/{arm}/seed_ci_low"] = round(s.seed_low, 4)
            rep.metrics[f"arm/{arm}/seed_ci_high"] = round(s.seed_high or 0.0, 4)
    for d in diffs:
        key = f"diff/{d.a}-vs-{d.b}"
        rep.metrics[f"{key}/success"] = round(d.diff, 4)
        rep.metrics[f"{key}/ci_low"] = round(d.low, 4)
        rep.metrics[f"{key}/ci_high"] = round(d.high, 4)
        if d.seed_low is not None and d.seed_high is not None:
            rep.metrics[f"{key}/seed_ci_low"] = round(d.seed_low, 4)
            rep.metrics[f"{key}/seed_ci_high"] = round(d.seed_high, 4)
        if d.steps_ratio is not None:
            rep.metrics[f"{key}/steps_ratio"] = round(d.steps_ratio, 4)
        if d.steps_seed_low is not None and d.steps_seed_high is not None:
            rep.metrics[f"{key}/steps_seed_ci_low"] = round(d.steps_seed_low, 4)
            rep.metrics[f"{key}/steps_seed_ci_high"] = round(d.steps_seed_high, 4)
    rep.arm_summaries, rep.differences = summaries, diffs
    return sec


def _summary_table(summaries: Mapping[str, ArmSummary], labels: Mapping[str, str]) -> Table:
    rows = []
    for arm, s in summaries.items():
        seeds = ", ".join("—" if x is None else str(x) for x in s.seeds)
        rows.append(
            [
                labels[arm],
                arm,
                seeds,
                pct(s.mean),
                _interval(s.seed_low, s.seed_high),
                _interval(s.pooled_low, s.pooled_high),
                " / ".join(pct(x, 0) for x in s.per_seed),
                f"{s.steps_solved:.2f}" if s.steps_solved is not None else "—",
            ]
        )
    return Table(
        [
            "Arm",
            "Experiment/policy",
            "Seeds",
            "Success",
            "95% CI over seeds",
            "Pooled 95% CI",
            "Per seed",
            "Steps (solved)",
        ],
        rows,
        ["left", "left", "left", "right", "right", "right", "right", "right"],
    )


def _difference_table(diffs: Sequence[Difference], labels: Mapping[str, str]) -> Table:
    rows = [
        [
            f"{labels.get(d.a, d.a)} − {labels.get(d.b, d.b)}",
            str(d.units),
            _signed(d.diff),
            f"[{100 * d.low:+.1f}, {100 * d.high:+.1f}]",
            " / ".join(_signed(x) for _, x in d.per_seed) or "—",
            _signed_interval(d.seed_low, d.seed_high),
            d.verdict.replace(d.a, labels.get(d.a, d.a)).replace(d.b, labels.get(d.b, d.b)),
            _signed(d.steps_ratio) + ("%" if d.steps_ratio is not None else ""),
            _interval(d.steps_low, d.steps_high),
            " / ".join(_signed(x) for _, x in d.steps_per_seed) or "—",
            _signed_interval(d.steps_seed_low, d.steps_seed_high),
        ]
        for d in diffs
    ]
    return Table(
        [
            "A − B",
            "Units",
            "Success diff (points)",
            "95% CI",
            "Per seed",
            "95% CI over seeds",
            "Verdict",
            "Steps on solved",
            "95% CI",
            "Steps per seed (%)",
            "95% CI over seeds",
        ],
        rows,
        ["left", "right", "right", "right", "right", "right", "left"] + ["right"] * 4,
    )


def _signed_interval(low: float | None, high: float | None) -> str:
    return "—" if low is None or high is None else f"[{100 * low:+.1f}, {100 * high:+.1f}]"
