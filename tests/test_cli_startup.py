"""`rmsweb --help`, `validate` and `compile` must not import heavy libraries."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("torch", "transformers", "trl", "peft", "playwright", "dvc", "sky", "duckdb", "pandas")


@pytest.mark.parametrize(
    "args", [["--help"], ["validate", "-q", "experiments"], ["compile", "--check"]]
)
def test_no_heavy_imports(args: list[str], repo_root: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "rmsweb", *args],
        cwd=repo_root,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {
        line.split("|")[-1].strip().split(".")[0]
        for line in proc.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert not imported & set(HEAVY), imported & set(HEAVY)
