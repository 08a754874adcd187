"""The report's "Val success per RL checkpoint" section, from the evalckpt stages' curves.

Each evalckpt stage (rmsweb/evalckpt, one per experiment, rl policy and training seed)
wrote a curve beside its metrics file: val success of SFT (step 0) and of the policy at
every RL checkpoint. The section draws the mean over training seeds with each seed's
line, and tabulates it per step. Its inputs are named `evalckpt-<policy>-s<seed>` (this
experiment's) or `<experiment>.evalckpt-<policy>-s<seed>` (a `report.compare` one, such
as the canary, whose curve must fall where the recipe's rises).

Those runs' episodes (stage `evalckpt`, val split, policy `<policy>-step-<N>`) stay out
of the report's eval tables, which read stage `eval` only; the stages table counts them,
and they get no viewer page (`is_curve_role`; `rmsweb view <run> --split val` shows one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rmsweb.report import plots
from rmsweb.report.document import Figure, Para, Section, Table
from rmsweb.report.tables import pct

KIND = "evalckpt"  # the stage kind (rmsweb/stages.py) and its roles' prefix
CURVE_FILE = "curve.csv"  # its plot file: step, success, ci_low, ci_high, successes, episodes
SPLIT = "val"  # the split every evalckpt stage plays (rmsweb/evalckpt/curve.py)

# arm label (<experiment>/<policy>) -> training seed -> step -> val success
Curves = dict[str, dict[int, dict[int, float]]]


def is_curve_role(role: str) -> bool:
    """An input of an evalckpt stage (this experiment's or a compared one's)."""
    return role.rpartition(".")[2].startswith(KIND + "-")


def _arm_and_seed(role: str, experiment: str) -> tuple[str, int]:
    """'evalckpt-rl-s1' -> ('<experiment>/rl', 1); 'x.evalckpt-rl-s0' -> ('x/rl', 0)."""
    other, _, own = role.rpartition(".")
    policy, _, seed = own.removeprefix(KIND + "-").rpartition("-s")
    return f"{other or experiment}/{policy}", int(seed)


def group_curves(curves: Mapping[str, list[dict]], experiment: str) -> Curves:
    """Role -> CSV rows, regrouped by arm and seed (this experiment's arms first)."""
    out: Curves = {}
    own_first = sorted(curves, key=lambda role: ("." in role, role))
    for role in own_first:
        arm, seed = _arm_and_seed(role, experiment)
        points = {int(r["step"]): float(r["success"]) for r in curves[role] if "success" in r}
        if points:
            out.setdefault(arm, {})[seed] = points
    return out


def mean_curve(seeds: Mapping[int, Mapping[int, float]]) -> dict[int, float]:
    """Step -> mean over the seeds that have that step."""
    steps = sorted({s for points in seeds.values() for s in points})
    return {
        step: sum(p[step] for p in seeds.values() if step in p)
        / sum(1 for p in seeds.values() if step in p)
        for step in steps
    }


def _replay_note(stages: Mapping[str, Any]) -> str:
    """How many replays reproduced their rl stage's final weights exactly."""
    checks = [
        rec.metrics.get("replay", {})
        for role, rec in stages.items()
        if is_curve_role(role) and rec.metrics
    ]
    if not checks:
        return ""
    same = sum(1 for c in checks if c.get("same_as_rl"))
    if same == len(checks):
        return (
            f" Each point after step 0 comes from a replay of the RL run (the rl stage keeps "
            f"no checkpoints); all {len(checks)} replays ended on the rl stage's exact "
            "weights, so the last point is the evaluated RL model."
        )
    diffs = [c.get("max_abs_weight_diff") for c in checks if not c.get("same_as_rl")]
    worst = max((d for d in diffs if d is not None), default=None)
    return (
        f" Each point after step 0 comes from a replay of the RL run; {same} of "
        f"{len(checks)} replays ended on the rl stage's exact weights, the others differ "
        + (f"by up to {worst:.2g}" if worst is not None else "in shape")
        + " (another thread count or rank layout): their curves are reruns of the same "
        "recipe and seed, not of the very model the eval stages scored."
    )


def checkpoint_section(
    rep: Any, curves: Mapping[str, list[dict]], stages: Mapping[str, Any], experiment: str
) -> Section | None:
    """The section, or None when no input is an evalckpt stage (the default job)."""
    groups = group_curves({r: c for r, c in curves.items() if is_curve_role(r)}, experiment)
    if not groups:
        return None
    sec = Section(f"Val success per RL checkpoint ({SPLIT} split)")
    means = {arm: mean_curve(seeds) for arm, seeds in groups.items()}
    steps = sorted({s for m in means.values() for s in m})
    headers, rows = ["RL step"], []
    for arm, seeds in groups.items():
        headers += [f"{arm}: mean", f"{arm}: seeds {', '.join(map(str, sorted(seeds)))}"]
    for step in steps:
        row = [f"{step} (SFT)" if step == 0 else str(step)]
        for arm, seeds in groups.items():
            row.append(pct(means[arm].get(step)))
            row.append(" / ".join(pct(seeds[s].get(step), 0) for s in sorted(seeds)))
        rows.append(row)
    for arm, mean in means.items():
        for step, value in mean.items():
            rep.metrics[f"{KIND}/{arm}/step{step}/{SPLIT}_success"] = round(value, 4)
    episodes = {
        int(r["episodes"]) for c in curves.values() for r in c if r.get("episodes") is not None
    }
    per_point = (
        f"{min(episodes)}" if len(episodes) == 1 else "up to " + str(max(episodes, default=0))
    )
    sec.blocks += [
        Table(headers, rows, ["left", *["right"] * (len(headers) - 1)]),
        Para(
            f"Split: {SPLIT} (the seeds checkpoints are chosen on; no test episode is played "
            "here). Step 0 is the SFT model the RL run starts from, every later step the "
            f"policy at that RL checkpoint (rl.save_steps), played greedily on {per_point} "
            "val episodes per point (success: mean over tasks, as everywhere in this "
            "report). Mean: over training seeds; per seed in seed order." + _replay_note(stages)
        ),
        Figure(
            "val_per_checkpoint",
            plots.checkpoint_curve_plot(groups, means),
            f"Val success per RL checkpoint ({SPLIT} split): mean over training seeds "
            "(thick), each seed (thin); step 0 is SFT",
        ),
    ]
    return sec
