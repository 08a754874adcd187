"""Fixtures for the RL tests: synthetic click states, a tiny tokenizer and tiny text models."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

WORDS = ["alpha", "beta", "gamma", "delta", "submit", "cancel", "ok", "next", "prev", "yes"]


def click_data(n: int, seed: int) -> list[tuple[str, str, str]]:
    """(instruction, observation, reference action) of 'click the X button' pages."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        labels = rng.sample(WORDS, 4)
        t = rng.randrange(4)
        obs = "\n".join(f'[{i + 2}] button "{label}"' for i, label in enumerate(labels))
        out.append((f'Click on the "{labels[t]}" button.', obs, f"click({t + 2})"))
    return out


@pytest.fixture(scope="session")
def tiny_tokenizer() -> Any:
    from rmsweb.models.tokenizer import train_tokenizer

    # vocab 400: the corpus is small (as in the SFT test).
    return train_tokenizer([i + "\n" + o for i, o, _ in click_data(128, 0)], 400)


@pytest.fixture(scope="session")
def make_states() -> Callable[..., list[Any]]:
    from rmsweb.agents.prompt import PromptConfig, build_messages
    from rmsweb.train.salvage_ds.states import RLState

    def make(n: int, seed: int = 0, weight: float = 1.0) -> list[RLState]:
        cfg = PromptConfig(system="none")  # shrunk: short prompts keep forwards fast
        return [
            RLState(f"s{seed}-{k}", build_messages(i, o, [], cfg), [a], weight=weight)
            for k, (i, o, a) in enumerate(click_data(n, seed))
        ]

    return make


@pytest.fixture(autouse=True)
def one_torch_thread() -> Any:
    """One torch thread in these tests, restored after each.

    Sampling a tiny model token by token is overhead-bound: on the shared 2-core
    machine (load ~12) 64 x 32 sampled tokens took 1.1 s on one thread and 23-34 s on
    two, the threads spinning against other processes.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def tiny_model(tiny_tokenizer: Any) -> Any:
    from rmsweb.models.config import TinySize
    from rmsweb.models.tiny import build_text_model

    # hidden 32, FFN 64: smaller than the pipeline's default; these tests check the
    # mechanics (losses, gradients, resume), not learning.
    return build_text_model(tiny_tokenizer, TinySize(hidden_size=32, intermediate_size=64), 0)


@pytest.fixture(scope="session")
def tiny_text_dir(tmp_path_factory: pytest.TempPathFactory, tiny_tokenizer: Any) -> Path:
    from rmsweb.models.config import TinySize
    from rmsweb.models.tiny import build_text_model

    out = tmp_path_factory.mktemp("tiny_text")
    model = build_text_model(tiny_tokenizer, TinySize(hidden_size=32, intermediate_size=64), 0)
    model.save_pretrained(out)
    tiny_tokenizer.save_pretrained(out)
    model.generation_config.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def script_generation() -> Callable[..., None]:
    """Replace a trainer's sampling with scripted completions (see _script)."""
    return _script


def _script(trainer: Any, p_correct: list[float], exact: bool = False) -> None:
    """Replace sampling: state i's completion is its reference with probability p_correct[i]
    (exact: exactly round(p * G) of each group are right, in a random order)."""
    from rmsweb.train.salvage_ds.trainer import derived_seed

    tok = trainer.tokenizer
    g = trainer.h.group_size

    def generate(indices: list[int], step: int, round_: int) -> list[list[int]]:
        out = []
        for i in indices:
            rng = random.Random(derived_seed("script", step, round_, i))
            if exact:
                right = [k < round(p_correct[i] * g) for k in range(g)]
                rng.shuffle(right)
            else:
                right = [rng.random() < p_correct[i] for _ in range(g)]
            for ok in right:
                action = trainer.states[i].references[0] if ok else "click(99)"
                out.append(
                    tok(f"Action: {action}<|im_end|>", add_special_tokens=False)["input_ids"]
                )
        return out

    trainer.generate = generate  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def sharded_vl_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Qwen3-VL folder the sharded rehearsals train (test_sharded_*.py)."""
    from rmsweb.models.config import TinySize
    from rmsweb.models.tiny import save_tiny_model

    corpus = [
        f'Task: click the "{w}" button\n[{i}] button "{w}"\nAction: click({i})'
        for i, w in enumerate(["submit", "cancel", "ok", "next"] * 10)
    ]
    out = tmp_path_factory.mktemp("tiny_vl_sharded")
    save_tiny_model(out, "qwen3_vl", corpus, 400, TinySize(), seed=0)
    return out


def sharded_torchrun(*args: Any, ok: bool = True) -> Any:
    """Run tests/train/sharded_child.py on 2 gloo ranks (torchrun --standalone)."""
    import os
    import subprocess
    import sys

    child = Path(__file__).with_name("sharded_child.py")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    cmd += ["--standalone", str(child), *map(str, args)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
    if ok:
        assert done.returncode == 0, done.stderr[-4000:]
    return done


@pytest.fixture(scope="session")
def run_sharded() -> Any:
    return sharded_torchrun
