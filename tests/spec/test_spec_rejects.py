"""Property tests that say what must be rejected: every generated value outside a
field's declared bounds (or of the wrong type, or an unknown key) is refused, with the
field's key path and the line that set it.

The fuzzers in test_loader_fuzz.py accept "a spec or errors" for any text, so a wrongly
accepted value passes them; these tests generate only invalid inputs, from the models'
own constraints, and fail on any that loads.
"""

from __future__ import annotations

import json
import math
import types
import typing

import annotated_types as at
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from rmsweb.spec import ExperimentSpec, SpecErrors, load_experiment

Path_ = tuple[str, ...]


def _models(annotation: object) -> list[tuple[str | None, type[BaseModel]]]:
    """The models a field holds: (kind, model) for each member of a union on `kind`."""
    members = (
        typing.get_args(annotation)
        if typing.get_origin(annotation)
        in (
            typing.Union,
            types.UnionType,
        )
        else (annotation,)
    )
    out = []
    for m in members:
        if isinstance(m, type) and issubclass(m, BaseModel):
            kind = m.model_fields.get("kind")
            literal = typing.get_args(kind.annotation) if kind is not None else ()
            out.append((literal[0] if literal else None, m))
    return out


def bounded_fields(
    model: type[BaseModel] = ExperimentSpec, path: tuple = ()
) -> list[tuple[tuple, object, list]]:
    """(path, annotation, bounds) of every numeric field with declared bounds; a path
    step is (name, kind) where the section is a union on `kind`."""
    found = []
    for name, f in model.model_fields.items():
        bounds = [m for m in f.metadata if isinstance(m, (at.Ge, at.Gt, at.Le, at.Lt))]
        if bounds:
            found.append(((*path, (name, None)), f.annotation, bounds))
        for kind, sub in _models(f.annotation):
            found += bounded_fields(sub, (*path, (name, kind)))
    return found


FIELDS = bounded_fields()


def spec_text(path: tuple, value: object) -> tuple[str, int]:
    """A spec setting `value` at `path` (block YAML), and the line the value is on."""
    lines = ["name: fuzz"]
    for depth, (name, kind) in enumerate(path):
        indent = "  " * depth
        if depth == len(path) - 1:
            lines.append(f"{indent}{name}: {json.dumps(value)}")
        else:
            lines.append(f"{indent}{name}:")
            if kind is not None:
                lines.append(f"{indent}  kind: {kind}")
    return "\n".join(lines) + "\n", len(lines)


def violations(annotation: object, bounds: list) -> st.SearchStrategy:
    """Values each of `bounds` refuses, plus values of the wrong type."""
    integral = int in (typing.get_args(annotation) or (annotation,))
    number = (
        st.integers
        if integral
        else (lambda lo=None, hi=None: st.floats(lo, hi, allow_nan=False, allow_infinity=False))
    )
    out = []
    for b in bounds:
        if isinstance(b, at.Ge):
            out.append(
                number(None, b.ge - 1)
                if integral
                else number(None, b.ge).filter(lambda v, x=b.ge: v < x)
            )
        elif isinstance(b, at.Gt):
            out.append(number(None, b.gt))
        elif isinstance(b, at.Le):
            out.append(
                number(b.le + 1, None)
                if integral
                else number(b.le, None).filter(lambda v, x=b.le: v > x)
            )
        elif isinstance(b, at.Lt):
            out.append(number(b.lt, None))
    wrong = st.sampled_from(["1", "ten", True, False, [1], {"a": 1}])  # strict: no coercion
    if integral:
        wrong = st.one_of(
            wrong,
            st.floats(allow_nan=False, allow_infinity=False).filter(
                lambda v: not float(v).is_integer()
            ),
        )
    return st.one_of(*out, wrong)


def field_and_value() -> st.SearchStrategy:
    return st.sampled_from(FIELDS).flatmap(
        lambda f: st.tuples(st.just(f[0]), violations(f[1], f[2]))
    )


def test_the_walk_finds_the_bounded_fields() -> None:
    dotted = {".".join(n for n, _ in p) for p, _, _ in FIELDS}
    assert {"sft.learning_rate", "mine.temperature", "compute.num_nodes"} <= dotted
    assert any(p[0] == ("rl", "salvage_ds") for p, _, _ in FIELDS)  # inside kind unions
    assert len(FIELDS) >= 40


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(field_and_value())
def test_every_value_outside_a_fields_bounds_is_refused_at_its_key_and_line(
    tmp_path_factory: pytest.TempPathFactory, case: tuple
) -> None:
    path, value = case
    if isinstance(value, float) and not math.isfinite(value):
        return
    text, line = spec_text(path, value)
    spec = tmp_path_factory.mktemp("s") / "fuzz.yaml"
    spec.write_text(text)
    key = ".".join(n for n, _ in path)
    with pytest.raises(SpecErrors) as info:
        load_experiment(spec)
    here = [e for e in info.value.errors if e.key == key]
    assert here, f"{key}={value!r} refused, but not at its key:\n{info.value}"
    assert any(e.pos.line == line for e in here), (key, value, str(info.value))


SECTIONS = [
    (n, k, m) for n, f in ExperimentSpec.model_fields.items() for k, m in _models(f.annotation)
]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.sampled_from(SECTIONS),
    st.from_regex(r"[a-z][a-z_]{0,15}", fullmatch=True),
)
def test_every_unknown_key_is_refused_at_its_key_path(
    tmp_path_factory: pytest.TempPathFactory, section: tuple, key: str
) -> None:
    name, kind, model = section
    if key in model.model_fields or key == "kind":
        return
    text, line = spec_text(((name, kind), (key, None)), 1)
    spec = tmp_path_factory.mktemp("s") / "fuzz.yaml"
    spec.write_text(text)
    with pytest.raises(SpecErrors) as info:
        load_experiment(spec)
    here = [e for e in info.value.errors if e.key == f"{name}.{key}"]
    assert here and here[0].pos.line == line, str(info.value)
