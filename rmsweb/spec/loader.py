"""Load experiment specs: line-aware YAML, `extends:`, dotted overrides, all errors at once.

Layering (lowest first): model defaults, the `extends:` chain (deep merge;
lists and scalars replace; a mapping whose `kind` changes is replaced whole,
since a discriminated section's fields belong to its kind), the spec file,
then `-o key.path=value` overrides. Every key remembers the file, line and
column it came from, so errors point at the line that set the value, also
when it was inherited from a parent spec.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import yaml
from pydantic import BaseModel, ValidationError

from .common import SpecFieldError
from .experiment import ExperimentSpec

KeyPath = tuple[str | int, ...]


@dataclass(frozen=True)
class Pos:
    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True)
class SpecError:
    pos: Pos
    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.pos} {self.key or '<root>'}: {self.message}"


class SpecErrors(Exception):
    """One or more spec errors; `str()` gives one `file:line:col key: message` per line."""

    def __init__(self, errors: Sequence[SpecError]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(str(e) for e in self.errors))


@dataclass
class Located:
    """Plain YAML data plus the position of every key (and list item) in it."""

    data: dict[str, Any]
    positions: dict[KeyPath, Pos] = field(default_factory=dict)
    file: str = "<memory>"


def dotted(path: Iterable[str | int]) -> str:
    return ".".join(str(p) for p in path)


def display_path(path: Path) -> str:
    """A path as the user would type it: relative to the working directory when possible."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


# --------------------------------------------------------------------------- YAML


def _mark(node: yaml.Node, file: str) -> Pos:
    return Pos(file, node.start_mark.line + 1, node.start_mark.column + 1)


def parse_yaml_located(text: str, file: str) -> Located:
    """Parse one YAML document keeping positions; duplicate keys are errors."""
    errors: list[SpecError] = []
    if not text.strip() or all(
        not ln.strip() or ln.lstrip().startswith("#") for ln in text.splitlines()
    ):
        raise SpecErrors(
            [SpecError(Pos(file, 1, 1), "", "the file is empty; a spec needs at least `name:`.")]
        )
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = " ".join(filter(None, [exc.context, exc.problem]))
        ctx = exc.context_mark
        if ctx is not None and mark is not None and ctx.line != mark.line:
            problem += f" (the construct starts at line {ctx.line + 1})"
        raise SpecErrors(
            [SpecError(Pos(file, line, col), "", f"YAML syntax error: {problem}.")]
        ) from None
    except yaml.YAMLError as exc:
        raise SpecErrors([SpecError(Pos(file, 1, 1), "", f"YAML error: {exc}")]) from None
    positions: dict[KeyPath, Pos] = {}

    def walk(n: yaml.Node, path: KeyPath) -> Any:
        if isinstance(n, yaml.MappingNode):
            loader.flatten_mapping(n)  # resolves `<<:` merge keys
            out: dict[str, Any] = {}
            for key_node, value_node in n.value:
                key = loader.construct_object(key_node, deep=True)
                if not isinstance(key, str):
                    errors.append(
                        SpecError(
                            _mark(key_node, file), dotted(path), f"key {key!r} is not a string."
                        )
                    )
                    continue
                if key in out:
                    first = positions[(*path, key)]
                    errors.append(
                        SpecError(
                            _mark(key_node, file),
                            dotted((*path, key)),
                            f"duplicate key (first set at line {first.line}); YAML keeps only "
                            "one of them. Remove one.",
                        )
                    )
                    continue
                positions[(*path, key)] = _mark(key_node, file)
                out[key] = walk(value_node, (*path, key))
            return out
        if isinstance(n, yaml.SequenceNode):
            items = []
            for i, item in enumerate(n.value):
                positions[(*path, i)] = _mark(item, file)
                items.append(walk(item, (*path, i)))
            return items
        return loader.construct_object(n, deep=True)

    try:
        data = walk(node, ()) if node is not None else None
    except yaml.YAMLError as exc:
        raise SpecErrors([SpecError(Pos(file, 1, 1), "", f"YAML error: {exc}")]) from None
    finally:
        loader.dispose()
    if errors:
        raise SpecErrors(errors)
    if not isinstance(data, dict):
        kind = type(data).__name__ if data is not None else "nothing"
        raise SpecErrors(
            [SpecError(Pos(file, 1, 1), "", f"a spec must be a mapping of keys, not {kind}.")]
        )
    return Located(data, positions, file)


# --------------------------------------------------------------------------- merging


def _merge(base: Any, over: Any, path: KeyPath, replaced: set[KeyPath]) -> Any:
    """Deep-merge `over` onto `base`; record the paths where `over` replaced a subtree."""
    if isinstance(base, dict) and isinstance(over, dict):
        if "kind" in over and base.get("kind") != over["kind"]:
            replaced.add(path)  # another kind: the parent's fields belong to the old kind
            return dict(over)
        out = dict(base)
        for k, v in over.items():
            out[k] = _merge(base[k], v, (*path, k), replaced) if k in base else v
        return out
    replaced.add(path)
    return over


