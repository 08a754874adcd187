"""Fixtures for the judge tests: a scripted chat backend, the Online-Mind2Web example run,
and (from tests/agents) the tiny models behind a real `transformers serve`."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
EXAMPLE_SMALL = HERE / "data" / "om2w_example" / "fb7b4f784cfde003e2548fdf4e8d6b4f"
# The example's last screenshot at its original size (data/om2w_full_size/README.md).
FULL_SIZE_SHOT = HERE / "data" / "om2w_full_size" / "4_full_screenshot.png"
FULL_SIZE = (1280, 1100)

# The served tiny models of the policy tests (one server per test session).
_spec = importlib.util.spec_from_file_location(
    "agents_conftest", HERE.parent / "agents" / "conftest.py"
)
_agents = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
sys.modules["agents_conftest"] = _agents  # its dataclasses look their module up
_spec.loader.exec_module(_agents)  # type: ignore[union-attr]
vl_server = _agents.vl_server
stub = _agents.stub
completion_body = _agents.completion_body


class ScriptedBackend:
    """A ChatBackend without HTTP: `reply(messages)` gives the text; usage counts characters
    (prompt: 1 token per 4 characters of text, 100 per image; completion: per 4 characters)."""

    model = "scripted-judge"

    def __init__(self, reply: Callable[[list[dict[str, Any]]], str]) -> None:
        self.reply = reply
        self.requests: list[dict[str, Any]] = []

    async def chat(self, messages, max_tokens=None, temperature=None, seed=None):
        self.requests.append(
            {
                "messages": messages,
                "max_tokens": max_tokens,
                "temperature": temperature,
                "seed": seed,
            }
        )
        text = self.reply(messages)
        return text, {"prompt_tokens": prompt_tokens(messages), "completion_tokens": len(text) // 4}

    async def close(self) -> None:
        pass


def prompt_tokens(messages: list[dict[str, Any]]) -> int:
    n = 0
    for m in messages:
        parts = (
            m["content"]
            if isinstance(m["content"], list)
            else [{"type": "text", "text": m["content"]}]
        )
        for p in parts:
            n += len(p["text"]) // 4 if p["type"] == "text" else 100
    return n


def system_of(messages: list[dict[str, Any]]) -> str:
    return messages[0]["content"]


def images_of(messages: list[dict[str, Any]]) -> int:
    return sum(p["type"] == "image_url" for p in messages[-1]["content"])


@pytest.fixture
def example_small() -> Path:
    return EXAMPLE_SMALL


@pytest.fixture(scope="session")
def example_full(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example run at full size, built from what the repository holds: result.json
    verbatim, screenshots 0-3 scaled back up to 1280x1100, screenshot 4 the original."""
    from PIL import Image

    out = tmp_path_factory.mktemp("om2w_full") / EXAMPLE_SMALL.name
    (out / "trajectory").mkdir(parents=True)
    shutil.copy(EXAMPLE_SMALL / "result.json", out / "result.json")
    for small in sorted((EXAMPLE_SMALL / "trajectory").iterdir()):
        if small.name == FULL_SIZE_SHOT.name:
            shutil.copy(FULL_SIZE_SHOT, out / "trajectory" / small.name)
            continue
        with Image.open(small) as img:
            img.resize(FULL_SIZE, Image.Resampling.NEAREST).save(out / "trajectory" / small.name)
    return out


@pytest.fixture
def scripted() -> type[ScriptedBackend]:
    """The ScriptedBackend class (test modules cannot import conftest)."""
    return ScriptedBackend


@pytest.fixture
def reply_body() -> Callable[..., dict]:
    """An OpenAI chat completion body for the stub server."""
    return completion_body
