"""Shared test settings: offline, no analytics, repository root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

os.environ.setdefault("DVC_NO_ANALYTICS", "1")
os.environ.setdefault("SKYPILOT_DISABLE_USAGE_COLLECTION", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture
def repo_root() -> Path:
    return ROOT


def _write_eval_run(folder: Path, outcomes: dict[tuple[str, int], bool], split: str) -> Path:
    """An eval run folder with one episodes Parquet: the columns the paired arithmetic
    reads (rmsweb.sweep.results.run_episodes), one row per (task, seed) outcome."""
    import duckdb

    (folder / "episodes").mkdir(parents=True)
    rows = ", ".join(
        f"('{task}', {seed}, {str(ok).lower()}, NULL, 3, 'eval', '{split}')"
        for (task, seed), ok in outcomes.items()
    )
    with duckdb.connect() as con:
        con.execute(
            f"COPY (SELECT * FROM (VALUES {rows}) AS t(task_id, seed, success, error, n_steps, "
            f"stage, split)) TO '{folder / 'episodes' / 'part-00000.parquet'}' (FORMAT parquet)"
        )
    return folder


@pytest.fixture
def write_eval_run() -> object:
    """`write_eval_run(folder, {(task, seed): success}, split)` -> the run folder."""
    return _write_eval_run