def merge_located(base: Located, over: Located) -> Located:
    """`over` layered on `base`: data deep-merged, positions of replaced subtrees dropped."""
    replaced: set[KeyPath] = set()
    data = _merge(base.data, over.data, (), replaced)
    replaced.discard(())

    def survives(p: KeyPath) -> bool:
        return not any(p[: len(r)] == r and len(p) > len(r) for r in replaced)

    positions = {p: pos for p, pos in base.positions.items() if survives(p)}
    positions.update(over.positions)
    return Located(data, positions, over.file)


# --------------------------------------------------------------------------- extends


def load_located(path: Path, _chain: tuple[Path, ...] = ()) -> Located:
    """Read a spec file and its `extends:` chain into one Located (no validation)."""
    shown = display_path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecErrors([SpecError(Pos(shown, 1, 1), "", "file not found.")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecErrors([SpecError(Pos(shown, 1, 1), "", f"cannot read: {exc}")]) from None
    here = parse_yaml_located(text, shown)
    parent_ref = here.data.pop("extends", None)
    if parent_ref is None:
        return here
    pos = here.positions.pop(("extends",))
    if not isinstance(parent_ref, str) or not parent_ref.strip():
        raise SpecErrors(
            [SpecError(pos, "extends", "must be a relative path to another spec file.")]
        )
    parent = (path.parent / parent_ref).resolve()
    chain = (*_chain, path.resolve())
    if parent in chain:
        cycle = " -> ".join(display_path(p) for p in (*chain, parent))
        raise SpecErrors([SpecError(pos, "extends", f"extends cycle: {cycle}. Break the loop.")])
    if not parent.is_file():
        raise SpecErrors(
            [
                SpecError(
                    pos,
                    "extends",
                    f"file {parent_ref!r} not found (looked at {display_path(parent)}); "
                    "the path is relative to this spec's folder.",
                )
            ]
        )
    return merge_located(load_located(parent, chain), here)


# --------------------------------------------------------------------------- overrides


NO_LIST_ITEM = (
    "no such list item to override (only lists written in the spec can be indexed; "
    "override the whole list instead, e.g. key=[...])."
)


def _parse_key(key: str) -> KeyPath:
    return tuple(int(p) if p.isdigit() else p for p in key.split("."))


def apply_overrides(located: Located, overrides: Sequence[str]) -> Located:
    """Apply `key.path=value` overrides (values parsed as YAML) on top of a spec."""
    errors: list[SpecError] = []
    for i, item in enumerate(overrides, start=1):
        where = f"<override {i}: {item}>"
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            errors.append(
                SpecError(
                    Pos(where, 1, 1),
                    key,
                    "an override must look like key.path=value (e.g. rl.anchor_weight=0.5).",
                )
            )
            continue
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError as exc:
            errors.append(SpecError(Pos(where, 1, len(key) + 2), key, f"bad value: {exc}"))
            continue
        path = _parse_key(key)
        nested: Any = value
        for part in reversed(path):
            nested = {part: nested} if isinstance(part, str) else nested
        if any(isinstance(p, int) for p in path):
            # List items are addressed in place: walk to the list and set the item.
            target: Any = located.data
            ok = True
            for part in path[:-1]:
                try:
                    target = target[part]
                except (KeyError, IndexError, TypeError):
                    ok = False
                    break
            if not ok or not isinstance(target, (dict, list)):
                errors.append(SpecError(Pos(where, 1, 1), key, NO_LIST_ITEM))
                continue
            try:
                target[path[-1]] = value
            except (IndexError, TypeError):
                errors.append(SpecError(Pos(where, 1, 1), key, NO_LIST_ITEM))
                continue
            located.positions[path] = Pos(where, 1, 1)
            continue
        over_positions = {path[:n]: Pos(where, 1, 1) for n in range(1, len(path) + 1)}
        located = merge_located(located, Located(nested, over_positions, located.file))
    if errors:
        raise SpecErrors(errors)
    return located


# --------------------------------------------------------------------------- validation


def _unwrap(annotation: Any) -> list[Any]:
    """The model classes an annotation can hold (through Optional/Annotated/list/dict)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType, list, dict, tuple):
        out = []
        for arg in typing.get_args(annotation):
            out.extend(_unwrap(arg))
        return out
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return []


def _model_at(path: KeyPath, data: Any) -> type[BaseModel] | None:
    """The spec model that validates the mapping at `path` (None if not a model)."""
    model: type[BaseModel] | None = ExperimentSpec
    node = data
    for part in path:
        if model is None:
            return None
        if isinstance(part, int):
            node = node[part] if isinstance(node, list) and part < len(node) else None
            continue
        info = model.model_fields.get(part)
        if info is None:
            return None
        node = node.get(part) if isinstance(node, dict) else None
        candidates = _unwrap(info.annotation)
        model = None
        if len(candidates) == 1:
            model = candidates[0]
        elif candidates:
            kind = node.get("kind") if isinstance(node, dict) else None
            if kind is None and isinstance(node, list):
                # list of a union: resolved at the next (index) step
                model = None
            for cand in candidates:
                kf = cand.model_fields.get("kind")
                if kf is not None and kf.default == kind:
                    model = cand
    return model


def _kinds_at(path: KeyPath, data: Any) -> list[str]:
    """The `kind` values a discriminated section at `path` accepts."""
    parent = _model_at(path[:-1], data) if path else None
    key = path[-1] if path else None
    if isinstance(key, int) and len(path) >= 2:  # an item of a list of unions
        parent, key = _model_at(path[:-2], data), path[-2]
    if parent is None or not isinstance(key, str) or key not in parent.model_fields:
        return []
    kinds = []
    for cand in _unwrap(parent.model_fields[key].annotation):
        kf = cand.model_fields.get("kind")
        if kf is not None and isinstance(kf.default, str):
            kinds.append(kf.default)
    return kinds


def _data_path(loc: Sequence[str | int], data: Any) -> KeyPath:
    """Map a pydantic error location onto the YAML data, dropping union-tag components."""
    out: list[str | int] = []
    node = data
    for part in loc:
        if (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and part < len(node)
        ):
            out.append(part)
            node = node[part]
        elif isinstance(node, dict) and node.get("kind") == part:
            continue  # discriminator tag inserted by pydantic
        elif isinstance(part, str) and ("[" in part or part.startswith("function-")):
            continue  # validator wrappers such as function-after[...]
        else:
            out.append(part)
            node = None
    return tuple(out)


def _position(path: KeyPath, located: Located) -> Pos:
    for n in range(len(path), 0, -1):
        pos = located.positions.get(path[:n])
        if pos is not None:
            return pos
    return Pos(located.file, 1, 1)


def _message(err: Mapping[str, Any], path: KeyPath, data: Any) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        model = _model_at(path[:-1], data)
        allowed = sorted(model.model_fields) if model else []
        close = difflib.get_close_matches(str(path[-1]), allowed, n=1, cutoff=0.5)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        return f"unknown key.{hint} Allowed here: {', '.join(allowed)}."
    if kind == "missing":
        return "required key is missing; add it."
    msg = str(err["msg"])
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if kind in ("union_tag_not_found", "union_tag_invalid"):
        kinds = _kinds_at(path[:-1], data)
        got = "missing `kind:`" if kind == "union_tag_not_found" else "unknown kind"
        msg = f"{got}; choose one of: {', '.join(kinds)}."
    return msg


def validation_errors(exc: ValidationError, located: Located) -> list[SpecError]:
    out: list[SpecError] = []
    for err in exc.errors():
        path = _data_path(err["loc"], located.data)
        ctx_error = (err.get("ctx") or {}).get("error")
        if isinstance(ctx_error, SpecFieldError):
            path = (*path, *_parse_key(ctx_error.field))
        if err["type"] in ("union_tag_invalid", "union_tag_not_found"):
            path = (*path, "kind")
        out.append(
            SpecError(_position(path, located), dotted(path), _message(err, path, located.data))
        )
    return out


def validate_located(located: Located) -> ExperimentSpec:
    try:
        return ExperimentSpec.model_validate(located.data)
    except ValidationError as exc:
        raise SpecErrors(validation_errors(exc, located)) from None


def load_experiment(path: str | Path, overrides: Sequence[str] = ()) -> ExperimentSpec:
    """Load, merge and validate one spec file; raises SpecErrors with every problem."""
    located = apply_overrides(load_located(Path(path)), overrides)
    return validate_located(located)


def load_from_params(params_file: str | Path, name: str) -> ExperimentSpec:
    """A stage's view: the resolved spec of experiment `name` from params.yaml.

    params.yaml is what `dvc exp run -S` edits, so stages read it rather than the
    experiment files. PyYAML reads some floats DVC writes (3e-06) as strings;
    pydantic's lax mode converts them back.
    """
    path = Path(params_file)
    located = load_located(path)
    if name not in located.data:
        known = ", ".join(sorted(located.data))
        raise SpecErrors(
            [
                SpecError(
                    Pos(display_path(path), 1, 1),
                    name,
                    f"no experiment {name!r} in params.yaml (has: {known}). "
                    "Run `rmsweb compile` after adding a spec.",
                )
            ]
        )
    section = located.data[name]
    positions = {
        p[1:]: pos for p, pos in located.positions.items() if p and p[0] == name and len(p) > 1
    }
    return validate_located(Located(section, positions, located.file))
