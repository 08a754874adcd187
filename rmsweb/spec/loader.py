"""Load experiment specs: line-aware YAML, `extends:`, dotted overrides, all errors at once.

Layering (lowest first): model defaults, the `extends:` chain (deep merge;
lists and scalars replace; a mapping whose `kind` changes is replaced whole,
since a discriminated section's fields belong to its kind; a parent's `sweep:`
is not inherited), the spec file, then `-o key.path=value` overrides. Every key
remembers the file, line and column it came from, so errors point at the line
that set the value, also when it was inherited from a parent spec.

Files and override values are read by safe_yaml (bounded size, depth and alias
expansion, plain tags, YAML 1.2 scalars); validation is strict (no true -> 1, no
"10" -> 10), and secret-looking values are refused (secret_scan).
"""

from __future__ import annotations

import copy
import difflib
import functools
import re
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from pydantic import BaseModel, ValidationError

from .common import SpecFieldError
from .experiment import ExperimentSpec
from .safe_yaml import MAX_CHARS, MAX_DEPTH, YAMLProblems, load_plain
from .secret_scan import find_secrets, secret_message

KeyPath = tuple[str | int, ...]
# Real chains are 1-3 files; each level is a recursive call.
MAX_EXTENDS = 16


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


def parse_yaml_located(text: str, file: str) -> Located:
    """Parse one YAML document keeping positions (see safe_yaml: limits, tags, YAML 1.2)."""
    if not text.strip() or all(
        not ln.strip() or ln.lstrip().startswith("#") for ln in text.splitlines()
    ):
        raise SpecErrors(
            [SpecError(Pos(file, 1, 1), "", "the file is empty; a spec needs at least `name:`.")]
        )
    try:
        data, marks = load_plain(text)
    except YAMLProblems as exc:
        raise SpecErrors(
            [SpecError(Pos(file, p.line, p.col), dotted(p.path), p.message) for p in exc.problems]
        ) from None
    if not isinstance(data, dict):
        kind = type(data).__name__ if data is not None else "nothing"
        raise SpecErrors(
            [SpecError(Pos(file, 1, 1), "", f"a spec must be a mapping of keys, not {kind}.")]
        )
    positions = {path: Pos(file, line, col) for path, (line, col) in marks.items()}
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


def spec_root(path: Path) -> Path:
    """The folder an `extends:` chain may not leave: the repository holding the spec (the
    nearest folder above it with `.git` or `pyproject.toml`), else the spec's own folder.

    So a spec can share sections with any spec of its project (experiments/, tests/specs/),
    and never reads /etc/passwd or a file of another project by `extends: /abs/path` or
    `../../..`."""
    here = path.resolve().parent
    for folder in (here, *here.parents):
        if (folder / ".git").exists() or (folder / "pyproject.toml").is_file():
            return folder
    return here


def load_located(path: Path, _chain: tuple[Path, ...] = (), _root: Path | None = None) -> Located:
    """Read a spec file and its `extends:` chain into one Located (no validation).

    Each parent must lie inside `spec_root` of the first spec (symbolic links resolved).
    An error while reading a parent (not found, not YAML, too large) names the line of
    the `extends:` that led there, as well as the parent's own line.
    """
    root = _root if _root is not None else spec_root(path)
    here = _read_one(path)
    parent_ref = here.data.pop("extends", None)
    if parent_ref is None:
        return here
    pos = here.positions.pop(("extends",))

    def fail(message: str) -> SpecErrors:
        return SpecErrors([SpecError(pos, "extends", message)])

    if not isinstance(parent_ref, str) or not parent_ref.strip():
        raise fail("must be a relative path to another spec file.")
    if Path(parent_ref).is_absolute() or parent_ref.startswith("~"):
        raise fail(
            f"{parent_ref!r} is an absolute path; write the parent's path relative to this "
            "spec's folder (it must stay inside the project)."
        )
    parent = (path.parent / parent_ref).resolve()
    if not parent.is_relative_to(root):
        raise fail(
            f"{parent_ref!r} leads outside the project ({display_path(parent)} is not under "
            f"{display_path(root)}); a parent spec must be a file of the same repository."
        )
    chain = (*_chain, path.resolve())
    if parent in chain:
        cycle = " -> ".join(display_path(p) for p in (*chain, parent))
        raise fail(f"extends cycle: {cycle}. Break the loop.")
    if len(chain) >= MAX_EXTENDS:
        raise fail(f"the extends chain is longer than {MAX_EXTENDS} files; flatten it.")
    if not parent.is_file():
        raise fail(
            f"file {parent_ref!r} not found (looked at {display_path(parent)}); "
            "the path is relative to this spec's folder."
        )
    try:
        base = load_located(parent, chain, root)
        # A sweep belongs to the file that declares it: a spec that extends it is another
        # experiment, whose own grid (if any) is its own (sweep names are project-unique).
        base.data.pop("sweep", None)
        base.positions = {p: q for p, q in base.positions.items() if p[:1] != ("sweep",)}
    except SpecErrors as exc:
        via = f" (in the spec extended at {pos})"
        raise SpecErrors(
            [
                e if e.pos.file == pos.file else SpecError(e.pos, e.key, e.message + via)
                for e in exc.errors
            ]
        ) from None
    return merge_located(base, here)


