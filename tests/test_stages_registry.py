"""The stage registry is the only list of stages, and everything it names exists."""

from __future__ import annotations

import importlib
from pathlib import Path

import yaml

from rmsweb.stages import STAGE_LIST, STAGES

ROOT = Path(__file__).resolve().parents[1]


def test_every_registered_module_and_dep_exists() -> None:
    for stage in STAGE_LIST:
        assert (ROOT / stage.module_file).is_file(), f"{stage.kind}: no {stage.module_file}"
        module = importlib.import_module(stage.module)
        assert callable(getattr(module, "main", None)), f"{stage.module} has no main(io)"
        for dep in stage.deps:
            assert (ROOT / dep).exists(), f"{stage.kind}: dep {dep} does not exist"


def test_stage_modules_are_named_stage_py_beside_their_code() -> None:
    for stage in STAGE_LIST:
        assert stage.module.endswith(".stage"), stage.module
        assert stage.verb == stage.kind  # one verb per stage, named as the stage


def test_cli_has_one_command_per_stage_and_no_other_spelling() -> None:
    from rmsweb.cli import app

    names = {c.name for c in app.registered_commands}
    assert set(STAGES) <= names
    assert "make-tiny-model" not in names


def test_dvc_yaml_leads_to_the_code_in_one_hop() -> None:
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert stages
    for name, entry in stages.items():
        kind = name.split("_", 1)[0].split("-", 1)[0]
        d = STAGES[kind]
        assert entry["deps"][0] == d.module_file, name
        assert d.module_file in entry["desc"], name
        assert entry["cmd"].startswith(f"rmsweb {d.verb} "), name
