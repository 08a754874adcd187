"""Viewer data: action display, episode cap spread over tasks, screenshot budget, CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rmsweb.cli import app
from rmsweb.report.viewer import format_action, load_viewer_data, render_viewer
from rmsweb.store.synthetic import TASKS, write_collect_run, write_eval_run


@pytest.mark.parametrize(
    ("action", "text"),
    [
        ({"type": "click", "target": "3", "text": None, "x": None, "y": None}, "click(3)"),
        (
            {"type": "fill", "target": "3", "text": 'say "hi"', "x": None, "y": None},
            'fill(3, "say \\"hi\\"")',
        ),
        (
            {"type": "press", "target": None, "text": "Enter", "x": None, "y": None},
            'press("Enter")',
        ),
        (
            {"type": "click_xy", "target": None, "text": None, "x": 10.0, "y": 20.5},
            "click_xy(10, 20.5)",
        ),
        ({"type": "go_back", "target": None, "text": None, "x": None, "y": None}, "go_back()"),
        (None, None),
    ],
)
def test_format_action(action: dict | None, text: str | None) -> None:
    assert format_action(action) == text


def test_cap_spreads_over_tasks_and_keeps_whole_episodes(tmp_path: Path) -> None:
    run = write_eval_run(tmp_path / "runs", "x", "sft", 0.5, seeds=6)  # 5 tasks x 6 seeds
    data = load_viewer_data(run, max_episodes=10)
    assert data["total"] == 30 and data["shown"] == 10
    tasks = [e["task_id"] for e in data["episodes"]]
    assert sorted(set(tasks)) == sorted(TASKS) and all(tasks.count(t) == 2 for t in TASKS)
    for ep in data["episodes"]:
        assert [s["step"] for s in ep["steps"]] == list(range(ep["n_steps"]))
        assert all(s["shot"] in data["shots"] for s in ep["steps"])


def test_screenshot_budget_marks_the_rest_omitted(tmp_path: Path) -> None:
    run = write_eval_run(tmp_path / "runs", "x", "sft", 0.5, seeds=2)
    data = load_viewer_data(run, max_screenshot_mb=0.002)  # ~2 KB: room for 1-2 tiny PNGs
    assert data["shots"] and data["shots_omitted"] > 0
    assert sum(len(b64) for b64 in data["shots"].values()) <= 0.002 * 2**20
    notes = {s["shot_note"] for e in data["episodes"] for s in e["steps"] if not s["shot"]}
    assert notes == {"omitted (page size limit)"}


def test_reflections_of_earlier_attempts_are_shown_as_conditioning(tmp_path: Path) -> None:
    run = write_collect_run(tmp_path / "runs", "x")
    data = load_viewer_data(run)
    later = [e for e in data["episodes"] if e["attempt"] > 0]
    assert later and all(len(e["prior"]) == e["attempt"] for e in later)
    failed = [e for e in data["episodes"] if not e["success"]]
    assert all(len(e["reflections"]) == 1 for e in failed)


def test_page_text_cannot_close_the_data_script(tmp_path: Path) -> None:
    page = render_viewer(
        {
            "run": "r",
            "total": 1,
            "successes": 0,
            "shown": 1,
            "shots_omitted": 0,
            "shots": {},
            "episodes": [{"obs": "</script><script>alert(1)</script><!--", "reward": float("nan")}],
        },
        "t",
    )
    body = re.search(r'type="application/json">(.*?)</script>', page, re.S)[1]
    assert "<" not in body
    assert json.loads(body)["episodes"][0] == {
        "obs": "</script><script>alert(1)</script><!--",
        "reward": None,
    }


def test_view_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = write_eval_run(tmp_path / "runs", "x", "sft", 0.5, seeds=1)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["view", str(run)])
    # The default page goes to the working directory, never into the (DVC-tracked) run.
    assert res.exit_code == 0 and (tmp_path / "sft-viewer.html").exists()
    assert not (run / "viewer.html").exists()
    target = tmp_path / "v" / "page.html"
    res = CliRunner().invoke(app, ["view", str(run), "--out", str(target)])
    assert res.exit_code == 0 and target.read_text().startswith("<!doctype html>")
    res = CliRunner().invoke(app, ["view", str(tmp_path)])
    assert res.exit_code == 2 and "no episodes table" in res.stderr


def test_mine_run_viewer_carries_mined_states_and_labels(tmp_path: Path) -> None:
    from rmsweb.store.synthetic import write_mine_run

    run = write_mine_run(tmp_path / "runs", "x", states=12)
    data = load_viewer_data(run)
    mined = [e for e in data["episodes"] if e["mined"]]
    assert mined and data["episodes"][: len(mined)] == mined  # listed first
    sources = {m["source"] for e in mined for m in e["mined"]}
    assert sources == {"critical", "fragile"}  # routine states are not marked
    for e in mined:
        steps = {s["step"] for s in e["steps"]}
        assert all(m["step"] in steps and m["reference_actions"] for m in e["mined"])
