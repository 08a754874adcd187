"""Viewer data: action display, episode cap spread over tasks, screenshot budget, the split
shown, run folder resolution, page names, two runs side by side, CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rmsweb.cli import app
from rmsweb.errors import UserError
from rmsweb.report.viewer import (
    format_action,
    load_compare_data,
    load_viewer_data,
    page_name,
    render_viewer,
)
from rmsweb.store.synthetic import TASKS, make_episode, write_collect_run, write_eval_run
from rmsweb.store.writer import ShardWriter


def write_split_run(root: Path, policy: str, outcomes: dict[tuple[str, int], bool]) -> Path:
    """An eval run like the real ones: test seeds 0.., val seeds 50000.. in one folder."""
    run = f"eval/x/{policy}/s0"
    with ShardWriter(root / run) as sink:
        for (task, seed), ok in outcomes.items():
            rec = make_episode(run=run, task=task, seed=seed, policy=policy, success=ok, n_steps=2)
            rec.episode.split = "val" if seed >= 50000 else "test"
            sink.write(rec)
    return root / run


def _units(seeds: range, ok: bool) -> dict[tuple[str, int], bool]:
    return {(task, seed): ok for task in TASKS[:2] for seed in seeds}


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
            "mode": "single",
            "run": "r",
            "split": "test",
            "splits": {"test": 1},
            "cap": 200,
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
    assert res.exit_code == 0 and (tmp_path / "eval-x-sft-test-viewer.html").exists()
    assert not (run / "viewer.html").exists()
    target = tmp_path / "v" / "page.html"
    res = CliRunner().invoke(app, ["view", str(run), "--out", str(target)])
    assert res.exit_code == 0 and target.read_text().startswith("<!doctype html>")
    res = CliRunner().invoke(app, ["view", str(tmp_path / "v")])  # no run in or below it
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


def test_default_split_is_the_reports_and_the_page_names_it(tmp_path: Path) -> None:
    run = write_split_run(
        tmp_path / "runs", "sft", {**_units(range(3), True), **_units(range(50000, 50002), False)}
    )
    data = load_viewer_data(run)
    assert data["split"] == "test" and data["splits"] == {"test": 6, "val": 4}
    assert {e["split"] for e in data["episodes"]} == {"test"} and data["total"] == 6
    page = render_viewer(data, "t")
    assert '<span class="split-tag">test split</span>' in page
    assert "Also in this run: val (4 episodes; --split val)" in page
    val = load_viewer_data(run, split="val")
    assert {e["seed"] for e in val["episodes"]} == {50000, 50001} and val["successes"] == 0
    everything = load_viewer_data(run, split="all", max_episodes=3)
    assert everything["total"] == 10 and everything["shown"] == 3
    with pytest.raises(UserError, match=r"no train episodes \(has: test \(6\), val \(4\)\)"):
        load_viewer_data(run, split="train")


def test_a_folder_above_one_run_opens_it_and_above_several_names_them(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    s0 = write_split_run(root, "sft", _units(range(2), True))
    assert load_viewer_data(s0.parent)["run"] == "eval/x/sft/s0"  # README's `.../sft`
    (root / "eval/x/sft/s1/episodes").mkdir(parents=True)
    (s0 / "episodes").rename(root / "eval/x/sft/s1/episodes")
    write_split_run(root, "sft", _units(range(2), True))  # s0 again: now two runs below
    res = CliRunner().invoke(app, ["view", str(s0.parent)])
    assert res.exit_code == 2 and "the runs below it are sft/s0, sft/s1" in res.stderr
    res = CliRunner().invoke(app, ["view", str(tmp_path)])
    assert res.exit_code == 2 and "no episodes table" in res.stderr


def test_pages_of_different_runs_and_splits_get_different_names(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    units = {**_units(range(2), True), **_units(range(50000, 50001), True)}
    sft, rl = write_split_run(root, "sft", units), write_split_run(root, "rl", units)
    names = {
        page_name(load_viewer_data(sft)),
        page_name(load_viewer_data(rl)),
        page_name(load_viewer_data(sft, split="val")),
        page_name(load_compare_data(sft, rl)),
    }
    assert names == {
        "eval-x-sft-s0-test-viewer.html",
        "eval-x-rl-s0-test-viewer.html",
        "eval-x-sft-s0-val-viewer.html",
        "eval-x-sft-s0-vs-eval-x-rl-s0-test-viewer.html",
    }


def test_compare_pairs_the_same_units_with_differing_outcomes_first(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    sft = write_split_run(root, "sft", {**_units(range(4), False), ("click-button", 9): True})
    # RL solves seeds 1 and 3 of both tasks; seed 9 is only in the SFT run.
    rl = write_split_run(root, "rl", {(t, s): s in (1, 3) for t, s in _units(range(4), False)})
    data = load_compare_data(sft, rl, max_units=5)
    assert data["split"] == "test" and data["total"] == 8 and data["differ"] == 4
    assert data["successes"] == [0, 4]  # over the shared units only
    keys = [(u["task_id"], u["seed"]) for u in data["units"]]
    assert keys[:4] == [
        ("click-button", 1),
        ("enter-text", 1),
        ("click-button", 3),
        ("enter-text", 3),
    ]  # differing first, spread over tasks
    assert len(keys) == 5 and ("click-button", 9) not in keys
    for u in data["units"]:
        assert (u["a"]["policy"], u["b"]["policy"]) == ("sft", "rl")
        assert u["a"]["seed"] == u["b"]["seed"] == u["seed"] and u["a"]["steps"]
    res = CliRunner().invoke(
        app, ["view", str(sft), "--compare", str(rl), "--out", str(tmp_path / "c.html")]
    )
    assert res.exit_code == 0 and "outcomes differ on 4" in (tmp_path / "c.html").read_text()
