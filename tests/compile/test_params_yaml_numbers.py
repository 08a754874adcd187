"""params.yaml keeps text as text for the stages' YAML 1.2 reader (a sweep label "09")."""

from __future__ import annotations

import pytest

from rmsweb.compile.dvcfile import _dump
from rmsweb.spec.safe_yaml import load_plain

LOOK_LIKE_NUMBERS = [
    "09",
    "0",
    "007",
    "-12",
    "1e-5",
    "3.0e-06",
    ".5",
    "0x1F",
    "0o17",
    ".inf",
    ".nan",
]


@pytest.mark.parametrize("text", LOOK_LIKE_NUMBERS)
def test_text_that_yaml_1_2_reads_as_a_number_is_quoted(text: str) -> None:
    data, _ = load_plain(_dump({"labels": [text]}))
    assert data == {"labels": [text]}


def test_numbers_and_plain_words_are_written_as_before() -> None:
    out = _dump({"a": 9, "b": 3e-06, "c": "lr1e-05", "d": "r25", "e": True, "f": None})
    assert out == "a: 9\nb: 3.0e-06\nc: lr1e-05\nd: r25\ne: true\nf: null\n"
    data, _ = load_plain(out)
    assert data == {"a": 9, "b": 3e-06, "c": "lr1e-05", "d": "r25", "e": True, "f": None}


def test_the_committed_sweep_labels_read_back_as_text() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    data, _ = load_plain((root / "params.yaml").read_text())
    for name, spec in data.items():
        for sweep, definition in (spec.get("sweep") or {}).items():
            for axis, keys in definition["axes"].items():
                labels = keys.get("labels") or []
                assert all(isinstance(x, str) for x in labels), (name, sweep, axis, labels)