def _read_one(path: Path) -> Located:
    """One spec file, parsed with positions (bounded read, UTF-8 checked)."""
    shown = display_path(path)
    try:
        with path.open("rb") as f:
            # Read a bounded amount, also from /dev/zero or a FIFO: MAX_CHARS characters
            # take at most 4 bytes each in UTF-8.
            raw = f.read(4 * MAX_CHARS + 1)
    except FileNotFoundError:
        raise SpecErrors([SpecError(Pos(shown, 1, 1), "", "file not found.")]) from None
    except OSError as exc:
        raise SpecErrors([SpecError(Pos(shown, 1, 1), "", f"cannot read: {exc}")]) from None
    if len(raw) > 4 * MAX_CHARS:
        raise SpecErrors(
            [SpecError(Pos(shown, 1, 1), "", f"the file is larger than {4 * MAX_CHARS:,} bytes.")]
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - raw.rfind(b"\n", 0, exc.start)
        raise SpecErrors(
            [
                SpecError(
                    Pos(shown, line, col), "", f"not UTF-8 text ({exc.reason}); save it as UTF-8."
                )
            ]
        ) from None
    # A compile reads the default spec once for every spec that extends it (20-odd times),
    # and parsing is most of loading: parse each text once, hand out copies (the caller
    # edits what it gets).
    parsed = _parse_once(text, shown)
    return Located(copy.deepcopy(parsed.data), dict(parsed.positions), parsed.file)


@functools.lru_cache(maxsize=32)
def _parse_once(text: str, file: str) -> Located:
    return parse_yaml_located(text, file)


# --------------------------------------------------------------------------- overrides


NO_LIST_ITEM = (
    "no such list item to override (only lists written in the spec can be indexed; "
    "override the whole list instead, e.g. key=[...])."
)


def _parse_key(key: str) -> KeyPath:
    # ASCII digits only: str.isdigit() is also true for "²", which int() refuses.
    return tuple(int(p) if re.fullmatch(r"[0-9]{1,9}", p) else p for p in key.split("."))


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
        if key.count(".") >= MAX_DEPTH:
            errors.append(
                SpecError(Pos(where, 1, 1), key[:80], f"key path deeper than {MAX_DEPTH} levels.")
            )
            continue
        try:
            value = load_plain(raw)[0] if raw.strip() else ""
        except YAMLProblems as exc:
            offset = item.index("=") + 1  # columns of the value within the override
            errors += [
                SpecError(Pos(where, 1, offset + p.col), key, f"bad value: {p.message}")
                for p in exc.problems
            ]
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
        elif (
            isinstance(node, dict)
            and node.get("kind", part) == part
            and ("kind" in node or part in _kinds_at(tuple(out), data))
        ):
            continue  # discriminator tag inserted by pydantic (also for a defaulted kind)
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
    if kind in _EXPECTED:
        want = _EXPECTED[kind]
        msg = (
            f"expected {want}, got {_describe(err['input'])}. Fix: {_type_fix(want, err['input'])}"
        )
    return msg


# Type errors of strict validation: what the field wants, in words.
_EXPECTED = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "text",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
}
# Words YAML 1.1 (PyYAML, older tools) reads as booleans; rmsweb reads them as text.
_YAML11_BOOLS = {"yes", "no", "on", "off", "y", "n"}


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the text {value[:40]!r}"
    if isinstance(value, (list, dict)):
        return "a list" if isinstance(value, list) else "a mapping"
    return type(value).__name__


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _type_fix(want: str, value: Any) -> str:
    """How to fix a value of the wrong type, for the surprises YAML's coercions cause."""
    if want in ("an integer", "a number"):
        if isinstance(value, bool):
            return "write a number; true/false are booleans, not 1/0."
        if isinstance(value, str) and value.strip().lower() in _YAML11_BOOLS:
            return (
                f"write a number. ({value!r} is text here: only true/false are booleans, "
                "though YAML 1.1 tools read yes/no/on/off as booleans too.)"
            )
        if isinstance(value, str) and _is_number(value):
            return "remove the quotes."
        if isinstance(value, float) and want == "an integer":
            return "write a whole number, without a decimal point."
        return f"write {want}."
    if want == "true or false":
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return "remove the quotes."
        if isinstance(value, str) and value.strip().lower() in _YAML11_BOOLS:
            return "write true or false (yes/no/on/off are text in rmsweb's YAML 1.2)."
        return "write true or false."
    if want == "text" and isinstance(value, (bool, int, float)):
        return "quote the value (YAML reads it unquoted as a number or boolean)."
    if want == "a list":
        return "write a list, e.g. [a, b] (a single item is [a])."
    return f"write {want}."


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
    """Validate strictly, and refuse secret-looking values; every error at once."""
    secrets = [
        SpecError(_position(f.path, located), dotted(f.path), secret_message(f))
        for f in find_secrets(located.data)
    ]
    try:
        # Strict: no bool -> int, no "10" -> 10, no 1 -> "1"; the YAML reader already
        # gives YAML 1.2 numbers (3e-06 is a float), so nothing needs lax coercion.
        spec = ExperimentSpec.model_validate(located.data, strict=True)
    except ValidationError as exc:
        raise SpecErrors(validation_errors(exc, located) + secrets) from None
    if secrets:
        raise SpecErrors(secrets)
    return spec


def load_experiment(path: str | Path, overrides: Sequence[str] = ()) -> ExperimentSpec:
    """Load, merge and validate one spec file; raises SpecErrors with every problem.
    (Without its sweeps' points: rmsweb.spec.load_experiment, in points.py, checks
    those too.)"""
    return validate_located(apply_overrides(load_located(Path(path)), overrides))


def load_from_params(params_file: str | Path, name: str) -> ExperimentSpec:
    """A stage's view: the resolved spec of experiment `name` from params.yaml.

    params.yaml is what `dvc exp run -S` edits, so stages read it rather than the
    experiment files. DVC writes floats like 3e-06, which YAML 1.1 reads as text;
    the reader here follows YAML 1.2, where they are floats (see safe_yaml).
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
