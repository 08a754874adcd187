"""Read YAML that may be hostile into plain data, keeping the line and column of every key.

PyYAML's SafeLoader builds no Python objects, but it is not safe against hostile
*shapes*, and its YAML 1.1 scalars surprise. This reader departs from it in five ways:

1. Size: at most MAX_CHARS characters (pure-Python PyYAML parses ~100 KB/s on a busy
   2-core machine, so this caps a parse at ~10 s).
2. Depth: at most MAX_DEPTH nested collections, counted through aliases. PyYAML's
   composer recurses ~3 Python frames per level, so deep nesting ended in a
   RecursionError; the check runs while composing, before the recursion gets deep.
3. Aliases: an alias to a collection that is still open (`a: &a [*a]`) is refused (it
   made a cyclic node graph and a RecursionError), and all aliases together may expand
   to at most MAX_ALIAS_VALUES values. A "billion laughs" file of a few hundred bytes
   (nine lists of nine aliases to the previous list, also via `<<:` merge keys) would
   otherwise expand to 10^9 values. The expansion is counted from the composed nodes'
   sizes, without expanding anything.
4. Tags: only plain data (mappings, lists, text, integers, floats, true/false, null).
   `!!python/...`, `!!binary`, `!!set`, local `!tags`, ... are errors at their own
   position, on mappings and lists too (SafeLoader's callers that walk nodes by hand
   ignored tags there).
5. Scalars follow YAML 1.2's core schema: only true/false are booleans (`count: yes`
   stays the text "yes", so an integer field refuses it instead of reading 1), `3e-06`
   is a float (as `dvc exp run -S` writes it), `012` is twelve (not octal ten), dates
   stay text. Integers beyond 64 bits and floats that overflow to infinity are errors.

Every failure, from the reader (a NUL byte), scanner, parser, composer or these
checks, becomes a Problem with a 1-based line and column; nothing else is raised.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.events import AliasEvent, MappingStartEvent, SequenceStartEvent

KeyPath = tuple[str | int, ...]

# A spec is a few KB and params.yaml holds every experiment (~3.5 KB each): 1 MiB
# leaves room for ~300 experiments.
MAX_CHARS = 1 << 20
# The deepest key path of a resolved spec is ~7 (exp.eval.policies.0.mistakes.error_kinds.0).
MAX_DEPTH = 32
# Anchors and aliases are fine for sharing a block; 10,000 values is far beyond that use.
MAX_ALIAS_VALUES = 10_000
# Integers beyond int64 fit no spec field (and int() refuses > 4,300 digits anyway).
MAX_INT_BITS = 63

TAG = "tag:yaml.org,2002:"
PLAIN_SCALAR_TAGS = {TAG + t for t in ("str", "int", "float", "bool", "null")}


@dataclass(frozen=True)
class Problem:
    line: int  # 1-based
    col: int  # 1-based
    path: KeyPath  # key path of the value the problem is about (() when unknown)
    message: str


class YAMLProblems(Exception):
    """One or more problems with a YAML text; nothing else escapes `load_plain`."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(f"{p.line}:{p.col} {p.message}" for p in problems))


class _ShapeError(yaml.MarkedYAMLError):
    """Raised inside the composer when a limit is crossed; reported as a Problem."""


def short_tag(tag: str) -> str:
    return "!!" + tag[len(TAG) :] if tag.startswith(TAG) else tag


# --------------------------------------------------------------------------- YAML 1.2 scalars

_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_INF_NAN = re.compile(r"^(?:[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")


def reads_as_number(text: str) -> bool:
    """Whether this reader resolves the plain scalar `text` to an int or a float (so a
    writer must quote it to keep it text)."""
    return bool(_INT.match(text) or _FLOAT.match(text) or _INF_NAN.match(text))


_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    if not _INT.match(text) or len(text) > 40:
        raise ConstructorError(None, None, f"{text[:40]!r} is not an integer", node.start_mark)
    if text.startswith("0o"):
        value = int(text[2:], 8)
    elif text.startswith("0x"):
        value = int(text[2:], 16)
    else:
        value = int(text, 10)
    if value.bit_length() > MAX_INT_BITS:
        raise ConstructorError(
            None, None, f"integer {text} is out of range (at most 2**63 - 1)", node.start_mark
        )
    return value


def _construct_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float:
    text = str(loader.construct_scalar(node))
    if _INF_NAN.match(text):
        return float(text.replace(".", "", 1))  # ".inf" -> "inf", "-.inf" -> "-inf"
    if not _FLOAT.match(text):
        raise ConstructorError(None, None, f"{text[:40]!r} is not a number", node.start_mark)
    value = float(text)
    if math.isinf(value):
        raise ConstructorError(
            None,
            None,
            f"number {text[:40]} is too large (write .inf for infinity)",
            node.start_mark,
        )
    return value


