"""The report stage: report.md/html, plots, metrics, plot data, viewers, absent sections."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from rmsweb.report.build import PLOT_FILES
from rmsweb.report.stage import main
from rmsweb.spec import ExperimentSpec
from rmsweb.stage_io import StageInputError, StageIO
from rmsweb.store.synthetic import write_demo_runs, write_eval_run


def stage_io(tmp_path: Path, inputs: dict[str, Path], **report: object) -> StageIO:
    spec = ExperimentSpec(name="demo", report=report)
    return StageIO(
        exp="demo",
        spec=spec,
        inputs=inputs,
        out=tmp_path / "runs" / "report" / "demo",
        metrics=tmp_path / "metrics" / "report" / "demo.json",
    )


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    root = tmp_path_factory.mktemp("demo")
    runs = write_demo_runs(root / "runs")
    (root / "runs" / "model" / "demo").mkdir(parents=True)  # a dep without tables
    runs["model"] = root / "runs" / "model" / "demo"
    return root, runs


def test_full_report(demo: tuple[Path, dict[str, Path]], tmp_path: Path) -> None:
    _, runs = demo
    io = stage_io(tmp_path, runs, title="Demo results", viewer_max_episodes=7)
    main(io)
    out = io.out
    md = (out / "report.md").read_text()
    assert md.startswith("# Demo results\n")
    for heading in (
        "## Results",
        "## Per-task success",
        "## Collection: reflection retries",
        "## Failure-mode mining",
        "## RL: rewards, gate and losses",
    ):
        assert heading in md
    assert "No " not in md.split("## Inputs")[0]  # every section had data
    # The results table: policies in input (spec) order, one line each.
    results = md.split("## Results")[1].split("## ")[0]
    table = results.split("\n\n")[1].splitlines()  # the first table of the section
    assert [line.split(" | ")[0] for line in table[2:]] == ["| expert", "| random", "| sft", "| rl"]
    # ... then the matched steps against the expert, for every policy but the expert
    assert "| Policy | Solved episodes | Steps / expert's steps |" in results
    for name in ("success", "arms", "yield", "kept_steps", "failure_modes", "rl"):
        png = out / "plots" / f"{name}.png"
        assert png.read_bytes().startswith(b"\x89PNG") and f"](plots/{name}.png)" in md
    html = (out / "report.html").read_text()
    assert html.count('src="data:image/png;base64,') == 6
    # The arms section: one row per arm (one seed each here), and rl - sft compared.
    arms = md.split("## Arms over training seeds (test split)")[1].split("\n## ")[0]
    assert "| sft |" in arms and "| rl |" in arms and " − " in arms
    # Self-contained: nothing fetched; the only links are the viewer pages next to it.
    assert not re.search(r'src="(?!data:)', html)
    hrefs = re.findall(r'href="([^"]+)"', html)
    assert hrefs and all(h.startswith("viewer/") and (out / h).exists() for h in hrefs)
    assert sorted(p.name for p in (out / "viewer").iterdir()) == [
        "collect.html",
        "eval-expert.html",
        "eval-random.html",
        "eval-rl.html",
        "eval-sft.html",
        "mine.html",
    ]
    # viewer_max_episodes is respected.
    viewer = (out / "viewer" / "eval-sft.html").read_text()
    data = json.loads(
        re.search(r'id="viewer-data" type="application/json">(.*?)</script>', viewer, re.S)[1]
    )
    assert data["shown"] == 7 and data["total"] == 30
    metrics = json.loads(io.metrics.read_text())
    assert metrics["success/expert"] > metrics["success/random"]
    assert {"collect/first_try_yield", "mine/states", "rl/accept_rate", "n/sft"} <= set(metrics)
    assert all(not isinstance(v, dict | list) for v in metrics.values()), "flat keys for dvc"
    for name, header in PLOT_FILES.items():
        with io.plot_path(name).open() as f:
            rows = list(csv.reader(f))
        assert rows[0] == list(header) and len(rows) > 1, name
    assert not list(out.parent.glob(".*")), "no temp folder left"


def test_sections_without_tables_say_so(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    runs = {"eval-sft": write_eval_run(root, "x", "sft", 0.5, seeds=2)}
    io = stage_io(tmp_path, runs, viewer=False)
    main(io)
    md = (io.out / "report.md").read_text()
    assert "No episodes (collect) rows in this report's inputs" in md
    assert "No mined_states rows" in md and "No rl_groups rows" in md
    assert "| sft | miniwob | test | 10 |" in md
    assert not (io.out / "viewer").exists()
    metrics = json.loads(io.metrics.read_text())
    assert set(metrics) == {
        f"{k}/sft" for k in ("success", "ci_low", "ci_high", "n", "steps_solved", "parse_errors")
    } | {"arm/demo/sft/success", "arm/demo/sft/seeds"}
    with io.plot_path("rl.csv").open() as f:
        assert list(csv.reader(f)) == [
            list(PLOT_FILES["rl.csv"])
        ]  # header only, still a valid file


def test_no_eval_runs_at_all(tmp_path: Path) -> None:
    empty = tmp_path / "runs" / "model" / "x"
    empty.mkdir(parents=True)
    io = stage_io(tmp_path, {"model": empty})
    main(io)
    md = (io.out / "report.md").read_text()
    assert "No episodes (eval) rows" in md
    assert json.loads(io.metrics.read_text()) == {}


def test_rerun_replaces_the_output(tmp_path: Path, demo: tuple[Path, dict[str, Path]]) -> None:
    _, runs = demo
    io = stage_io(tmp_path, {"eval-sft": runs["eval-sft"]})
    io.out.mkdir(parents=True)
    (io.out / "stale.txt").write_text("from an older run")
    main(io)
    assert not (io.out / "stale.txt").exists() and (io.out / "report.md").exists()


def test_missing_input_is_a_user_error(tmp_path: Path) -> None:
    io = stage_io(tmp_path, {"eval-sft": tmp_path / "nope"})
    with pytest.raises(StageInputError, match="does not exist"):
        main(io)


def test_metric_keys_do_not_repeat_the_stage() -> None:
    from rmsweb.report.build import _key

    assert _key("collect", "collect/exp-a", True, "yield") == "collect/exp-a/yield"
    assert _key("collect", "collect/exp-a", False, "yield") == "collect/yield"
    assert _key("rl", "rl/exp-a", True, "accept_rate") == "rl/exp-a/accept_rate"
