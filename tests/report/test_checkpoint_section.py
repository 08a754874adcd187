"""The report's "Val success per RL checkpoint" section, from synthetic evalckpt curves:
mean over seeds with each seed, the split named, the canary beside the recipe, and the
evalckpt runs' val episodes kept out of the report's eval tables."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rmsweb.report.build import Report
from rmsweb.report.checkpoints import checkpoint_section, group_curves, is_curve_role
from rmsweb.report.document import Document, Figure, Para, Table
from rmsweb.report.pipeline import StageRecord


def _rows(points: dict[int, float]) -> list[dict]:
    """Curve CSV rows as report/pipeline.read_curves gives them (floats)."""
    return [
        {"step": float(s), "success": v, "successes": 200 * v, "episodes": 200.0}
        for s, v in points.items()
    ]


# The recipe rises, the canary (a compared experiment) falls; both start at SFT.
CURVES = {
    "evalckpt-rl-s0": _rows({0: 0.70, 20: 0.74, 40: 0.76}),
    "evalckpt-rl-s1": _rows({0: 0.60, 20: 0.62, 40: 0.68}),
    "demo-canary.evalckpt-rl-s0": _rows({0: 0.70, 20: 0.50, 40: 0.30}),
    "demo-canary.evalckpt-rl-s1": _rows({0: 0.60, 20: 0.40, 40: 0.20}),
}


def _stages(same: tuple[bool, ...] = (True, True, True, True)) -> dict[str, StageRecord]:
    return {
        role: StageRecord(
            role,
            f"evalckpt/x/rl/s{i}",
            {"replay": {"same_as_rl": ok, "max_abs_weight_diff": 0.0 if ok else 3e-7}},
        )
        for i, (role, ok) in enumerate(zip(CURVES, same, strict=True))
    }


def _section(curves: dict = CURVES, stages: dict | None = None):
    rep = Report(Document("t", "", []))
    return rep, checkpoint_section(rep, curves, _stages() if stages is None else stages, "demo")


def test_roles_of_evalckpt_stages() -> None:
    assert is_curve_role("evalckpt-rl-s0") and is_curve_role("x-y.evalckpt-rl-s2")
    assert not is_curve_role("eval-rl-s0") and not is_curve_role("rl-s0")
    groups = group_curves(CURVES, "demo")
    assert list(groups) == ["demo/rl", "demo-canary/rl"]  # this experiment's arm first
    assert groups["demo/rl"][1] == {0: 0.60, 20: 0.62, 40: 0.68}


def test_table_gives_the_mean_over_seeds_and_each_seed_on_the_val_split() -> None:
    rep, sec = _section()
    assert sec is not None and sec.title == "Val success per RL checkpoint (val split)"
    table = next(b for b in sec.blocks if isinstance(b, Table))
    assert table.headers == [
        "RL step",
        "demo/rl: mean",
        "demo/rl: seeds 0, 1",
        "demo-canary/rl: mean",
        "demo-canary/rl: seeds 0, 1",
    ]
    # step 40: recipe (0.76 + 0.68) / 2 = 72.0%, canary (0.30 + 0.20) / 2 = 25.0%
    assert table.rows == [
        ["0 (SFT)", "65.0%", "70% / 60%", "65.0%", "70% / 60%"],
        ["20", "68.0%", "74% / 62%", "45.0%", "50% / 40%"],
        ["40", "72.0%", "76% / 68%", "25.0%", "30% / 20%"],
    ]
    text = " ".join(b.text for b in sec.blocks if isinstance(b, Para))
    assert "Split: val" in text and "no test episode" in text and "200 val episodes" in text
    assert "all 4 replays ended on the rl stage's exact weights" in text
    fig = next(b for b in sec.blocks if isinstance(b, Figure))
    assert fig.name == "val_per_checkpoint" and fig.png.startswith(b"\x89PNG")
    assert "val split" in fig.caption
    assert rep.metrics["evalckpt/demo/rl/step40/val_success"] == 0.72
    assert rep.metrics["evalckpt/demo-canary/rl/step40/val_success"] == 0.25


def test_a_replay_that_drifted_is_named() -> None:
    """The control of the note above: one replay off the rl stage's weights is said."""
    _, sec = _section(stages=_stages((True, False, True, True)))
    text = " ".join(b.text for b in sec.blocks if isinstance(b, Para))
    assert "3 of 4 replays" in text and "3e-07" in text and "all 4" not in text


