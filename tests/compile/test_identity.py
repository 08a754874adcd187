"""The run key that names a stage's checkpoints in the bucket (rmsweb.compile.identity)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rmsweb.compile import load_project
from rmsweb.compile.identity import stage_run_key
from rmsweb.spec import load_experiment
from rmsweb.stages import STAGES


@pytest.fixture
def collected(tmp_path: Path) -> Path:
    out = tmp_path / "runs" / "collect" / "smoke"
    (out / "episodes").mkdir(parents=True)
    (out / "episodes" / "part-0.parquet").write_bytes(b"episodes v1")
    return out


@pytest.fixture
def code(tmp_path: Path, repo_root: Path) -> Path:
    """A copy of the sft stage's code deps, to edit."""
    root = tmp_path / "code"
    for rel in (STAGES["sft"].module_file, *STAGES["sft"].deps):
        src = repo_root / rel
        if src.is_dir():
            shutil.copytree(
                src, root / rel, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True
            )
        elif src.exists():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, root / rel)
    return root


def _key(spec, collected: Path, code: Path) -> str:
    return stage_run_key(spec, "sft", inputs={"collect": collected}, code_root=code)


def test_key_starts_with_the_compiled_identity(
    repo_root: Path, collected: Path, code: Path
) -> None:
    spec = load_experiment(repo_root / "experiments" / "smoke.yaml")
    compiled = next(s for s in load_project(repo_root).stages if s.name == "sft-s0_smoke")
    key = _key(spec, collected, code)
    assert key.startswith(compiled.identity + "-")
    assert key == _key(spec, collected, code)  # deterministic: a recovery finds its checkpoints


def test_key_follows_params_code_and_inputs(repo_root: Path, collected: Path, code: Path) -> None:
    path = repo_root / "experiments" / "smoke.yaml"
    base = _key(load_experiment(path), collected, code)
    # `dvc exp run -S smoke.sft.learning_rate=...`: the stage loads other params.
    assert _key(load_experiment(path, ["sft.learning_rate=0.0005"]), collected, code) != base
    # Upstream config the stage inherits (collect), too.
    assert _key(load_experiment(path, ["collect.max_retries=1"]), collected, code) != base
    # A downstream-only change (rl) keeps SFT's checkpoints usable.
    assert _key(load_experiment(path, ["rl.steps=3"]), collected, code) == base
    # Other collected data under the same config.
    (collected / "episodes" / "part-0.parquet").write_bytes(b"episodes v2")
    changed_data = _key(load_experiment(path), collected, code)
    assert changed_data != base
    # A fix in the trainer's code.
    sft_code = code / STAGES["sft"].module_file
    target = sft_code if sft_code.is_file() else next(sft_code.rglob("*.py"))
    target.write_text(target.read_text() + "\n# fix\n")
    assert _key(load_experiment(path), collected, code) != changed_data
