"""benchmarks/mine_throughput.py end to end on tiny inputs: a tiny random text model as
the SFT checkpoint, one train seed of two MiniWoB tasks, in a real headless Chromium."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import re
import sys
from pathlib import Path

import pytest

from rmsweb.spec import ExperimentSpec

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "mine_throughput.py"
LAST_LINE = re.compile(r"eval_eps=(\d+\.\d+) mine_eps=(\d+\.\d+) ratio=(\d+\.\d+)")
# max_new_tokens 6, max_steps 2 (shrunk): a random tiny model never stops early
SPEC = {
    "name": "mine-bench",
    "model": {"kind": "tiny", "prompt": {"system": "none", "max_new_tokens": 6}},
    "mine": {"fragile_k": 2},
    "suite": {
        "kind": "miniwob",
        "tasks": ["click-button", "focus-text"],
        "max_steps": 2,
        "browser": {"contexts": 1},
    },
}


@pytest.mark.browser
def test_mine_throughput_prints_its_result_line(
    tiny_text_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = importlib.util.spec_from_file_location("mine_throughput", SCRIPT)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["mine_throughput"] = bench
    spec.loader.exec_module(bench)
    import rmsweb.spec

    experiment = ExperimentSpec.model_validate(SPEC)
    monkeypatch.setattr(rmsweb.spec, "load_from_params", lambda _path, _name: experiment)
    args = argparse.Namespace(exp="mine-bench", model=tiny_text_dir, seeds=1, threads=1)
    asyncio.run(bench.main(args))
    printed = capsys.readouterr().out.strip().splitlines()
    assert LAST_LINE.fullmatch(printed[-1]), printed[-1]
    assert any(line.startswith("mine k=2: ") for line in printed)
