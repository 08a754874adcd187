"""Imports go one way: down the layers of DESIGN.md §3, with no cycles.

The graph is read from the source (ast). Between packages every import counts
wherever it is (module level, inside functions, under TYPE_CHECKING): a lazy or
type-only import is still a dependency of the design. Between modules, a cycle
through a lazy import is still a cycle; only type-only references (under
TYPE_CHECKING, never executed) may point back.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "rmsweb"

# Top to bottom. A package may import packages in lower layers only: not its own
# layer (no sideways edges, so no two packages import each other) and never up.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__main__",),
    ("cli",),
    ("evalckpt", "regime"),  # stages built from others: replays train's RL, runs evaluate's eval
    ("sweep",),  # ranks other stages' metrics; its commands read reports and write specs
    ("collect", "mine", "train", "evaluate", "report"),  # the stage packages
    ("rollout", "judge"),
    ("agents", "suites"),
    ("store",),
    ("env", "models"),
    ("pipeline_time",),  # estimates a run of pipeline's plan from the stages' metrics
    ("compile", "stage_io", "distributed", "pipeline"),
    ("spec",),
    ("errors", "stages"),  # leaves: import nothing from rmsweb
)
RANK = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_only_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes inside `if TYPE_CHECKING:` blocks."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                inside |= {id(n) for n in ast.walk(child)}
    return inside


def _imports(path: Path, type_only: bool = True) -> set[str]:
    """Dotted rmsweb modules imported by a file (relative imports resolved)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = set() if type_only else _type_only_nodes(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            # `from pkg import module` imports pkg.module
            found |= {f"{target}.{a.name}" for a in node.names}
    return {m for m in found if m == "rmsweb" or m.startswith("rmsweb.")}


def _existing(module: str, modules: set[str]) -> str | None:
    while module and module not in modules:
        module = module.rpartition(".")[0]
    return module or None


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "rmsweb"


def module_graph(type_only: bool = True) -> dict[str, set[str]]:
    files = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in files.items():
        for target in _imports(path, type_only):
            resolved = _existing(target, set(files))
            if resolved and resolved != module and resolved != "rmsweb":
                graph[module].add(resolved)
    return graph


def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for src, targets in module_graph().items():
        for dst in targets:
            a, b = _package(src), _package(dst)
            if a != b:
                graph[a].add(b)
    return graph


def test_every_package_has_a_layer() -> None:
    packages = {_package(_module_name(p)) for p in ROOT.rglob("*.py")} - {"rmsweb"}
    missing = sorted(packages - set(RANK))
    assert not missing, f"add these packages to LAYERS (and DESIGN.md §3): {missing}"


def test_imports_only_go_down() -> None:
    bad = [
        f"{src} -> {dst}"
        for src, targets in sorted(package_graph().items())
        for dst in sorted(targets)
        if RANK[dst] <= RANK[src]
    ]
    assert not bad, (
        "imports that go up or sideways (layers: "
        + " > ".join("/".join(layer) for layer in LAYERS)
        + "): "
        + ", ".join(bad)
    )


def test_no_module_cycles() -> None:
    """Also not through a type-only import: env/types.py <-> env/actions.py was the last
    such circle (untied by moving Action into types.py)."""
    graph = module_graph(type_only=True)
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_graph_reader_sees_lazy_and_relative_imports(tmp_path: Path) -> None:
    """The reader itself: an import inside a function and a relative import both count."""
    pkg = ROOT / "models"
    lazy = _imports(pkg / "tiny.py")
    assert "rmsweb.models.config" in lazy  # `from .config import ...`
    assert "rmsweb.models.processor" in lazy  # imported inside save_tiny_model
    runner = ROOT / "rollout" / "runner.py"
    assert "rmsweb.env.guard" in _imports(runner)  # under TYPE_CHECKING only
    assert "rmsweb.env.guard" not in _imports(runner, type_only=False)
    assert not _imports(ROOT / "env" / "types.py")  # the value types import nothing of ours