def _construct_bool(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> bool:
    text = str(loader.construct_scalar(node))
    if text not in _BOOLS:
        raise ConstructorError(
            None, None, f"{text[:40]!r} is not a boolean; write true or false", node.start_mark
        )
    return _BOOLS[text]


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 core-schema scalars and shape limits while composing."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        # Per open collection: [values composed inside it, collection depth below it].
        self._frames: list[list[int]] = []
        self._open_anchors: set[str] = set()
        self._shapes: dict[str, tuple[int, int]] = {}  # anchor -> (values, depth)
        self._alias_values = 0

    def _count(self, values: int, depth: int, mark: Any) -> None:
        if not self._frames:
            return
        if len(self._frames) + depth > MAX_DEPTH:
            raise _ShapeError(
                problem=f"nested deeper than {MAX_DEPTH} levels (counting aliases); "
                "a spec is a few levels deep",
                problem_mark=mark,
            )
        top = self._frames[-1]
        top[0] += values
        top[1] = max(top[1], depth)

    def compose_node(self, parent: Any, index: Any) -> Any:  # PyYAML hook, per node
        event: Any = self.peek_event()  # an alias, a scalar or a collection start
        anchor: str | None = event.anchor
        mark: Any = event.start_mark
        if isinstance(event, AliasEvent):
            if anchor in self._open_anchors:
                raise _ShapeError(
                    problem=f"alias *{anchor} refers to the collection that contains it "
                    "(a recursive alias); anchors may only refer to finished values",
                    problem_mark=mark,
                )
            values, depth = self._shapes.get(str(anchor), (1, 0))  # unknown: PyYAML reports
            self._alias_values += values
            if self._alias_values > MAX_ALIAS_VALUES:
                raise _ShapeError(
                    problem=f"aliases expand to more than {MAX_ALIAS_VALUES:,} values "
                    "(an alias bomb?); write the values out or share smaller blocks",
                    problem_mark=mark,
                )
            self._count(values, depth, mark)
            return super().compose_node(parent, index)
        if not isinstance(event, (MappingStartEvent, SequenceStartEvent)):
            node = super().compose_node(parent, index)
            if anchor is not None:
                self._shapes[anchor] = (1, 0)
            self._count(1, 0, mark)
            return node
        if len(self._frames) >= MAX_DEPTH:
            raise _ShapeError(
                problem=f"nested deeper than {MAX_DEPTH} levels; a spec is a few levels deep",
                problem_mark=mark,
            )
        self._frames.append([0, 0])
        if anchor is not None:
            self._open_anchors.add(anchor)
        node = super().compose_node(parent, index)
        values, depth = self._frames.pop()
        if anchor is not None:
            self._open_anchors.discard(anchor)
            self._shapes[anchor] = (values + 1, depth + 1)
        self._count(values + 1, depth + 1, mark)
        return node


# Replace YAML 1.1's implicit resolvers (yes/no/on/off booleans, sexagesimal and octal
# integers, timestamps, `=`) with YAML 1.2's core schema; keep `<<` merge keys.
_Loader.yaml_implicit_resolvers = {}
for _tag, _regexp, _first in (
    ("null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    ("int", _INT.pattern, list("-+0123456789")),
    ("float", _FLOAT.pattern, list("-+.0123456789")),
    ("float", _INF_NAN.pattern, list("-+.")),
    ("merge", r"^(?:<<)$", ["<"]),
):
    _Loader.add_implicit_resolver(TAG + _tag, re.compile(_regexp), _first)
_Loader.add_constructor(TAG + "int", _construct_int)
_Loader.add_constructor(TAG + "float", _construct_float)
_Loader.add_constructor(TAG + "bool", _construct_bool)


# --------------------------------------------------------------------------- errors


def _line_col(text: str, index: int) -> tuple[int, int]:
    index = max(0, min(index, len(text)))
    line_start = text.rfind("\n", 0, index) + 1
    return text.count("\n", 0, index) + 1, index - line_start + 1


def _problem(exc: yaml.YAMLError, text: str) -> Problem:
    """Any PyYAML error as a positioned Problem."""
    if isinstance(exc, yaml.reader.ReaderError):
        line, col = _line_col(text, exc.position)
        char = exc.character
        name = "a NUL byte" if char == 0 else f"character U+{char:04X}"
        return Problem(
            line,
            col,
            (),
            f"{name} is not allowed in YAML (control characters are refused); remove it.",
        )
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        if isinstance(exc, (_ShapeError, ConstructorError)):
            return Problem(line, col, (), ": ".join(filter(None, [exc.context, exc.problem])) + ".")
        problem = " ".join(filter(None, [exc.context, exc.problem]))
        ctx = exc.context_mark
        if ctx is not None and mark is not None and ctx.line != mark.line:
            problem += f" (the construct starts at line {ctx.line + 1})"
        return Problem(line, col, (), f"YAML syntax error: {problem}.")
    return Problem(1, 1, (), f"YAML error: {exc}")


# --------------------------------------------------------------------------- loading


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def load_plain(text: str) -> tuple[Any, dict[KeyPath, tuple[int, int]]]:
    """Parse one YAML document into plain data and the (line, col) of every key and item.

    Duplicate keys, non-text keys and refused tags are collected (all at once); syntax
    errors and crossed limits stop at the first. Raises only YAMLProblems.
    """
    if len(text) > MAX_CHARS:
        raise YAMLProblems(
            [
                Problem(
                    1,
                    1,
                    (),
                    f"the text is {len(text):,} characters; a spec is at most {MAX_CHARS:,} "
                    "(split it, or share sections with `extends:`).",
                )
            ]
        )
    try:
        loader = _Loader(text)  # the reader checks for NUL and control characters here
    except yaml.YAMLError as exc:
        raise YAMLProblems([_problem(exc, text)]) from None
    problems: list[Problem] = []
    positions: dict[KeyPath, tuple[int, int]] = {}

    def refused(node: yaml.Node, path: KeyPath, allowed: set[str]) -> bool:
        if node.tag in allowed:
            return False
        problems.append(
            Problem(
                *_mark(node),
                path,
                f"tag {short_tag(node.tag)} is not allowed: specs hold plain data (mappings, "
                "lists, text, numbers, true/false, null). Remove the tag.",
            )
        )
        return True

    def scalar(node: yaml.Node, path: KeyPath) -> Any:
        if refused(node, path, PLAIN_SCALAR_TAGS):
            return None
        try:
            return loader.construct_object(node, deep=True)
        except ConstructorError as exc:  # e.g. an integer past 64 bits: at its key path
            problems.append(Problem(*_mark(node), path, str(exc.problem or exc)))
            return None

    merged_counts: dict[int, int] = {}  # id(mapping node) -> pairs that came from `<<:`

    def flattened_pairs(node: yaml.MappingNode, path: KeyPath) -> tuple[list[Any], int]:
        """The node's pairs with `<<:` merges resolved (merged pairs first, as PyYAML puts
        them), and how many are merged. Cached: an aliased node is walked more than once,
        and after flattening its merged pairs no longer look merged."""
        if id(node) not in merged_counts:
            for key_node, value_node in node.value:
                if key_node.tag == TAG + "merge":
                    sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else []
                    for source in [value_node, *sources]:
                        if isinstance(source, yaml.Node):
                            refused(source, path, {TAG + "map", TAG + "seq"})
            explicit = sum(1 for key_node, _ in node.value if key_node.tag != TAG + "merge")
            loader.flatten_mapping(node)
            merged_counts[id(node)] = len(node.value) - explicit
        return node.value, merged_counts[id(node)]

    def walk(node: yaml.Node, path: KeyPath) -> Any:
        if isinstance(node, yaml.MappingNode):
            if refused(node, path, {TAG + "map"}):
                return None
            pairs, n_merged = flattened_pairs(node, path)
            out: dict[str, Any] = {}
            from_merge: set[str] = set()
            for i, (key_node, value_node) in enumerate(pairs):
                if isinstance(key_node, yaml.ScalarNode):
                    if refused(key_node, path, PLAIN_SCALAR_TAGS):
                        continue
                    key = loader.construct_object(key_node, deep=True)
                    shown = repr(str(key_node.value)[:40])
                else:
                    key = None
                    shown = "a list" if isinstance(key_node, yaml.SequenceNode) else "a mapping"
                if not isinstance(key, str):
                    problems.append(
                        Problem(
                            *_mark(key_node),
                            path,
                            f"key {shown} is not text; keys are names (quote a key that "
                            "must look like a number, true/false or null).",
                        )
                    )
                    continue
                if key in out and key not in from_merge:
                    first = positions[(*path, key)]
                    problems.append(
                        Problem(
                            *_mark(key_node),
                            (*path, key),
                            f"duplicate key (first set at line {first[0]}); YAML keeps only "
                            "one of them. Remove one.",
                        )
                    )
                    continue
                if key in out:  # a merged value, overridden by a later pair (YAML merge rule)
                    for stale in [p for p in positions if p[: len(path) + 1] == (*path, key)]:
                        del positions[stale]
                    from_merge.discard(key)
                if i < n_merged:
                    from_merge.add(key)
                positions[(*path, key)] = _mark(key_node)
                out[key] = walk(value_node, (*path, key))
            return out
        if isinstance(node, yaml.SequenceNode):
            if refused(node, path, {TAG + "seq"}):
                return None
            items = []
            for i, item in enumerate(node.value):
                positions[(*path, i)] = _mark(item)
                items.append(walk(item, (*path, i)))
            return items
        return scalar(node, path)

    try:
        root = loader.get_single_node()
        data = walk(root, ()) if root is not None else None
    except yaml.YAMLError as exc:
        raise YAMLProblems([_problem(exc, text)]) from None
    finally:
        loader.dispose()
    if problems:
        raise YAMLProblems(problems)
    return data, positions


__all__ = [
    "MAX_ALIAS_VALUES",
    "MAX_CHARS",
    "MAX_DEPTH",
    "Problem",
    "YAMLProblems",
    "load_plain",
]
