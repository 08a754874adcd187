"""A spec's `sweep:`: validation at the line, the points it expands into, `sweep pick`."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rmsweb.cli import app
from rmsweb.spec import load_experiment
from rmsweb.spec.points import all_points

BASE = """\
extends: miniwob-cpu.yaml
name: my-exp
"""


def _spec(tmp_path: Path, repo_root: Path, sweep: str) -> Path:
    folder = tmp_path / "experiments"
    folder.mkdir(exist_ok=True)
    shutil.copy(repo_root / "experiments" / "miniwob-cpu.yaml", folder / "miniwob-cpu.yaml")
    path = folder / "my-exp.yaml"
    path.write_text(BASE + textwrap.dedent(sweep))
    return path


def _validate(path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["validate", str(path)])
    return result.exit_code, result.output + (result.stderr or "")


GOOD = """\
sweep:
  rl-lr:
    split: val
    metric: eval.rl.success
    base: {seeds: [0]}
    axes:
      lr: {rl.learning_rate: [1.0e-5, 3.0e-5]}
      len: {rl.steps: [50, 150], rl.beta: [0.0, 0.04]}
"""


def test_points_are_the_grid_with_overrides_applied(tmp_path: Path, repo_root: Path) -> None:
    spec = load_experiment(_spec(tmp_path, repo_root, GOOD))
    points = all_points(spec)
    assert [p.name for p in points] == [
        "rl-lr-lr1e-05-len50-0p0",
        "rl-lr-lr1e-05-len150-0p04",
        "rl-lr-lr3e-05-len50-0p0",
        "rl-lr-lr3e-05-len150-0p04",
    ]
    last = points[-1].spec
    assert (last.rl.learning_rate, last.rl.steps, last.rl.beta) == (3e-5, 150, 0.04)
    assert last.seeds == [0] and not last.sweep and last.report.compare == []
    # Only the metric's policy is moved to the sweep's split; nothing reads test there.
    rl = next(p for p in last.eval.policies if p.name == "rl")
    assert rl.splits == ["val"]
    assert spec.rl.learning_rate != 3e-5 or spec.rl.steps != 150  # the spec is untouched


def test_a_section_valued_axis_reads_as_its_labels(tmp_path: Path, repo_root: Path) -> None:
    sweep = """\
    sweep:
      arms:
        metric: eval.rl.success
        against: sft
        axes:
          arm:
            rl: [{reward: {invert: true}}, {kind: continued_sft, learning_rate: 1.0e-5}]
            labels: [canary, ctl]
          lr: {rl.steps: [10]}
    """
    points = all_points(load_experiment(_spec(tmp_path, repo_root, textwrap.dedent(sweep))))
    assert [p.shown for p in points] == [{"arm": "canary", "lr": "10"}, {"arm": "ctl", "lr": "10"}]
    canary, ctl = (p.spec for p in points)
    assert canary.rl.kind == "salvage_ds" and canary.rl.reward.invert
    assert ctl.rl.kind == "continued_sft" and ctl.rl.steps == 10  # a kind change replaces
    # The baseline is evaluated on the sweep's split too, beside the metric's policy.
    assert {p.name: p.splits for p in ctl.eval.policies}["sft"] == ["val"]


@pytest.mark.parametrize(
    ("sweep", "line", "needle"),
    [
        (  # a sweep over test
            """\
            sweep:
              s:
                split: test
                metric: eval.rl.success
                axes: {lr: {rl.learning_rate: [1.0e-5]}}
            """,
            5,
            "must not read the test split",
        ),
        (  # an empty axis
            """\
            sweep:
              s:
                metric: eval.rl.success
                axes:
                  lr: {rl.learning_rate: []}
            """,
            7,
            "empty list of values",
        ),
        (  # an unknown key, at the axis's line
            """\
            sweep:
              s:
                metric: eval.rl.success
                axes:
                  lr: {rl.learnin_rate: [1.0e-5]}
            """,
            7,
            "Did you mean 'learning_rate'",
        ),
        (  # a value the field refuses, at the axis's line
            """\
            sweep:
              s:
                metric: eval.rl.success
                axes:
                  lr: {rl.learning_rate: [2.0]}
            """,
            7,
            "less than 1",
        ),
        (  # a grid over the limit
            """\
            sweep:
              s:
                metric: eval.rl.success
                axes:
                  a: {rl.steps: [1, 2, 3, 4, 5]}
                  b: {rl.beta: [0.0, 0.1, 0.2, 0.3, 0.4]}
                  c: {rl.learning_rate: [1.0e-5, 2.0e-5, 3.0e-5]}
            """,
            6,
            "75 points (5 x 5 x 3); the limit is 64",
        ),
        (  # zipped keys of unequal length
            """\
            sweep:
              s:
                metric: eval.rl.success
                axes:
                  a: {rl.steps: [1, 2], rl.beta: [0.0]}
            """,
            7,
            "equal lengths",
        ),
        (  # a metric of a policy the spec does not evaluate
            """\
            sweep:
              s:
                metric: eval.nope.success
                axes: {a: {rl.steps: [1]}}
            """,
            5,
            "'nope' is not one of this spec's eval.policies",
        ),
        (  # an eval metric on train
            """\
            sweep:
              s:
                split: train
                metric: eval.rl.success
                axes: {a: {rl.steps: [1]}}
            """,
            5,
            "Fix: split: val",
        ),
        (  # a baseline the spec does not evaluate
            """\
            sweep:
              s:
                metric: eval.rl.success
                against: nope
                axes: {a: {rl.steps: [1]}}
            """,
            6,
            "'nope' is not an eval policy of my-exp",
        ),
        (  # a baseline paired with itself
            """\
            sweep:
              s:
                metric: eval.rl.success
                against: rl
                axes: {a: {rl.steps: [1]}}
            """,
            6,
            "paired with itself",
        ),
        (  # a baseline for a metric that is not an eval success
            """\
            sweep:
              s:
                split: train
                metric: rl.kl_to_sft_final
                against: sft
                axes: {a: {rl.steps: [1]}}
            """,
            7,
            "is not `eval.<policy>.success`",
        ),
        (  # moving the splits a point reads
            """\
            sweep:
              s:
                metric: eval.rl.success
                axes: {a: {eval.splits: [[test]]}}
            """,
            6,
            "a sweep cannot set eval.splits",
        ),
    ],
)
def test_validate_refuses_at_the_line(
    tmp_path: Path, repo_root: Path, sweep: str, line: int, needle: str
) -> None:
    path = _spec(tmp_path, repo_root, sweep)
    code, out = _validate(path)
    assert code == 2, out
    assert needle in out, out
    assert f"my-exp.yaml:{line}:" in out, out


def test_a_good_sweep_validates(tmp_path: Path, repo_root: Path) -> None:
    code, out = _validate(_spec(tmp_path, repo_root, GOOD))
    assert code == 0, out


def _results(tmp_path: Path, spec_path: Path, value: float | None = 0.8) -> None:
    spec = load_experiment(spec_path)
    points = [p for p in all_points(spec) if p.sweep == "rl-lr"]
    rows = [
        {"point": p.name, "overrides": p.overrides, "value": value, "missing": []} for p in points
    ]
    out = tmp_path / "metrics" / "sweep" / "rl-lr.json"
    out.parent.mkdir(parents=True)
    out.write_text(json.dumps({"points": rows, "best": points[0].name}))


def test_pick_writes_the_axis_values_with_a_comment(tmp_path: Path, repo_root: Path) -> None:
    path = _spec(tmp_path, repo_root, "# keep this comment\n" + GOOD)
    _results(tmp_path, path)
    result = CliRunner().invoke(
        app, ["sweep", "pick", "rl-lr", "lr3e-05-len150-0p04", "--root", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output + result.stderr
    text = path.read_text()
    assert "# keep this comment" in text  # the round trip keeps comments
    assert "learning_rate: 3.0e-05" in text  # YAML 1.1 tools read 3e-05 as text
    assert "chosen by sweep rl-lr: metrics/sweep/rl-lr.json" in text
    spec = load_experiment(path)
    # The axes' values, not the sweep's base (seeds: [0] is how it ran, not a choice).
    assert (spec.rl.learning_rate, spec.rl.steps, spec.rl.beta) == (3e-5, 150, 0.04)
    assert spec.seeds == load_experiment(repo_root / "experiments" / "miniwob-cpu.yaml").seeds
    # The points did not move: each sets the axis keys itself.
    assert [p.name for p in all_points(spec)][-1] == "rl-lr-lr3e-05-len150-0p04"


def test_pick_refuses_without_results_or_a_value(tmp_path: Path, repo_root: Path) -> None:
    path = _spec(tmp_path, repo_root, GOOD)
    before = path.read_text()
    runner = CliRunner()
    result = runner.invoke(
        app, ["sweep", "pick", "rl-lr", "lr1e-05-len50-0p0", "--root", str(tmp_path)]
    )
    assert result.exit_code == 2 and "has no results yet" in result.stderr
    _results(tmp_path, path, value=None)
    result = runner.invoke(
        app, ["sweep", "pick", "rl-lr", "lr1e-05-len50-0p0", "--root", str(tmp_path)]
    )
    assert result.exit_code == 2 and "has no value" in result.stderr
    result = runner.invoke(app, ["sweep", "pick", "rl-lr", "nope", "--root", str(tmp_path)])
    assert result.exit_code == 2 and "has no point 'nope'" in result.stderr
    assert path.read_text() == before


def test_a_sweep_is_not_inherited(tmp_path: Path, repo_root: Path) -> None:
    """A spec that extends one with a sweep is another experiment: the grid stays with the
    file that declares it (sweep names are unique in the project)."""
    parent = _spec(tmp_path, repo_root, GOOD)
    child = parent.with_name("child.yaml")
    child.write_text("extends: my-exp.yaml\nname: child\n")
    assert load_experiment(parent).sweep and not load_experiment(child).sweep
