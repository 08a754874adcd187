"""The report's failure-mode mining section: what the mine stage found, and how fast.

Computing is apart from rendering: `mining_data` runs the queries (rows by name),
`mine_section` renders them and records the section's metrics and plot data.

- States by source (critical, fragile, routine) and failure mode, with their total
  weight and how many tasks they come from.
- The SFT policy's rollouts: how many, their success rate (the SFT policy sampled at
  mine.temperature on train seeds, so not the eval number), and rollouts per second
  over the run's wall-clock span (first start to last end; a resumed run's pause
  counts in it).
- Per task, the failure rate of the mining rollouts beside the greedy SFT policy's on
  val (the eval of the checkpoint that was mined, matched by training seed): a
  temperature or seed range that mines a different policy from the one evaluated shows
  as a large gap at once.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from rmsweb.report import plots
from rmsweb.report.document import Figure, Para, Section, Table
from rmsweb.report.queries import fetch
from rmsweb.report.tables import num, pct

if TYPE_CHECKING:
    import duckdb

SOURCES = ("critical", "fragile", "routine")
COLORS = {"critical": "#c44e52", "fragile": "#dd8452", "routine": "#8c8c8c"}


def mining_data(con: duckdb.DuckDBPyConnection) -> dict[str, list[dict[str, Any]]]:
    states = fetch(
        con,
        """
        SELECT run, coalesce(source, 'routine') AS source,
               coalesce(failure_mode, 'routine') AS failure_mode,
               count(*) AS states, sum(weight) AS weight, count(DISTINCT task_id) AS tasks
        FROM mined_states
        GROUP BY ALL ORDER BY run, states DESC, source, failure_mode
        """,
    )
    rollouts = fetch(
        con,
        """
        SELECT run, count(*) AS episodes,
               count(*) FILTER (WHERE success) AS successes,
               count(*) FILTER (WHERE error IS NOT NULL) AS env_errors,
               max(started_at + wall_s) - min(started_at) AS span_s
        FROM episodes WHERE stage = 'mine'
        GROUP BY run ORDER BY run
        """,
    )
    per_task = fetch(
        con,
        """
        SELECT run, task_id, count(*) AS episodes,
               count(*) FILTER (WHERE NOT success) AS failures
        FROM episodes
        WHERE stage = 'mine' OR (stage = 'eval' AND split = 'val' AND run LIKE '%/sft/%')
        GROUP BY ALL ORDER BY run, task_id
        """,
    )
    return {"states": states, "rollouts": rollouts, "per_task": per_task}


def _owner_seed(run: str) -> tuple[str, str]:
    """("miniwob-cpu", "s0") of mine/miniwob-cpu/s0 and of eval/miniwob-cpu/sft/s0."""
    parts = run.split("/")
    return parts[1], parts[-1]


def task_gaps(per_task: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (mine run, task): its rollouts' failure rate and the greedy SFT policy's on val
    (the sft eval run of the same owner and training seed folder, e.g. miniwob-cpu and s0:
    another experiment's SFT, say one trained on plain data, is another policy); val None
    when absent."""
    mine = [r for r in per_task if r["run"].startswith("mine/")]
    val = {
        (*_owner_seed(r["run"]), r["task_id"]): r for r in per_task if r["run"].startswith("eval/")
    }
    out = []
    for r in mine:
        v = val.get((*_owner_seed(r["run"]), r["task_id"]))
        out.append(
            {
                "run": r["run"],
                "task_id": r["task_id"],
                "rollouts": r["episodes"],
                "mine_failure": r["failures"] / r["episodes"],
                "val_episodes": v["episodes"] if v else 0,
                "val_failure": v["failures"] / v["episodes"] if v else None,
            }
        )
    return out


def _key(run: str, several: bool, name: str) -> str:
    run = run.removeprefix("mine/")
    return f"mine/{run}/{name}" if several else f"mine/{name}"