def test_no_section_without_evalckpt_inputs() -> None:
    """The default job evaluates no checkpoint curve: its report has no such section."""
    _, sec = _section({"eval-rl-s0": _rows({0: 0.5})}, {})
    assert sec is None


@pytest.fixture
def demo_with_curve(tmp_path: Path) -> tuple[Path, dict[str, Path]]:
    from rmsweb.store.synthetic import make_episode, write_demo_runs
    from rmsweb.store.writer import ShardWriter

    runs = write_demo_runs(tmp_path / "runs")
    run = "evalckpt/demo/rl/s0"
    with ShardWriter(tmp_path / "runs" / run) as sink:
        for step in (0, 20):
            for seed in range(3):
                sink.write(
                    make_episode(
                        run=run,
                        task="click-button",
                        seed=50_000 + seed,
                        policy=f"rl-step-{step}",
                        success=seed < 2,
                        n_steps=2,
                    )
                )
    runs["evalckpt-rl-s0"] = tmp_path / "runs" / run
    metrics = tmp_path / "metrics" / "evalckpt"
    metrics.mkdir(parents=True)
    (metrics / "demo-rl-s0.json").write_text(
        json.dumps({"wall_s": 60.0, "replay": {"same_as_rl": True, "max_abs_weight_diff": 0.0}})
    )
    (metrics / "demo-rl-s0.curve.csv").write_text(
        "step,success,ci_low,ci_high,successes,episodes\n0,0.6667,0.2,0.9,2,3\n20,0.6667,0.2,0.9,2,3\n"
    )
    return tmp_path, runs


def test_report_stage_draws_the_curve_and_keeps_its_episodes_out_of_the_results(
    demo_with_curve: tuple[Path, dict[str, Path]], tmp_path: Path
) -> None:
    """The section from the stage's curve file; its val episodes are counted as the
    stage's work but are no evaluated policy and get no viewer page."""
    from rmsweb.report.stage import main
    from rmsweb.spec import ExperimentSpec
    from rmsweb.stage_io import StageIO

    root, runs = demo_with_curve
    out = tmp_path / "out"
    shutil.copytree(root / "metrics", out / "metrics")
    io = StageIO(
        "demo",
        ExperimentSpec(name="demo", report={"viewer": True}),
        runs,
        out / "runs" / "report" / "demo",
        out / "metrics" / "report" / "demo.json",
    )
    main(io)
    md = (io.out / "report.md").read_text()
    section = md.split("## Val success per RL checkpoint (val split)")[1].split("\n## ")[0]
    assert "| 0 (SFT) | 66.7% | 67% |" in section
    assert "](plots/val_per_checkpoint.png)" in section
    assert (out / "metrics" / "figures" / "demo" / "val_per_checkpoint.png").is_file()
    # The results and arms tables hold the evaluated policies, not the checkpoints' val runs.
    assert "rl-step-" not in md
    results = md.split("## Results")[1].split("\n## ")[0]
    assert "| val |" not in results
    stages = md.split("## Stages: wall time and cost")[1].split("\n## ")[0]
    assert "| evalckpt-rl-s0 | evalckpt/demo/rl/s0 | 1.0 | 6 |" in stages
    pages = sorted(p.name for p in (io.out / "viewer").iterdir())
    assert pages and "evalckpt-rl-s0.html" not in pages
