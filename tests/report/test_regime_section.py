"""The Regime section and the summary's regime keys, from regime stage metrics files
shaped exactly as the stage writes them (rmsweb.regime.measures on constructed data)."""

from __future__ import annotations

from rmsweb.regime.measures import POOLED, regime_metrics
from rmsweb.regime.probe import ProbeState
from rmsweb.report.document import Document, Table, to_html, to_markdown
from rmsweb.report.pipeline import StageRecord
from rmsweb.report.regime_section import regime_section
from rmsweb.report.summary import summary_metrics
from rmsweb.store.synthetic import make_episode

TASKS = ["click-button", "login-user"]


def _episodes(policy: str, task: str, wins: int, n: int, steps: int) -> list:
    return [
        make_episode(
            run="regime/x/s0", task=task, seed=i, policy=policy, success=i < wins, n_steps=steps
        )
        for i in range(n)
    ]


def _states(kind: str, task: str, reached: int, n: int) -> list[ProbeState]:
    out = []
    for i in range(n):
        s = ProbeState(
            f"{kind}{task}{i}",
            kind,
            ("first" if i % 2 == 0 else "later") if kind == "val" else "critical",
            task,
            0,
            "e",
            0,
            "",
            "",
            None,
            [],
            ["click(1)"],
            [],
            None,
        )
        s.samples_ok = [i < reached, False]
        s.samples_on_target = [i < reached, i < reached + 1]  # one more state on target
        out.append(s)
    return out


def stage_metrics(seed: int, sft_wins: int, val_reached: int) -> dict:
    records = [
        *_episodes("expert", "click-button", 4, 4, 1),
        *_episodes("sft", "click-button", sft_wins, 4, 1),
        *_episodes("expert", "login-user", 4, 4, 4),
        *_episodes("sft", "login-user", 0, 4, 4),
    ]
    mined = _states("mined", "click-button", 1, 2) + _states("mined", "login-user", 0, 2)
    val = _states("val", "login-user", val_reached, 4)
    per_task = regime_metrics(TASKS, records, mined, val)
    return {
        "seed": seed,
        "group_size": 2,
        "temperature": 1.0,
        "val_seeds_per_task": 4,
        "pooled": per_task.pop(POOLED),
        "per_task": per_task,
    }


def records() -> dict[str, StageRecord]:
    return {
        "regime-s0": StageRecord("regime-s0", "regime/x/s0", stage_metrics(0, 2, 3)),
        "regime-s1": StageRecord("regime-s1", "regime/x/s1", stage_metrics(1, 4, 1)),
        "mine-s0": StageRecord("mine-s0", "mine/x/s0", {"states": 10}),
        # another experiment's regime (report.compare) is not this report's
        "y.regime-s0": StageRecord("y.regime-s0", "regime/y/s0", stage_metrics(0, 0, 0)),
    }


def test_section_table_metrics_and_render() -> None:
    metrics: dict = {}
    sec = regime_section(metrics, records())
    assert sec is not None
    table = next(b for b in sec.blocks if isinstance(b, Table))
    by_task = {row[0]: row for row in table.rows}
    assert list(by_task) == ["click-button", "login-user", "pooled (2 tasks)"]
    # click-button: SFT 50% (seed 0) and 100% (seed 1): mean 75%, headroom +25 points
    assert by_task["click-button"][2] == "75.0%" and by_task["click-button"][3] == "+25.0"
    # login-user val reach: 3 of 4 and 1 of 4 -> 4 of 8 pooled over seeds
    assert by_task["login-user"][4].startswith("50.0% of 8 [")
    assert by_task["click-button"][4] == "— (0 states)"
    # first failures (val states 0 and 2 of each seed): 2 of 2 and 1 of 2 -> 3 of 4
    assert by_task["login-user"][5].startswith("75.0% of 4 [")
    assert metrics["regime/pooled/reach_val_first_states"] == 4
    # on target (action and element, value aside): one state more per seed, 6 of 8
    assert by_task["login-user"][7].startswith("75.0% of 8 [")
    assert metrics["regime/pooled/reach_val_target_reached"] == 6
    assert by_task["login-user"][9] == "4.00"
    assert metrics["regime/pooled/reach_val_states"] == 8
    assert metrics["regime/pooled/reach_val"] == 0.5
    assert metrics["regime/pooled/headroom"] == round((0.25 + 1.0) / 2, 4)
    assert metrics["regime/click-button/reach_mined_reached"] == 2  # 1 per seed
    assert metrics["regime/pooled/expert_steps"] == 2.5
    text = " ".join(b.text for b in sec.blocks if hasattr(b, "text"))
    assert "is below the 60%" in text and "G = 2" in text and "seeds 0, 1" in text
    doc = Document("r", "s", [sec])
    assert "| pooled (2 tasks) |" in to_markdown(doc)
    assert "Reach, val failure states" in to_html(doc)
    assert "Reach, val first failures" in to_html(doc)


def test_no_regime_stage_no_section() -> None:
    only_mine = {k: v for k, v in records().items() if not k.endswith("regime-s0")}
    only_mine.pop("regime-s1")
    assert regime_section({}, only_mine) is None


def test_reach_meeting_the_threshold_says_so() -> None:
    rec = StageRecord("regime-s0", "regime/x/s0", stage_metrics(0, 2, 4))
    sec = regime_section({}, {"regime-s0": rec})
    assert sec is not None
    text = " ".join(b.text for b in sec.blocks if hasattr(b, "text"))
    assert "100.0% (4 of 4)" in text and "meets the 60%" in text


def test_summary_has_the_regime_keys_as_the_section_gives_them() -> None:
    recs = records()
    section_metrics: dict = {}
    regime_section(section_metrics, recs)
    summary = summary_metrics("x", {}, {role: r.metrics for role, r in recs.items()})
    assert summary["regime_headroom"] == section_metrics["regime/pooled/headroom"]
    assert summary["regime_reach_val"] == section_metrics["regime/pooled/reach_val"] == 0.5
    assert summary["regime_reach_mined"] == section_metrics["regime/pooled/reach_mined"] == 0.25
    assert summary["regime_length"] == 2.5
    assert "regime_headroom" not in summary_metrics("x", {}, {"mine-s0": {"states": 3}})
