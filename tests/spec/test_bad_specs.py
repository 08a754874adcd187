"""Every spec in tests/specs/bad/ fails validation with exit 2 and `file:line:col key: msg`.

Each file states what it expects in `# expect: KEY line=N [file=F] msg=TEXT` lines.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rmsweb.cli import app

BAD = Path(__file__).resolve().parents[1] / "specs" / "bad"
EXPECT = re.compile(r"^# expect: (\S+) line=(\d+)(?: file=(\S+))? msg=(.+)$")


def expectations(path: Path) -> list[tuple[str, int, str, str]]:
    out = []
    for line in path.read_text().splitlines():
        m = EXPECT.match(line)
        if m:
            key, lineno, file, msg = m.groups()
            out.append((key, int(lineno), file or path.name, msg))
    return out


BAD_FILES = sorted(BAD.glob("*.yaml"))


def test_corpus_is_large_enough() -> None:
    assert len(BAD_FILES) >= 25
    assert all(expectations(p) for p in BAD_FILES), "every bad spec states its expectation"


@pytest.mark.parametrize("path", BAD_FILES, ids=lambda p: p.stem)
def test_bad_spec_reports_file_line_and_key(path: Path) -> None:
    result = CliRunner().invoke(app, ["validate", "-q", str(path)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [ln for ln in result.stderr.splitlines() if ln and "error(s)." not in ln]
    for key, lineno, file, msg in expectations(path):
        pattern = re.compile(
            rf"(^|/){re.escape(file)}:{lineno}:\d+ {re.escape(key)}: .*{re.escape(msg)}"
        )
        assert any(pattern.search(ln) for ln in lines), (
            f"expected {file}:{lineno} {key}: ...{msg}... in:\n{result.stderr}"
        )


def test_cycle_names_the_chain() -> None:
    result = CliRunner().invoke(app, ["validate", str(BAD / "extends_cycle_a.yaml")])
    assert "extends_cycle_a.yaml -> " in result.stderr
    assert "extends_cycle_b.yaml" in result.stderr


def test_invalid_overrides_exit_2(repo_root: Path) -> None:
    spec = str(repo_root / "experiments" / "miniwob-cpu.yaml")
    runner = CliRunner()
    bad_form = runner.invoke(app, ["validate", spec, "-o", "rl.anchor_weight"])
    assert bad_form.exit_code == 2
    assert "<override 1: rl.anchor_weight>:1:1 rl.anchor_weight:" in bad_form.stderr
    bad_value = runner.invoke(app, ["validate", spec, "-o", "rl.anchor_weight=-3"])
    assert bad_value.exit_code == 2
    assert "<override 1: rl.anchor_weight=-3>:1:1 rl.anchor_weight: " in bad_value.stderr
    bad_key = runner.invoke(app, ["validate", spec, "-o", "sft.max_stepz=3"])
    assert "Did you mean 'max_steps'" in bad_key.stderr


def test_real_process_exit_code_and_no_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "rmsweb", "validate", str(BAD / "several_errors.yaml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("several_errors.yaml:") == 3  # all errors at once
