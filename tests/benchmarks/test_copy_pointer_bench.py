"""benchmarks/copy_pointer.py reads one row per typed-value token and one for its closing
token, and says which of them the pointer can emit at all."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import torch

from rmsweb.models.config import TinySize
from rmsweb.models.load import load_model
from rmsweb.models.tiny import save_tiny_model

ROOT = Path(__file__).resolve().parents[2]


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "copy_pointer", ROOT / "benchmarks/copy_pointer.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_rows_cover_the_value_and_its_closing_token(tmp_path: Path) -> None:
    bench = _module()
    corpus = [
        f'Task: type "{w}" in the box. Action: fill(1, "{w}")' for w in ["kx9q", "zebra"] * 30
    ]
    save_tiny_model(tmp_path, "qwen3", corpus, 300, TinySize(copy_head=True), seed=0)
    loaded = load_model(tmp_path, device="cpu")
    torch.manual_seed(0)
    prompt = 'Task: type "kx9q" in the box.\nAction:'
    completion = ' fill(1, "kx9q")'
    rows = bench.token_rows(loaded.model, loaded.tokenizer, prompt, completion, "kx9q")
    assert sum(r["first"] for r in rows) == 1 and rows[0]["first"]
    assert sum(r["close"] for r in rows) == 1 and rows[-1]["close"]
    value_rows = rows[:-1]
    # every token of a value quoted in the prompt is the successor of an earlier position
    assert all(r["copyable"] for r in value_rows)
    # the closing ") never follows the value in the prompt (there it is " and a space)
    assert not rows[-1]["copyable"] and not rows[-1]["pointed"]
    assert all(0.0 <= r["gate"] <= 1.0 and 0.0 <= r["p"] <= 1.0 for r in rows)
    assert bench.value_span(completion, "kx9q") == (10, 14)
