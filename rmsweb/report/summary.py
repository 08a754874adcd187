"""The experiment's summary metrics: the dozen numbers `dvc exp show` and `dvc metrics show`
read by default (dvc.yaml's top-level `metrics: [metrics/summary]`).

The report stage writes them to metrics/summary/<experiment>.json; every stage's own
metrics file (hundreds of keys across the project) stays beside its stage as a plain
output, out of DVC's default view. Keys are the same in every experiment's file, so
`dvc exp show --keep 'metrics/summary/<name>.json:'` lines up runs of one experiment and
the files of two experiments compare key by key:

- success/<policy>: test success, mean over training seeds (the arms section's number);
- val_success/<policy>: val success of trained policies, mean over seeds;
- collect/yield, collect/first_try_yield: share of (task, seed) units solved;
- sft/loss_final, mine/states, rl/accept_rate: mean over training seeds;
- regime_headroom, regime_reach_val, regime_reach_mined, regime_length: the regime
  stages' pooled headroom (expert − SFT on val, mean over seeds), reach (pass@G at the
  RL temperature on val and on mined failure states, counts pooled over seeds) and the
  expert's mean steps, as the report's Regime section gives them (regime_section.py);
- wall_min: minutes of this experiment's stages (reports excluded); cost_usd: dollars
  at the spec's prices (tokens only).
Pure: the report's metrics and the upstream stages' metrics files in, a dict out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from rmsweb.report.regime_section import combine

# (key in the summary, key of the regime section's pooled values)
REGIME = (
    ("regime_headroom", "headroom"),
    ("regime_reach_val", "reach_val"),
    ("regime_reach_mined", "reach_mined"),
    ("regime_length", "expert_steps"),
)

# (key in the summary, stage kind of the role, key in that stage's metrics file)
PER_SEED = (
    ("sft/loss_final", "sft", "loss_final"),
    ("mine/states", "mine", "states"),
    ("rl/accept_rate", "rl", "accepted_fraction"),
)


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def _policy_of(role: str) -> str:
    """eval-sft-s0 -> sft; eval-expert -> expert (policy names hold no '-s<k>' suffix)."""
    name = role.removeprefix("eval-")
    head, sep, tail = name.rpartition("-s")
    return head if sep and tail.isdigit() else name


def summary_metrics(
    experiment: str,
    report_metrics: Mapping[str, Any],
    stage_metrics: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    """The summary of one experiment (module docstring). `stage_metrics`: role -> that
    input stage's metrics file; roles of compared experiments (`<exp>.<role>`) are not
    this experiment's and are skipped."""
    own = {role: m for role, m in stage_metrics.items() if "." not in role}
    out: dict[str, Any] = {}
    prefix = f"arm/{experiment}/"
    for key, value in sorted(report_metrics.items()):
        if key.startswith(prefix) and key.endswith("/success"):
            out[f"success/{key[len(prefix) : -len('/success')]}"] = value
    val: dict[str, list[float]] = defaultdict(list)
    for role, m in own.items():
        split = m.get("val")
        if (
            role.startswith("eval-")
            and isinstance(split, dict)
            and split.get("success") is not None
        ):
            val[_policy_of(role)].append(split["success"])
    for policy, values in sorted(val.items()):
        out[f"val_success/{policy}"] = _mean(values)
    collect = own.get("collect", {})
    out["collect/yield"] = collect.get("yield")
    out["collect/first_try_yield"] = collect.get("yield_first_attempt")
    for key, kind, field in PER_SEED:
        values = [
            m[field]
            for role, m in own.items()
            if (role == kind or role.startswith(f"{kind}-s")) and m.get(field) is not None
        ]
        out[key] = _mean(values)
    regime = [
        m["pooled"]
        for role, m in own.items()
        if (role == "regime" or role.startswith("regime-s")) and m.get("pooled")
    ]
    if regime:
        pooled = combine(regime)
        for key, field in REGIME:
            out[key] = round(pooled[field], 4) if pooled[field] is not None else None
    wall = report_metrics.get("stages/wall_s")
    out["wall_min"] = round(wall / 60, 1) if wall is not None else None
    out["cost_usd"] = report_metrics.get("stages/cost_usd")
    return {k: v for k, v in out.items() if v is not None}
