"""Fuzzing the spec loader: any text gives a spec or SpecErrors (file:line:col), in bounded time.

Inputs: arbitrary Unicode; a grammar of YAML fragments (anchors, aliases, merge keys,
tags, directives, YAML 1.1 scalars, control characters, huge numbers); plain data of
random shape dumped as YAML and then mutated; and dotted overrides. The only error
allowed out of parse, merge, override and validation is SpecErrors, and every error
has a position inside the text. The slowest input is reported at the end.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmsweb.spec import ExperimentSpec, SpecErrors
from rmsweb.spec.loader import (
    Located,
    apply_overrides,
    load_located,
    parse_yaml_located,
    validate_located,
)
from rmsweb.spec.safe_yaml import MAX_CHARS

# Generated inputs are a few KB; they load in 5-50 ms (1 s seen under load 7). 5 s on a 2-core
# machine is only crossed by a pathological path (an alias or nesting blow-up).
BOUND_S = 5.0
# YAML counts NEL, LS and PS as line breaks too (so positions count them).
YAML_LINE_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")
slowest: dict[str, tuple[float, str]] = {}


def timed(group: str, fn: Callable[[], Any], what: str, bound: float = BOUND_S) -> Any:
    start = time.perf_counter()
    try:
        result: Any = fn()
    except SpecErrors as exc:
        result = exc
    took = time.perf_counter() - start
    if took > slowest.get(group, (0.0, ""))[0]:
        slowest[group] = (took, what)
    assert took < bound, f"{took:.2f}s for {what}"
    return result


def load_text(text: str, group: str) -> ExperimentSpec | SpecErrors:
    def go() -> ExperimentSpec:
        return validate_located(parse_yaml_located(text, "fuzz.yaml"))

    result = timed(group, go, f"{len(text):,} chars, {text[:40]!r}")
    assert isinstance(result, (ExperimentSpec, SpecErrors))
    if isinstance(result, SpecErrors):
        lines = len(YAML_LINE_BREAK.split(text))
        for err in result.errors:
            assert err.pos.file == "fuzz.yaml"
            assert 1 <= err.pos.line <= lines + 1, err
            assert err.message
    return result


def report_lines(request: pytest.FixtureRequest, lines: list[str]) -> None:
    """Print past pytest's output capture, so `pytest -q` shows the figures."""
    plugins = request.config.pluginmanager
    reporter, capture = plugins.get_plugin("terminalreporter"), plugins.get_plugin("capturemanager")
    if reporter is None:
        return
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        reporter.write_line("")
        for line in lines:
            reporter.write_line(line)


@pytest.fixture(scope="module", autouse=True)
def report_slowest(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    report_lines(
        request,
        [
            f"spec loader slowest [{group}]: {took * 1000:.1f} ms ({what})"
            for group, (took, what) in sorted(slowest.items())
        ],
    )


FRAGMENTS = st.sampled_from(
    [
        "name", "suite", "kind", "miniwob", "tasks", "click-button", "sft", "max_steps", "rl",
        "eval", "policies", "compute", "envs", "seed", "extends", ":", ": ", " ", "  ", "\n",
        "\n  ", "- ", "[", "]", "{", "}", ",", "&a ", "*a", "&b ", "*b", "<<: *a", "<<: [*a, *b]",
        "!!python/object:os.system ", "!!python/name:os.system ", "!!binary ", "!foo ", "!!str ",
        "!!int ", "!!float ", "!!bool ", "!!null ", "!!set ", "!!omap ", "!!map ", "!!seq ", "? ",
        "---", "...", "%YAML 1.1\n", "%TAG ! tag:x,2000:\n", "yes", "no", "on", "off", "0o17",
        "0x1F", "1e999", "-.inf", ".nan", "012", "1_000", "2001-12-14", "3e-06", "'", '"', "\\",
        "\t", "\x00", "\x07", "\ufeff", "\ud800", "#", "|", ">", "=", "~", "null", "9" * 5000,
        "sk-proj-T3stOnly9xQ2mZ7vB4nL8kR1wY6pD0sF5hJ", "https://u:p@h/x",
    ]
)  # fmt: skip
yaml_like = st.lists(FRAGMENTS, max_size=60).map("".join)
any_unicode = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF))
KEYS = ["name", "suite", "kind", "tasks", "sft", "max_steps", "rl", "seed", "train", "count",
        "collect", "teacher", "eval", "policies", "compute", "envs", "x"]  # fmt: skip
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=20),
    st.sampled_from(["yes", "no", "3e-06", "0o17", "miniwob", "salvage_ds", "click-button"]),
)
plain = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(
            st.sampled_from(KEYS),
            inner,
            max_size=5,
        ),
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_unicode)
def test_any_unicode(text: str) -> None:
    load_text(text, "any unicode")


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(yaml_like)
def test_yaml_fragments(text: str) -> None:
    load_text(text, "yaml fragments")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plain, st.integers(0, 10_000), st.sampled_from(["", "&a ", "!!python/tuple ", "\x00", "*a"]))
def test_dumped_data_mutated(data: Any, where: int, insert: str) -> None:
    text = yaml.safe_dump({"name": "fuzz", "x": data}, allow_unicode=True)
    i = where % (len(text) + 1)
    load_text(text[:i] + insert + text[i:], "dumped and mutated")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(yaml_like, any_unicode), min_size=1, max_size=3))
def test_overrides(items: list[str]) -> None:
    def go() -> ExperimentSpec:
        located = apply_overrides(Located({"name": "fuzz"}, {}, "base.yaml"), items)
        return validate_located(located)

    assert isinstance(timed("overrides", go, repr(items)[:60]), (ExperimentSpec, SpecErrors))


def test_bad_bytes_and_huge_files_are_refused_fast(tmp_path: Path) -> None:
    cases = {
        "latin1.yaml": "name: caf\xe9\n".encode("latin-1"),
        "huge.yaml": b"name: x\n" + b"# padding\n" * (MAX_CHARS // 10 + 1),
        "huger.yaml": b"x" * (4 * MAX_CHARS + 10),
    }
    for name, raw in cases.items():
        path = tmp_path / name
        path.write_bytes(raw)
        result = timed("files", lambda p=path: load_located(p), name)  # type: ignore[misc]
        assert isinstance(result, SpecErrors), name
    assert "not UTF-8" in str(timed("files", lambda: load_located(tmp_path / "latin1.yaml"), ""))


def test_a_device_that_never_ends_is_read_boundedly() -> None:
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero")
    result = timed("files", lambda: load_located(Path("/dev/zero")), "/dev/zero")
    assert isinstance(result, SpecErrors)


def test_wide_alias_fanout_is_refused_before_it_expands() -> None:
    # One anchor of 1,000 values aliased 20 times: 20,000 values, past the limit.
    items = ", ".join(["x"] * 1000)
    text = f"name: fanout\na: &a [{items}]\nb: [{', '.join(['*a'] * 20)}]\n"
    result = load_text(text, "shapes")
    assert isinstance(result, SpecErrors) and "alias bomb" in str(result)


def test_anchors_for_sharing_still_work() -> None:
    text = (
        "name: shared\n"
        "suite: &s {kind: miniwob, tasks: [click-button, enter-text]}\n"
        "eval:\n  policies:\n    - &p {kind: checkpoint, name: sft, source: sft}\n"
        "    - {<<: *p, name: rl, source: rl}\n"
    )
    spec = load_text(text, "shapes")
    assert isinstance(spec, ExperimentSpec)
    assert [p.name for p in spec.eval.policies] == ["sft", "rl"]
