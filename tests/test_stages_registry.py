"""The stage registry is the only list of stages, and everything it names exists."""

from __future__ import annotations

import ast
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


def _sibling_imports(stage_file: Path, package: str) -> set[str]:
    """Modules of `package` (other than stage itself) that `stage_file` imports."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(stage_file.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package if node.level == 1 else (node.module or "")
            names = [node.module] if node.level == 1 and node.module else []
            if node.level == 0 and base.startswith(package + "."):
                names = [base.removeprefix(package + ".")]
            elif (node.level == 0 and base == package) or (node.level == 1 and not node.module):
                names = [a.name for a in node.names]
            found |= {n.split(".")[0] for n in names}
        elif isinstance(node, ast.Import):
            found |= {
                a.name.removeprefix(package + ".").split(".")[0]
                for a in node.names
                if a.name.startswith(package + ".")
            }
    return found - {"stage"}


def test_stage_modules_are_named_stage_py_beside_their_code() -> None:
    """Each stage's `main` is `<package>/stage.py`; that package is the stage's first
    dep (so a change to its code reruns it), and stage.py is a thin main beside the
    package's own modules: it imports at least one of them, each a file there."""
    for stage in STAGE_LIST:
        package, _, name = stage.module.rpartition(".")
        assert name == "stage", stage.module
        folder = package.replace(".", "/")
        assert stage.deps[0] == folder, (stage.kind, stage.deps)
        siblings = _sibling_imports(ROOT / stage.module_file, package)
        assert siblings, f"{stage.module_file} uses none of {folder}'s own modules"
        for sibling in siblings:
            assert (ROOT / folder / f"{sibling}.py").is_file() or (
                ROOT / folder / sibling / "__init__.py"
            ).is_file(), (stage.kind, sibling)


def test_cli_has_one_command_per_stage_and_no_other_spelling() -> None:
    from rmsweb.cli import app

    names = {c.name for c in app.registered_commands}
    groups = {g.name: g.typer_instance for g in app.registered_groups}
    for stage in STAGE_LIST:
        group, _, sub = stage.verb.partition(" ")  # `rmsweb sweep report`
        if sub:
            assert sub in {c.name for c in groups[group].registered_commands}, stage.verb
        else:
            assert stage.verb in names, stage.verb
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
