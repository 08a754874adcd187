"""The report's RL section says what the RL stage's summary knows: how many groups had
contrast but the competence bounds alone rejected them, the final KL to SFT, and the KL
and entropy curves at the probe steps."""

from __future__ import annotations

import math

from rmsweb.report.build import Report, rl_section
from rmsweb.report.document import Document, Figure, Table
from rmsweb.report.pipeline import StageRecord

RUN = "rl/demo/s0"
CURVE = [
    {
        "run": RUN,
        "step": s,
        "groups": 4,
        "reward_mean": 0.1 * s,
        "reward_std": 0.5,
        "accepted": 2,
        "rejected": 2,
        "pg_loss": 0.1,
        "anchor_loss": 0.2,
    }
    for s in (1, 2)
]
REASONS = [
    {"run": RUN, "step": 1, "reason": "accepted", "groups": 4},
    {"run": RUN, "step": 1, "reason": "too_hard", "groups": 3},  # contrast, bounds said no
    {"run": RUN, "step": 2, "reason": "all_wrong", "groups": 1},  # no contrast
]


def _section(drift: dict | None = None):
    rep = Report(Document("t", "", []))
    stages = {"rl-s0": StageRecord("rl-s0", RUN, {"kl_to_sft_final": 0.0123})}
    return rep, rl_section(rep, CURVE, REASONS, stages, drift)


def test_contrast_rejected_groups_and_final_kl_are_reported() -> None:
    rep, sec = _section()
    table = next(b for b in sec.blocks if isinstance(b, Table))
    row = dict(zip(table.headers, table.rows[0], strict=True))
    assert row["Rejected with contrast"] == "3"
    assert row["KL to SFT (end)"] == "0.0123"
    assert rep.metrics["rl/competence_rejected_with_contrast"] == 3
    assert rep.metrics["rl/kl_to_sft_final"] == 0.0123
    assert not any(isinstance(b, Figure) and b.name == "rl_drift" for b in sec.blocks)


def test_kl_and_entropy_curves_are_drawn_when_the_stage_probed() -> None:
    drift = {
        "rl-s0": [
            {"step": 1.0, "kl_to_sft": 0.0, "entropy": 1.2},
            {"step": 2.0, "kl_to_sft": 0.01, "entropy": 1.1},
        ]
    }
    _, sec = _section(drift)
    fig = next(b for b in sec.blocks if isinstance(b, Figure) and b.name == "rl_drift")
    assert fig.png.startswith(b"\x89PNG")
    _, none = _section({"rl-s0": [{"step": 1.0, "entropy": math.nan}]})
    assert not any(isinstance(b, Figure) and b.name == "rl_drift" for b in none.blocks)
