"""Is the recipe in its regime? Headroom, reach and length per task, from the regime stages.

Each training seed's regime stage (rmsweb/regime) writes its numbers to its metrics
file: per task and pooled, the expert's and the greedy SFT policy's val success, the
headroom (their difference), the expert's mean steps, and the reach (the SFT policy's
pass@G at the RL temperature) on the mined failure states and on fresh val failure
states, as counts. The report reads those files (`stages`, role regime-s<k>), nothing
from the run tables.

Over training seeds: success, headroom and steps are means over the seeds; reach is
the pooled count (states reached over states probed, every seed's together) with the
Wilson interval of that count. RL on top of cloning pays where the headroom is large
and the policy can sample the right action where it fails: the issue asks for reach
>= 60% on val failure states and a suite whose expert takes >= 3 steps on average.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rmsweb.report.document import Para, Section, Table
from rmsweb.report.pipeline import StageRecord
from rmsweb.report.tables import num, pct
from rmsweb.store.stats import wilson_interval

KIND = "regime"
POOLED = "pooled"
REACH_TARGET = 0.60  # reach on val failure states the regime needs (the threshold)
LENGTH_TARGET = 3.0  # the expert's mean steps of the suite the issue asks for
MEANS = ("expert_success_val", "sft_success_val", "headroom", "expert_steps")
REACHES = (
    "reach_mined",
    "reach_val",
    "reach_val_first",
    "reach_mined_target",
    "reach_val_target",
)


def regime_records(stages: Mapping[str, StageRecord]) -> list[StageRecord]:
    """This experiment's regime stages that wrote their metrics, in seed order."""
    found = [r for r in stages.values() if r.kind == KIND and r.own and r.metrics.get(POOLED)]
    return sorted(found, key=lambda r: (r.metrics.get("seed") is None, r.metrics.get("seed", 0)))


def _mean(values: list[Any]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def combine(per_seed: list[Mapping[str, Any]]) -> dict[str, Any]:
    """One task's (or the pool's) values over seeds: means, and reach as pooled counts."""
    out: dict[str, Any] = {k: _mean([m.get(k) for m in per_seed]) for k in MEANS}
    for key in REACHES:
        reached = sum(m.get(f"{key}_reached") or 0 for m in per_seed)
        states = sum(m.get(f"{key}_states") or 0 for m in per_seed)
        low, high = wilson_interval(reached, states) if states else (None, None)
        out |= {
            key: reached / states if states else None,
            f"{key}_reached": reached,
            f"{key}_states": states,
            f"{key}_ci_low": low,
            f"{key}_ci_high": high,
        }
    return out


def _reach_cell(v: Mapping[str, Any], key: str) -> str:
    if not v[f"{key}_states"]:
        return "— (0 states)"
    low, high = v[f"{key}_ci_low"], v[f"{key}_ci_high"]
    return f"{pct(v[key])} of {v[f'{key}_states']} [{100 * low:.0f}, {100 * high:.0f}]"


def _signed(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:+.1f}"


def _row(name: str, v: Mapping[str, Any]) -> list[str]:
    return [
        name,
        pct(v["expert_success_val"]),
        pct(v["sft_success_val"]),
        _signed(v["headroom"]),
        _reach_cell(v, "reach_val"),
        _reach_cell(v, "reach_val_first"),
        _reach_cell(v, "reach_mined"),
        _reach_cell(v, "reach_val_target"),
        _reach_cell(v, "reach_mined_target"),
        num(v["expert_steps"], 2),
    ]


def _metrics(metrics: dict[str, Any], name: str, v: Mapping[str, Any]) -> None:
    for key, value in v.items():
        if value is not None:
            metrics[f"regime/{name}/{key}"] = round(value, 4) if isinstance(value, float) else value


def _verdict(pooled: Mapping[str, Any]) -> str:
    reach, length = pooled["reach_val"], pooled["expert_steps"]
    parts = []
    if reach is not None:
        side = "meets" if reach >= REACH_TARGET else "is below"
        parts.append(
            f"pooled reach on val failure states is {pct(reach)} ({pooled['reach_val_reached']} "
            f"of {pooled['reach_val_states']}): it {side} the {pct(REACH_TARGET, 0)} the regime "
            "needs"
        )
    if length is not None:
        side = "at least" if length >= LENGTH_TARGET else "under"
        parts.append(
            f"the expert takes {num(length, 2)} steps per task on average, {side} the "
            f"{num(LENGTH_TARGET, 0)} of a multi-step suite"
        )
    if pooled["headroom"] is not None:
        parts.append(f"SFT sits {_signed(pooled['headroom'])} points below the expert on val")
    return ("In short: " + "; ".join(parts) + ".") if parts else ""


def regime_section(metrics: dict[str, Any], stages: Mapping[str, StageRecord]) -> Section | None:
    """The section over this experiment's regime stages; None without one. `metrics`
    gains regime/<task>/<key> and regime/pooled/<key> (means and pooled counts)."""
    records = regime_records(stages)
    if not records:
        return None
    first = records[0].metrics
    seeds = [r.metrics.get("seed") for r in records]
    tasks = sorted({t for r in records for t in r.metrics.get("per_task", {})})
    rows = []
    for task in tasks:
        v = combine([r.metrics["per_task"][task] for r in records if task in r.metrics["per_task"]])
        _metrics(metrics, task, v)
        rows.append(_row(task, v))
    pooled = combine([r.metrics[POOLED] for r in records])
    _metrics(metrics, POOLED, pooled)
    rows.append(_row(f"pooled ({len(tasks)} tasks)", pooled))
    g, t = first.get("group_size"), first.get("temperature")
    sec = Section("Regime: headroom, reach and length (val, before RL)")
    sec.blocks += [
        Table(
            [
                "Task",
                "Expert (val)",
                "SFT greedy (val)",
                "Headroom (points)",
                "Reach, val failure states",
                "Reach, val first failures",
                "Reach, mined states",
                "On target, val failure states",
                "On target, mined states",
                "Expert steps",
            ],
            rows,
            ["left", *["right"] * 9],
        ),
        Para(
            f"Training seeds {', '.join(str(s) for s in seeds)}; "
            f"{first.get('val_seeds_per_task')} val seeds per task; G = {g} samples at "
            f"temperature {t} (rl.group_size, rl.temperature). Headroom: the scripted "
            "expert's val success minus the SFT policy's (greedy), in points; pooled, the "
            "mean over tasks, and over seeds. Reach: the share of failure states where at "
            "least one of the G samples of the SFT policy is acceptable by RL's reward "
            "(pass@G: the states where RL's group can contain a right action), with the "
            "number of states and the 95% Wilson interval of the count (seeds pooled). "
            "Val failure states: the states of the greedy SFT policy's val episodes where "
            "its action is not acceptable, labelled by the expert as mining labels; first "
            "failures: those that are their episode's first wrong step (the rest follow an "
            "earlier error, a recovery the demonstrations never show); mined "
            "states: the critical and fragile states RL trains on. On target: the same share "
            "with a sample counted when it has a right action's type and element, whatever "
            "value it types; far above reach, the policy finds the field and fails on the "
            "value (copying), not on the element. Expert steps: mean steps "
            "of the expert's successful val episodes. RL on top of SFT has room to pay where "
            "the headroom is large and reach is high; the regime the recipe is built for "
            f"asks for reach >= {pct(REACH_TARGET, 0)} on val failure states on a suite whose "
            f"expert takes >= {num(LENGTH_TARGET, 0)} steps on average. {_verdict(pooled)}"
        ),
    ]
    return sec