def mine_section(rep: Any, data: dict[str, list[dict[str, Any]]]) -> Section:
    """The section; fills rep.metrics and rep.plot_data["failure_modes.csv"]."""
    sec = Section("Failure-mode mining")
    states, rollouts = data["states"], data["rollouts"]
    if not states:
        sec.blocks.append(
            Para(
                "No mined_states rows in this report's inputs, so no mined failure modes: the "
                "experiment has no mine run upstream of its evaluated policies, or it wrote "
                "nothing.",
                note=True,
            )
        )
        return sec
    runs = list(dict.fromkeys(s["run"] for s in states))
    several = len(runs) > 1
    totals: dict[str, int] = defaultdict(int)
    for s in states:
        totals[s["run"]] += s["states"]
    sec.blocks.append(
        Table(
            ["Run", "Source", "Failure mode", "States", "Share", "Total weight", "Tasks"],
            [
                [
                    s["run"],
                    s["source"],
                    s["failure_mode"],
                    str(s["states"]),
                    pct(s["states"] / totals[s["run"]]),
                    num(s["weight"], 1),
                    str(s["tasks"]),
                ]
                for s in states
            ],
            ["left", "left", "left", "right", "right", "right", "right"],
        )
    )
    sec.blocks.append(
        Para(
            "critical: the first step of a failed or detoured rollout whose action was not "
            "acceptable; fragile: a state where the policy's sampled actions disagreed and some "
            "were not acceptable (weight: the wrong share); routine: states of the SFT data "
            "mixed in so RL does not forget them."
        )
    )
    if rollouts:
        sec.blocks.append(
            Table(
                ["Run", "Rollouts", "SFT success", "Env errors", "Rollouts / s"],
                [
                    [
                        r["run"],
                        str(r["episodes"]),
                        pct(r["successes"] / r["episodes"]),
                        str(r["env_errors"]),
                        num(r["episodes"] / r["span_s"], 2) if r["span_s"] else "—",
                    ]
                    for r in rollouts
                ],
                ["left", "right", "right", "right", "right"],
            )
        )
    gaps = task_gaps(data.get("per_task", []))
    if gaps:
        sec.blocks.append(_gap_table(gaps, several))
        sec.blocks.append(
            Para(
                "The policy that was mined against the one evaluated: per task, the failure "
                "rate of the mining rollouts (mine.temperature, the suite's mine seeds) and "
                "of the greedy SFT policy on val. A large gap means RL trains on another "
                "policy's mistakes."
            )
        )
    sec.blocks.append(
        Figure("failure_modes", mining_plot(states), "Mined states per failure mode and source")
    )
    _record(rep, runs, several, states, rollouts, totals)
    for g in gaps:
        key = _key(g["run"], several, f"task/{g['task_id']}")
        rep.metrics[f"{key}/mine_failure"] = round(g["mine_failure"], 4)
        if g["val_failure"] is not None:
            rep.metrics[f"{key}/val_failure"] = round(g["val_failure"], 4)
    return sec


def _gap_table(gaps: list[dict[str, Any]], several: bool) -> Table:
    head = ["Run"] if several else []
    rows = []
    for g in gaps:
        v = g["val_failure"]
        rows.append(
            [
                *([g["run"]] if several else []),
                g["task_id"],
                str(g["rollouts"]),
                pct(g["mine_failure"]),
                "—" if v is None else pct(v),
                "—" if v is None else f"{100 * (g['mine_failure'] - v):+.1f}",
            ]
        )
    return Table(
        [
            *head,
            "Task",
            "Mining rollouts",
            "Failing (mining)",
            "Failing (greedy, val)",
            "Gap (pts)",
        ],
        rows,
        [*(["left"] if several else []), "left", "right", "right", "right", "right"],
    )


def _record(
    rep: Any,
    runs: list[str],
    several: bool,
    states: list[dict[str, Any]],
    rollouts: list[dict[str, Any]],
    totals: dict[str, int],
) -> None:
    by_mode: dict[tuple[str, str], list[float]] = {}
    for run in runs:
        rs = [s for s in states if s["run"] == run]
        rep.metrics[_key(run, several, "states")] = totals[run]
        for source in SOURCES:
            n = sum(s["states"] for s in rs if s["source"] == source)
            rep.metrics[_key(run, several, source)] = n
        for s in rs:
            cur = by_mode.setdefault((run, s["failure_mode"]), [0, 0.0])
            cur[0] += s["states"]
            cur[1] += s["weight"]
        for (r, mode), (n, _) in by_mode.items():
            if r == run:
                rep.metrics[_key(run, several, f"mode/{mode}")] = n
    for ro in rollouts:
        rep.metrics[_key(ro["run"], several, "sft_success")] = ro["successes"] / ro["episodes"]
        if ro["span_s"]:
            rep.metrics[_key(ro["run"], several, "rollouts_per_s")] = ro["episodes"] / ro["span_s"]
    rep.plot_data["failure_modes.csv"] = [
        [run, mode, n, weight] for (run, mode), (n, weight) in by_mode.items()
    ]


def mining_plot(states: list[dict[str, Any]]) -> bytes:
    """Horizontal bars per (run,) failure mode, stacked by source."""
    runs = list(dict.fromkeys(s["run"] for s in states))
    labels = list(
        dict.fromkeys(
            s["failure_mode"] + (f" ({s['run']})" if len(runs) > 1 else "") for s in states
        )
    )[::-1]
    fig, ax = plots._figure(6.5, 0.9 + 0.35 * len(labels))
    left = [0] * len(labels)
    for source in SOURCES:
        counts = [0] * len(labels)
        for s in states:
            if s["source"] == source:
                label = s["failure_mode"] + (f" ({s['run']})" if len(runs) > 1 else "")
                counts[labels.index(label)] += s["states"]
        if any(counts):
            ax.barh(labels, counts, left=left, color=COLORS[source], label=source)
            left = [a + b for a, b in zip(left, counts, strict=True)]
    ax.set_xlabel("mined states")
    ax.legend(fontsize=8, loc="lower right")
    plots._style(ax)
    return plots._png(fig)
