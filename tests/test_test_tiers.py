"""Every test marker but gpu and live is selected by a tier CI runs (.ci/run).

The tiers are the Makefile's pytest lines (`make test` takes pyproject's default `-m`);
a test whose markers no CI tier selects is a test nobody runs.
"""

from __future__ import annotations

import itertools
import re
import tomllib
from pathlib import Path

from _pytest.mark.expression import Expression

ROOT = Path(__file__).resolve().parents[1]
NEVER_IN_CI = {"gpu", "live"}  # need a GPU or the network beyond 127.0.0.1


def declared_markers() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    return {m.split(":")[0].strip() for m in config["ini_options"]["markers"]}


def default_expression() -> str:
    addopts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"][
        "addopts"
    ]
    return re.search(r"-m '([^']+)'", addopts).group(1)  # type: ignore[union-attr]


def ci_tiers() -> dict[str, str]:
    """make target -> the `-m` expression its pytest line runs, for the targets CI runs."""
    ci = (ROOT / ".ci" / "run").read_text()
    run = set(re.findall(r"^\s*(?:time\s+)?make (\w+)", ci, re.M))
    tiers: dict[str, str] = {}
    makefile = (ROOT / "Makefile").read_text()
    for target, body in re.findall(r"^(\w+):[^\n]*\n((?:\t[^\n]*\n)+)", makefile, re.M):
        m = re.search(r"pytest\b(.*)", body)
        if target in run and m:
            expr = re.search(r"-m\s+'([^']+)'|-m\s+(\S+)", m.group(1))
            tiers[target] = (expr.group(1) or expr.group(2)) if expr else default_expression()
    return tiers


def selects(expression: str, marks: set[str]) -> bool:
    return Expression.compile(expression).evaluate(lambda name, **_: name in marks)


def used_markers() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "tests").rglob("*.py"):
        found |= set(
            re.findall(r"(?<![\w.])pytest\.mark\.([a-z_]+)", path.read_text(encoding="utf-8"))
        )
    return found - {"parametrize", "skipif", "skip", "xfail", "usefixtures", "filterwarnings"}


def test_ci_runs_the_default_slow_and_fault_tiers() -> None:
    assert {"test", "slow", "faults"} <= set(ci_tiers())


def test_every_marker_combination_but_gpu_and_live_runs_in_some_ci_tier() -> None:
    tiers = ci_tiers()
    markers = sorted(declared_markers() - NEVER_IN_CI)
    missed = []
    for n in range(len(markers) + 1):
        for combo in itertools.combinations(markers, n):
            if not any(selects(expr, set(combo)) for expr in tiers.values()):
                missed.append(combo)
    assert not missed, f"no CI tier ({tiers}) selects tests marked {missed}"
    # and none runs what needs a GPU or the network, whatever else it is marked
    for n in range(len(markers) + 1):
        for combo in itertools.combinations(markers, n):
            for mark in NEVER_IN_CI:
                chosen = [t for t, e in tiers.items() if selects(e, {*combo, mark})]
                assert not chosen, f"{chosen} would run tests marked {(*combo, mark)}"


def test_every_marker_the_tests_use_is_declared() -> None:
    assert used_markers() <= declared_markers()
