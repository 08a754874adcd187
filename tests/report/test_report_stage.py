"""The report stage: report.md/html, plots, metrics, plot data, viewers, absent sections."""

from __future__ import annotations

import csv
import json
import re
import shutil
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


# What the upstream stages write beside their outputs (metrics/<kind>/<stem>.json), with
# round wall times so the stages table's sums are easy to check.
STAGE_METRICS = {
    "collect/demo": {"wall_s": 120.0, "yield": 0.9, "yield_first_attempt": 0.6},
    "model/demo": {"wall_s": 30.0},
    "sft/demo-s0": {"wall_s": 300.0, "loss_final": 0.05, "eval_loss": 0.2, "steps": 100},
    "mine/demo": {"wall_s": 60.0, "states": 40},
    "rl/demo": {"wall_s": 90.0, "accepted_fraction": 0.25},
    "eval/demo-sft": {"wall_s": 40.0, "val": {"split": "val", "success": 0.5, "wall_s": 20.0}},
}


def write_stage_metrics(root: Path) -> None:
    for stem, values in STAGE_METRICS.items():
        path = root / "metrics" / f"{stem}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    (root / "metrics" / "sft" / "demo-s0.loss.csv").write_text(
        "step,loss,learning_rate\n10,5.0,0.001\n20,1.0,0.001\n30,0.05,0.0005\n"
    )


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    root = tmp_path_factory.mktemp("demo")
    runs = write_demo_runs(root / "runs")
    for dep in ("model/demo", "sft/demo/s0"):  # deps without tables
        (root / "runs" / dep).mkdir(parents=True)
    runs["model"] = root / "runs" / "model" / "demo"
    runs["sft-s0"] = root / "runs" / "sft" / "demo" / "s0"
    write_stage_metrics(root)
    return root, runs


def test_full_report(demo: tuple[Path, dict[str, Path]], tmp_path: Path) -> None:
    root, runs = demo
    shutil.copytree(root / "metrics", tmp_path / "metrics")
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
        "## SFT: training loss",
        "## Stages: wall time and cost",
    ):
        assert heading in md
    assert "No " not in md.split("## Inputs")[0]  # every section had data
    # The results table: policies in input (spec) order, one line each.
    results = md.split("## Results")[1].split("## ")[0]
    table = results.split("\n\n")[1].splitlines()  # the first table of the section
    assert [line.split(" | ")[0] for line in table[2:]] == ["| expert", "| random", "| sft", "| rl"]
    # ... then the matched steps against the expert, for every policy but the expert
    assert "| Policy | Solved episodes | Steps / expert's steps |" in results
    figures = ("success", "arms", "yield", "kept_steps", "sft_loss", "failure_modes", "rl")
    for name in (*figures, "stages"):
        png = out / "plots" / f"{name}.png"
        assert png.read_bytes().startswith(b"\x89PNG") and f"](plots/{name}.png)" in md
    html = (out / "report.html").read_text()
    assert html.count('src="data:image/png;base64,') == 8
    # The figures again beside the metrics, for `dvc plots show` (offline: images only).
    shown = tmp_path / "metrics" / "figures" / "demo"
    assert sorted(p.name for p in shown.iterdir()) == sorted(
        f"{n}.png" for n in (*figures, "stages")
    )
    # The arms section: one row per arm (one seed each here), and rl - sft compared.
    arms = md.split("## Arms over training seeds (test split)")[1].split("\n## ")[0]
    assert "| sft |" in arms and "| rl |" in arms and " − " in arms
    # Self-contained: nothing fetched; the only links are the viewer pages next to it.
    assert not re.search(r'src="(?!data:)', html)
    hrefs = [h.split("#")[0] for h in re.findall(r'href="([^"]+)"', html)]
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
    # Stages: every input with a metrics file, an eval's splits summed; the total of them.
    stages = md.split("## Stages: wall time and cost")[1].split("\n## ")[0]
    assert "| eval-sft | eval/demo/sft | 1.0 |" in stages  # 40 s test + 20 s val
    assert "| sft-s0 | sft/demo/s0 | 5.0 |" in stages and "| eval-rl | eval/demo/rl | — |" in stages
    assert metrics["stages/wall_s"] == 660.0 and "stages/cost_usd" not in metrics  # unpriced
    sft = md.split("## SFT: training loss")[1].split("\n## ")[0]
    assert "| sft-s0 | 100 | 5.000 | 0.0500 | 0.2000 |" in sft
    # The summary: the dozen numbers DVC's default views show.
    summary = json.loads((tmp_path / "metrics" / "summary" / "demo.json").read_text())
    assert summary == {
        "success/expert": metrics["arm/demo/expert/success"],
        "success/random": metrics["arm/demo/random/success"],
        "success/sft": metrics["arm/demo/sft/success"],
        "success/rl": metrics["arm/demo/rl/success"],
        "val_success/sft": 0.5,
        "collect/yield": 0.9,
        "collect/first_try_yield": 0.6,
        "sft/loss_final": 0.05,
        "mine/states": 40,
        "rl/accept_rate": 0.25,
        "wall_min": 11.0,
    }
    # Per-task cells link to the policy's viewer, filtered to the task (HTML only).
    assert 'href="viewer/eval-sft.html#task=login-user"' in html
    assert "](viewer/" not in md.split("## Trajectory viewers")[0]
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


