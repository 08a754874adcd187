"""The generated files come out byte for byte the same from LibYAML's emitter and PyYAML's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from rmsweb.compile import dvcfile, skyfile


# The project's representers on PyYAML's pure-Python emitter.
class _PyDumper(yaml.SafeDumper):
    pass


_PyDumper.add_representer(str, dvcfile.represent_str)


class _PyLiteralDumper(yaml.SafeDumper):
    pass


_PyLiteralDumper.add_representer(str, skyfile._str)

TRICKY: dict[str, Any] = {
    "labels": ["09", "1e3", "0x1F", ".inf", "true", "null", "~", "", " lead", "trail "],
    "cmd": "rmsweb sft --exp a-rather-long-experiment-name-budget200 --seed 0 "
    + " ".join(f"--in role{i}=runs/collect/some-long-name-{i}" for i in range(6)),
    "quotes": ["it's", 'say "hi"', "a: b", "- item", "# not a comment", "{x}", "[y]", "@z"],
    "unicode": ["é", "→ next", "日本", "tab\there"],
    "multi": "line one\nline two\n  indented\n",
    "trailing": "ends with space \nand more\n",
    "nested": [{"a": [1, 2.5, None, True]}, {"b": {"c.d": "e"}}],
}


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML built without LibYAML")
def test_the_dumpers_run_on_libyaml() -> None:
    assert issubclass(dvcfile._Dumper, yaml.CSafeDumper)
    assert issubclass(skyfile._LiteralDumper, yaml.CSafeDumper)


@pytest.mark.parametrize(
    "fast, slow", [(dvcfile._Dumper, _PyDumper), (skyfile._LiteralDumper, _PyLiteralDumper)]
)
def test_tricky_text_dumps_the_same(fast: type, slow: type) -> None:
    kw = dvcfile.DUMP_OPTIONS
    assert yaml.dump(TRICKY, Dumper=fast, **kw) == yaml.dump(TRICKY, Dumper=slow, **kw)


def test_the_committed_pipeline_dumps_the_same(repo_root: Path) -> None:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data = yaml.load((repo_root / "dvc.yaml").read_text(), Loader=loader)
    kw = dvcfile.DUMP_OPTIONS
    assert yaml.dump(data, Dumper=dvcfile._Dumper, **kw) == yaml.dump(data, Dumper=_PyDumper, **kw)
