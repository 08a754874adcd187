"""A tiny random text model folder for the benchmark scripts' end-to-end tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

WORDS = ["alpha", "beta", "gamma", "delta", "submit", "cancel", "ok", "next", "prev", "yes"]


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rmsweb.models.config import TinySize
    from rmsweb.models.tiny import build_text_model
    from rmsweb.models.tokenizer import train_tokenizer

    corpus = [f'Click on the "{w}" button.\n[2] button "{w}"' for w in WORDS] * 8
    tokenizer = train_tokenizer(corpus, 400)
    out = tmp_path_factory.mktemp("tiny_text")
    model = build_text_model(tokenizer, TinySize(hidden_size=32, intermediate_size=64), 0)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    model.generation_config.save_pretrained(out)
    return out


@pytest.fixture(autouse=True)
def one_torch_thread() -> Any:
    """One torch thread (token-by-token sampling of a tiny model only contends on more)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