def test_side_by_side_pairs_sft_and_rl_of_each_training_seed() -> None:
    from rmsweb.report.stage import side_by_side_roles

    spec = ExperimentSpec(name="demo", seeds=[0, 1, 2])
    names = {p.source: p.name for p in spec.eval.policies if p.kind == "checkpoint"}
    a, b = names["sft"], names["rl"]
    roles = [f"eval-{a}-s0", f"eval-{b}-s0", f"eval-{a}-s1", f"eval-{b}-s2", "eval-expert"]
    assert side_by_side_roles(spec, roles) == [(f"eval-{a}-s0", f"eval-{b}-s0")]


def test_metrics_files_follow_the_compilers_names() -> None:
    """The report finds each input's metrics file from its run folder: the same path as
    dvc.yaml's --metrics of that stage, for every stage of the committed project."""
    from rmsweb.compile import load_project
    from rmsweb.report.pipeline import metrics_file
    from rmsweb.report.stage import figures_dir, summary_path

    root = Path(__file__).parents[2]
    stages = load_project(root).stages
    for stage in stages:
        assert metrics_file(Path(stage.out), Path("metrics")) == Path(stage.metrics), stage.name
    from rmsweb.compile.dvcfile import stage_entry

    for stage in (s for s in stages if s.kind == "report"):
        outs = [next(iter(o)) if isinstance(o, dict) else o for o in stage_entry(stage)["outs"]]
        assert summary_path(Path(stage.metrics)).as_posix() in outs
        assert figures_dir(Path(stage.metrics)).as_posix() in outs


def test_stage_costs_sum_priced_tokens_and_name_unpriced_ones() -> None:
    from rmsweb.report.build import Report
    from rmsweb.report.document import Document
    from rmsweb.report.pipeline import StageRecord, stages_section

    rep = Report(Document("t", "", []))
    records = {
        "collect": StageRecord("collect", "collect/x", {"wall_s": 60.0}),
        "sft-s0": StageRecord("sft-s0", "sft/x/s0", {"wall_s": 120.0}),
        "eval-a": StageRecord("eval-a", "eval/x/a", {"wall_s": 30.0}),
        "other.eval-a": StageRecord("other.eval-a", "eval/other/a", {"wall_s": 600.0}),
    }
    costs = [
        {"run": "collect/x", "episodes": 5, "tokens_in": 100, "tokens_out": 10, "cost_usd": None},
        {"run": "eval/x/a", "episodes": 4, "tokens_in": 1000, "tokens_out": 50, "cost_usd": 0.25},
        {"run": "eval/other/a", "episodes": 4, "tokens_in": 9, "tokens_out": 9, "cost_usd": 9.0},
    ]
    table = stages_section(rep, records, costs).blocks[0]
    assert [r[0] for r in table.rows] == [
        "collect",
        "sft-s0",
        "eval-a",
        "other.eval-a",
        "total (this experiment's)",
    ]  # pipeline order, compared experiments last
    assert table.rows[0][5] == "unpriced" and table.rows[2][5] == "$0.2500"
    assert table.rows[-1][2:] == ["3.5", "", "", "$0.2500 + unpriced tokens"]
    assert rep.metrics["stages/wall_s"] == 210.0 and rep.metrics["stages/cost_usd"] == 0.25
