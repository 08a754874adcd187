"""The README's DVC commands ("DVC's own views") run on the default experiment and give
the columns the README says.

`dvc exp show` there repeats `--keep`; before DVC 3.63 only the last `--keep` counted and
the command printed 2 columns instead of 18, so pyproject.toml asks for dvc>=3.63. The
commands run in a scratch git repository holding what they read from this one: the
experiments' summaries (metrics/summary/, git-tracked), params.yaml and dvc.yaml's
top-level `metrics:` entry (its stages are not needed to show metrics and params).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DVC_NEEDED = (3, 63)
# the dvc beside this Python (the venv's), else the one on PATH
DVC = next(
    (str(p) for p in (Path(sys.executable).with_name("dvc"),) if p.exists()),
    shutil.which("dvc") or "dvc",
)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:2])


def readme_commands() -> dict[str, tuple[list[str], str]]:
    """The README's `dvc metrics show` and `dvc exp show` commands as argument lists, with
    the comment each ends in."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"### DVC's own views\n\n```bash\n(.*?)```", readme, re.S)
    assert block, "README: the code block under '### DVC's own views' moved"
    text = block.group(1).replace("\\\n", " ")  # continued lines
    found = {}
    for line in text.splitlines():
        command, _, comment = line.partition("#")
        args = shlex.split(command)
        if args[:3] in (["dvc", "metrics", "show"], ["dvc", "exp", "show"]):
            found[" ".join(args[:3])] = (args, comment.strip())
    assert set(found) == {"dvc metrics show", "dvc exp show"}, found
    return found


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("readme-dvc")
    shutil.copytree(ROOT / "metrics" / "summary", root / "metrics" / "summary")
    shutil.copy(ROOT / "params.yaml", root / "params.yaml")
    dvc_yaml = (ROOT / "dvc.yaml").read_text(encoding="utf-8")
    metrics = re.search(r"^metrics:\n(?:- .*\n)+", dvc_yaml, re.M)
    assert metrics, "dvc.yaml has no top-level metrics: entry"
    (root / "dvc.yaml").write_text(metrics.group(0), encoding="utf-8")

    def run(*args: str) -> None:
        subprocess.run(args, cwd=root, check=True, capture_output=True, timeout=300)

    run("git", "init", "-q")
    run("git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty",
        "-m", "empty")  # fmt: skip
    run(DVC, "init", "-q")
    run("git", "add", "-A")
    run("git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "views")
    return root


def dvc_run(repo: Path, args: list[str]) -> str:
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", "COLUMNS": "2000"}
    proc = subprocess.run(
        [DVC, *args[1:]], cwd=repo, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_pyproject_pins_the_dvc_the_readme_needs() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [d for d in deps if re.match(r"dvc\s*[><=]", d)]
    assert _version(pin.split(">=", 1)[1]) >= DVC_NEEDED, pin
    assert _version(version("dvc")) >= DVC_NEEDED, f"installed dvc {version('dvc')}"


def test_readme_exp_show_gives_the_columns_it_names(repo: Path) -> None:
    args, comment = readme_commands()["dvc exp show"]
    want = re.match(r"(\d+) columns", comment)
    assert want, f"README: the comment after `dvc exp show` names no column count: {comment!r}"
    header = dvc_run(repo, [*args, "--csv"]).splitlines()[0].split(",")
    assert len(header) == int(want.group(1)), header
    assert header[:2] == ["Experiment", "Created"]
    assert header[-2:] == ["miniwob-cpu.sft.learning_rate", "miniwob-cpu.rl.learning_rate"]
    summary = {k for k in header if "/" in k or k in ("wall_min", "cost_usd")}
    default = (repo / "metrics" / "summary" / "miniwob-cpu.json").read_text()
    for key in summary:  # DVC prefixes a key that several summaries have with its file
        assert f'"{key.rpartition(":")[2]}"' in default, key


def test_readme_metrics_show_gives_one_row_per_experiment(repo: Path) -> None:
    args, comment = readme_commands()["dvc metrics show"]
    assert "12-20 columns" in comment, comment
    lines = [line.split() for line in dvc_run(repo, args).splitlines() if line.strip()]
    header, rows = lines[0], lines[1:]
    # The union of the summaries' keys: evaluation suites add a success column each.
    assert header[0] == "Path" and 12 <= len(header) - 1 <= 20, header
    summaries = sorted((repo / "metrics" / "summary").glob("*.json"))
    assert [r[0] for r in rows] == [f"metrics/summary/{p.name}" for p in summaries]
    default = next(r for r in rows if r[0] == "metrics/summary/miniwob-cpu.json")
    # Its own summary's every key filled; the others' keys (e.g. a suite it does not
    # evaluate) shown as "-".
    own = json.loads((repo / "metrics" / "summary" / "miniwob-cpu.json").read_text())
    assert len(default) == len(header)
    assert sum(cell != "-" for cell in default[1:]) == len(own), (default, sorted(own))
