"""Steps on solved episodes, task by task, for each comparison of two SFT arms.

The paper's claim about reflection data is about steps: a policy trained on it takes
fewer steps on the tasks it solves. The arms section gives that ratio over all tasks;
this section breaks it down per task and pools the multi-step tasks apart (MiniWoB
tasks whose expert takes 3 steps or more on average, rmsweb.suites.miniwob_experts.
gold), because a detour only has room to cost on those: on a 1-step task a solved
episode cannot be shorter than 1 step.

Which comparisons: those of the arms section (the spec's report.comparisons, else its
default) whose two arms are both SFT policies (`<experiment>/sft`): SFT on one
collection against SFT on another is the data comparison the claim is about. A report
without one has no section.

Every number is rmsweb.report.arms on the episodes of the task or the task group:
`summarize` for each arm's success and mean steps over all its solved episodes, and
`paired_difference` (definition 6) for the steps of A over B minus 1 on the (task, test
seed) units both solved, with its unit bootstrap and its t-interval over the per-seed
ratios. A is called shorter when both intervals lie below 0 (the bootstrap alone with
fewer than two seed pairs), as the arms section calls an arm better.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rmsweb.report.arms import ArmSummary, Difference, Episode, paired_difference, summarize
from rmsweb.report.document import Para, Section, Table
from rmsweb.report.tables import num, pct
from rmsweb.suites.miniwob_experts.gold import GOLD_STEPS, MULTI_STEP

# Said in words under every table: with the scripted teacher the effect is set, not found.
SIMULATOR = (
    "With the scripted teacher (offline suites), the size of the effect is the "
    "simulator's: the steps reflection data saves follow from the teacher's habit rate "
    "(collect.teacher.habits: wasted steps it takes in the same states every time), its "
    "detour rate and its adherence to reflections, which the spec sets; they measure "
    "that the recipe carries a saving in the data into the trained policy, not how much "
    "an LLM teacher wastes. At habit rate 0 or adherence 0 there is nothing for "
    "reflection to remove that blind retries do not (the retry study's habit-rate and "
    "adherence sweeps)."
)

MULTI = "multi-step tasks"
OTHER = "other tasks"
ALL = "all tasks"
GROUP_KEYS = {MULTI: "multi_step", OTHER: "other", ALL: "all"}


@dataclass(frozen=True)
class StepsRow:
    """One task or task group of a comparison A − B."""

    name: str  # a task id or one of MULTI / OTHER / ALL
    tasks: int
    gold: float | None  # the expert's mean steps (a task row of a MiniWoB task)
    a: ArmSummary
    b: ArmSummary
    diff: Difference

    @property
    def verdict(self) -> str:
        return steps_verdict(self.diff)


def is_sft_arm(arm: str) -> bool:
    return arm.rsplit("/", 1)[-1] == "sft"


def steps_verdict(d: Difference) -> str:
    """Who is shorter on solved episodes: both intervals on one side of 0 (module doc)."""
    if d.steps_ratio is None or d.steps_low is None or d.steps_high is None:
        return "no unit solved by both"
    seed_low, seed_high = d.steps_seed_low, d.steps_seed_high
    if d.steps_high < 0 and (seed_high is None or seed_high < 0):
        return "A shorter"
    if d.steps_low > 0 and (seed_low is None or seed_low > 0):
        return "B shorter"
    return "no difference shown"


def _row(
    name: str, tasks: set[str], a: str, b: str, eps_a: Sequence[Episode], eps_b: Sequence[Episode]
) -> StepsRow | None:
    sub_a = [e for e in eps_a if e.task_id in tasks]
    sub_b = [e for e in eps_b if e.task_id in tasks]
    if (
        not sub_a
        or not sub_b
        or not {(e.task_id, e.seed) for e in sub_a} & {(e.task_id, e.seed) for e in sub_b}
    ):
        return None
    gold = GOLD_STEPS.get(name) if len(tasks) == 1 else None
    return StepsRow(
        name,
        len(tasks),
        gold,
        summarize(a, sub_a),
        summarize(b, sub_b),
        paired_difference(a, b, sub_a, sub_b),
    )


def steps_rows(
    a: str, b: str, episodes_a: Sequence[Episode], episodes_b: Sequence[Episode]
) -> list[StepsRow]:
    """The groups (multi-step, other, all; a group without tasks left out), then every
    task: multi-step tasks first, longest gold first."""
    tasks = {e.task_id for e in episodes_a} & {e.task_id for e in episodes_b}
    multi = tasks & set(MULTI_STEP)
    groups = [(MULTI, multi), (OTHER, tasks - multi), (ALL, tasks)]
    order = sorted(tasks, key=lambda t: (t not in multi, -GOLD_STEPS.get(t, 0.0), t))
    rows = [_row(name, ts, a, b, episodes_a, episodes_b) for name, ts in groups if ts]
    rows += [_row(t, {t}, a, b, episodes_a, episodes_b) for t in order]
    return [r for r in rows if r is not None]


def _signed_pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:+.1f}%"


def _interval(low: float | None, high: float | None) -> str:
    return "—" if low is None or high is None else f"[{100 * low:+.1f}, {100 * high:+.1f}]"


def _table(rows: Sequence[StepsRow]) -> Table:
    out = []
    for r in rows:
        d = r.diff
        name = f"{r.name} ({r.tasks})" if r.name in GROUP_KEYS else r.name
        out.append(
            [
                name,
                num(r.gold, 2),
                pct(r.a.mean),
                pct(r.b.mean),
                num(r.a.steps_solved, 2),
                num(r.b.steps_solved, 2),
                str(d.steps_units),
                _signed_pct(d.steps_ratio),
                _interval(d.steps_low, d.steps_high),
                " / ".join(f"{100 * x:+.1f}" for _, x in d.steps_per_seed) or "—",
                _interval(d.steps_seed_low, d.steps_seed_high),
                r.verdict,
            ]
        )
    return Table(
        [
            "Tasks",
            "Gold steps",
            "Success A",
            "Success B",
            "Steps A (solved)",
            "Steps B (solved)",
            "Units both solved",
            "Steps A vs B",
            "95% CI (units)",
            "Per seed (%)",
            "95% CI over seeds",
            "Verdict",
        ],
        out,
        ["left", *["right"] * 10, "left"],
    )


def _headline(rows: Sequence[StepsRow]) -> str:
    """One sentence on the multi-step group (all tasks when there is none)."""
    by_name = {r.name: r for r in rows}
    r = by_name.get(MULTI) or by_name.get(ALL)
    if r is None or r.diff.steps_ratio is None:
        return "No (task, test seed) unit was solved by both arms."
    d = r.diff
    return (
        f"On the {r.name} ({r.tasks}), A's solved episodes take {_signed_pct(d.steps_ratio)} "
        f"steps against B's on the {d.steps_units} units both solved (95% CI over seeds "
        f"{_interval(d.steps_seed_low, d.steps_seed_high)}, over units "
        f"{_interval(d.steps_low, d.steps_high)}): {r.verdict}."
    )


def _metrics(metrics: dict[str, Any], a: str, b: str, rows: Sequence[StepsRow]) -> None:
    for r in rows:
        if r.name not in GROUP_KEYS:
            continue
        key = f"steps/{a}-vs-{b}/{GROUP_KEYS[r.name]}"
        d = r.diff
        values = {
            "success_a": r.a.mean,
            "success_b": r.b.mean,
            "steps_a": r.a.steps_solved,
            "steps_b": r.b.steps_solved,
            "units_both_solved": d.steps_units,
            "steps_ratio": d.steps_ratio,
            "ci_low": d.steps_low,
            "ci_high": d.steps_high,
            "seed_ci_low": d.steps_seed_low,
            "seed_ci_high": d.steps_seed_high,
        }
        for name, value in values.items():
            if value is not None:
                metrics[f"{key}/{name}"] = round(value, 4) if isinstance(value, float) else value


def steps_section(
    metrics: dict[str, Any],
    episodes: Sequence[Episode],
    pairs: Sequence[tuple[str, str]],
    labels: Mapping[str, str],
) -> Section | None:
    """The section for the (a, b) arm pairs that are both SFT arms; None without one.
    `labels`: arm id -> the arms table's label; `metrics` gains steps/<a>-vs-<b>/<group>/*."""
    by_arm: dict[str, list[Episode]] = {}
    for e in episodes:
        by_arm.setdefault(e.arm, []).append(e)
    sft_pairs = [
        (a, b) for a, b in pairs if is_sft_arm(a) and is_sft_arm(b) and a in by_arm and b in by_arm
    ]
    if not sft_pairs:
        return None
    sec = Section("Steps on solved episodes per task (SFT arms, test split)")
    for a, b in sft_pairs:
        rows = steps_rows(a, b, by_arm[a], by_arm[b])
        _metrics(metrics, a, b, rows)
        sec.blocks += [
            Para(f"A = {labels.get(a, a)} ({a}); B = {labels.get(b, b)} ({b}). {_headline(rows)}"),
            _table(rows),
        ]
    sec.blocks.append(
        Para(
            "Multi-step tasks: gold steps >= 3, the scripted expert's mean episode length "
            "on the test seeds; the comparison the steps claim is about, since a 1-2 step "
            "task leaves no room for a detour. Success: mean over training seeds (tasks "
            "weigh equally). Steps (solved): mean steps of each arm's solved episodes. "
            "Steps A vs B: mean steps of A over B on the (task, test seed) units both "
            "solved, minus 1 (negative: A is shorter); 95% CI (units): bootstrap over those "
            "units; per seed: the same on seed k of A and seed k of B; 95% CI over seeds: "
            "t-interval of the per-seed values (the spread of training runs). Verdict: A "
            "(or B) shorter when both intervals lie on one side of 0."
        )
    )
    sec.blocks.append(Para(SIMULATOR))
    return sec
