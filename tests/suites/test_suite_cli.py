"""`rmsweb suite list` / `suite show` over the bundled task files, and a live suite spec
turned into a suite and a runner (no browser)."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from rmsweb.cli import app
from rmsweb.rollout.build import build_runner
from rmsweb.spec import ExperimentSpec
from rmsweb.suites.factory import build_suite
from rmsweb.suites.live import LiveSuite
from rmsweb.suites.miniwob_experts import EXPERTS


def run(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


def test_suite_list_counts_every_suite() -> None:
    out = run("suite", "list")
    rows = {line.split()[1]: line for line in out.splitlines() if line.startswith("│")}
    assert re.search(rf"offline\s*│\s*130\s*│\s*{len(EXPERTS)}\s", rows["miniwob"])
    assert re.search(r"live\s*│\s*595\s.*webvoyager judge.*15 sites", rows["webvoyager"])
    assert re.search(r"live\s*│\s*300\s.*webjudge judge.*3 levels", rows["online_mind2web"])
    assert re.search(r"live\s*│\s*609\s.*webtailbench judge.*11 categories", rows["webtailbench"])
    # train/val/test sum to the tasks
    for name, total in (("webvoyager", 595), ("online_mind2web", 300), ("webtailbench", 609)):
        train, val, test = map(int, re.search(r"(\d+)/(\d+)/(\d+)", rows[name]).groups())
        assert train + val + test == total and val > 0


@pytest.mark.parametrize(
    ("suite", "groups", "example"),
    [
        ("webvoyager", 15, r"│ Cambridge Dictionary\s*│\s*43 │"),
        ("online_mind2web", 3, r"│ medium\s*│\s*143 │"),
        ("webtailbench", 11, r"│ shopping_lists_tail\s*│"),
    ],
)
def test_suite_show_gives_categories_and_splits(suite: str, groups: int, example: str) -> None:
    out = run("suite", "show", suite)
    body = [ln for ln in out.splitlines() if ln.startswith("│")]
    assert len(body) == groups and re.search(example, out)
    counts = [list(map(int, re.findall(r"│\s*(\d+)\s*(?=│)", ln))) for ln in body]
    assert all(tasks == train + val + test for tasks, train, val, test in counts)
    split = re.search(r"train (\d+), val (\d+), test (\d+)", out).groups()
    assert [sum(c[i] for c in counts) for i in (1, 2, 3)] == list(map(int, split))


def test_suite_show_miniwob_and_unknown_names() -> None:
    assert "seed ranges per task" in run("suite", "show", "miniwob")
    result = CliRunner().invoke(app, ["suite", "show", "webvoyger"])
    assert result.exit_code == 2 and "Did you mean webvoyager" in result.output


def test_a_live_spec_builds_a_live_suite_and_a_guarded_runner() -> None:
    spec = ExperimentSpec.model_validate(
        {
            "name": "live",
            "suite": {
                "kind": "online_mind2web",
                "levels": ["easy"],
                "limit": 20,
                "private_origins": ["http://127.0.0.1:8000"],
                "browser": {"navigation_timeout_s": 12},
            },
            "collect": {"teacher": {"kind": "openai", "model": "m"}},
            "mine": {"mode": "judge"},
            "eval": {"policies": [{"kind": "openai", "name": "m", "model": "m"}]},
        }
    )
    suite = build_suite(spec.suite)
    assert isinstance(suite, LiveSuite) and len(suite.task_ids()) == 20
    assert suite.navigation_policy.private_origins == ("http://127.0.0.1:8000",)
    runner = build_runner(spec.suite, run="eval/x", stage="eval")  # not started: no browser
    assert runner.navigation_policy is runner.suite.navigation_policy
    assert runner.navigation_policy == suite.navigation_policy and runner.navigation_policy.live
    assert (runner.recycle_after, runner.navigation_timeout_s) == (1, 12)
    assert runner.screenshots  # live defaults: the judge needs them
