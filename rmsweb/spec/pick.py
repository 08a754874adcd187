"""`rmsweb sweep pick`: write a sweep point's values into its spec file.

The values of the point's axes (not the sweep's `base`, which is how the sweep was
run, not what it chose) are set in the spec file itself, each with a comment naming
the sweep's results file and the point's value there, so the number that chose the
setting can be found from the line that holds it. The file is edited with
ruamel.yaml's round trip (comments, order and flow style kept); the result is
validated before it replaces the file, so a failed pick leaves the spec as it was.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .loader import SpecErrors, _parse_key
from .points import load_experiment


class PickError(ValueError):
    """The pick cannot be made (the message says why and what to do)."""


def pick_comment(sweep: str, results_file: str, point: str, value: float | None) -> str:
    shown = "no value" if value is None else f"{value:.4g}"
    return f"chosen by sweep {sweep}: {results_file} (point {point}: {shown})"


def _set(node: Any, path: tuple[str | int, ...], value: Any, comment: str) -> None:
    from ruamel.yaml.comments import CommentedMap

    for i, part in enumerate(path[:-1]):
        child = node.get(part) if isinstance(node, Mapping) else None
        if child is None:
            child = CommentedMap()
            node[part] = child
        elif not isinstance(child, Mapping):
            where = ".".join(str(p) for p in path[: i + 1])
            raise PickError(f"{where} is not a mapping in the spec file; edit it by hand.")
        node = child
    last = path[-1]
    node[last] = value
    # A plain dict (never from the round trip) keeps the value without the comment.
    with contextlib.suppress(AttributeError, TypeError):
        node.yaml_add_eol_comment("# " + comment, last)


def float_text(value: float) -> str:
    """A float as YAML 1.1 readers read it too: 3e-05 is text to PyYAML, 3.0e-05 a float."""
    text = repr(value)
    if "e" in text and "." not in text.split("e")[0]:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.0e{exponent}"
    return text


def _float(representer: Any, value: float) -> Any:
    return representer.represent_scalar("tag:yaml.org,2002:float", float_text(value))


def write_pick(spec_file: Path, values: Mapping[str, Any], comment: str) -> str:
    """Set dotted `values` in `spec_file` with `comment`; returns the new text. Raises
    PickError (nothing written) when the result is not a valid spec."""
    from ruamel.yaml import YAML

    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.representer.add_representer(float, _float)
    text = spec_file.read_text(encoding="utf-8")
    data = yaml.load(text)
    for key, value in values.items():
        _set(data, _parse_key(key), value, comment)
    buf = io.StringIO()
    yaml.dump(data, buf)
    new = buf.getvalue()
    tmp = spec_file.with_name(f".{spec_file.name}.{os.getpid()}.pick")
    tmp.write_text(new, encoding="utf-8")
    try:
        load_experiment(tmp)
    except SpecErrors as exc:
        tmp.unlink(missing_ok=True)
        raise PickError(f"the picked values do not make a valid spec:\n{exc}") from None
    tmp.replace(spec_file)  # whole or not at all
    return new
