"""Names of the experiments a spec's sweeps and grid derive: `<spec or sweep>-<label>`."""

from __future__ import annotations

import json
from typing import Any

from .loader import _parse_key

# Point and cell names are experiment names, which stage names, folders and SQL carry.
MAX_NAME = 64  # ExperimentSpec.name's limit


def shown_value(values: dict[str, Any]) -> str:
    """An axis's value(s) at one point, as a table shows them (zipped keys: joined)."""
    return ", ".join(json.dumps(v) if not isinstance(v, str) else v for v in values.values())


def point_name(sweep: str, labels: dict[str, str]) -> str:
    """`<sweep>-<label>-...`: a word reads alone (`blind`), a number or a boolean after
    its axis's name (`lr3e-05`, `gatetrue`)."""
    parts = [
        label if label[0].isalpha() and label not in ("true", "false", "null") else axis + label
        for axis, label in labels.items()
    ]
    return "-".join([sweep, *parts])


def _nested(key: str, value: Any) -> dict[str, Any]:
    node: Any = value
    for part in reversed(_parse_key(key)):
        node = {part: node}
    return node
