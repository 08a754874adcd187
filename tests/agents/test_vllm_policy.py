"""The vllm backend: same prompts, same greedy actions as the hf backend.

The GPU test needs CUDA and vLLM (`pip install -e '.[gpu]'`); run it with
`python -m pytest -m gpu tests/agents/test_vllm_policy.py`. The CPU tests check
what a machine without vLLM sees.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from rmsweb.errors import UserError

# Three observations, each taught its own action, so "same greedy action" is checked on
# distinct answers of a confident model rather than on near-ties of a random one.
CASES = [
    ('Click the "submit" button.', '[2] button "submit"\n[3] button "cancel"', "Action: click(2)"),
    ("Type hello into the name box.", '[4] textbox "name"', 'Action: fill(4, "hello")'),
    ("Submit the search.", '[7] searchbox "query"', 'Action: press("Enter")'),
]


def _request(instruction: str, text: str) -> Any:
    from rmsweb.agents.base import ActRequest  # -> rmsweb.env.types after the refactor
    from rmsweb.env.types import Observation

    return ActRequest("t", instruction, Observation(url="about:blank", title="", text=text))


def _teach(model: Any, tokenizer: Any, pairs: list[tuple[str, str]]) -> None:
    """Overfit the tiny model so greedy decoding answers each prompt with its action."""
    import torch

    rows = []
    for prompt, answer in pairs:
        ids = tokenizer(prompt + answer + "<|im_end|>", add_special_tokens=False)["input_ids"]
        n_prompt = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
        rows.append((torch.tensor([ids]), torch.tensor([[-100] * n_prompt + ids[n_prompt:]])))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(300):
        losses = []
        for ids, labels in rows:
            loss = model(input_ids=ids, labels=labels).loss
            loss.backward()
            losses.append(loss.item())
        optimizer.step()
        optimizer.zero_grad()
        if max(losses) < 0.01:
            break
    model.eval()


def taught_model(out: Path) -> Path:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rmsweb.agents.hf_policy import HFPolicy
    from rmsweb.agents.prompt import PromptConfig
    from rmsweb.models.config import TinySize
    from rmsweb.models.load import LoadedModel
    from rmsweb.models.tiny import save_tiny_model

    torch.manual_seed(0)
    corpus = [f"{i}\n{t}\n{a}" for i, t, a in CASES] * 20
    save_tiny_model(out, "qwen3", corpus, 400, TinySize(), seed=0)
    tokenizer = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    render = HFPolicy(LoadedModel(model, tokenizer, tokenizer, False), PromptConfig()).render
    _teach(model, tokenizer, [(render(_request(i, t))[0], a) for i, t, a in CASES])
    model.save_pretrained(out)
    return out


@pytest.mark.gpu
def test_greedy_actions_match_the_hf_backend(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    pytest.importorskip("vllm")
    model_dir = taught_model(tmp_path)  # ~30 s on CPU, built only where the test runs
    from rmsweb.agents.hf_policy import HFPolicy
    from rmsweb.agents.prompt import PromptConfig
    from rmsweb.agents.vllm_policy import VLLMPolicy, load_vllm
    from rmsweb.env.actions import parse_action
    from rmsweb.models.load import load_model

    prompt = PromptConfig()
    # float32 on both sides: the comparison is about the backend, not bf16 rounding.
    hf = HFPolicy(load_model(model_dir, dtype="float32", device="cuda"), prompt)
    engine = load_vllm(model_dir, dtype="float32", gpu_memory_utilization=0.3, enforce_eager=True)
    vllm = VLLMPolicy(engine, prompt)

    async def act_all(policy: Any) -> list[Any]:
        # Concurrent requests: the coalesced batch path, as in a rollout.
        results = await asyncio.gather(*(policy.act(_request(i, t)) for i, t, _ in CASES))
        await policy.close()
        return results

    hf_results = asyncio.run(act_all(hf))
    vllm_results = asyncio.run(act_all(vllm))
    assert [r.text for r in hf_results] == [a for _, _, a in CASES]  # the model learnt them
    assert [r.text for r in vllm_results] == [r.text for r in hf_results]
    assert [parse_action(r.text) for r in vllm_results] == [
        parse_action(r.text) for r in hf_results
    ]
    for h, v in zip(hf_results, vllm_results, strict=True):
        assert (v.tokens_in, v.tokens_out) == (h.tokens_in, h.tokens_out)
        assert v.token_logprobs == pytest.approx(h.token_logprobs, abs=1e-3)


def test_without_vllm_the_backend_says_what_to_install(tmp_path: Path) -> None:
    try:
        import vllm  # noqa: F401

        pytest.skip("vLLM is installed here")
    except ImportError:
        pass
    from rmsweb.agents.build import checkpoint_policy
    from rmsweb.spec.model import PretrainedModel

    spec = PretrainedModel(name_or_path="Qwen/Qwen3-VL-8B-Instruct", backend={"kind": "vllm"})
    with pytest.raises(UserError, match=r"pip install -e '\.\[gpu\]'"):
        checkpoint_policy(tmp_path, spec, "sft")


def test_module_imports_without_vllm(tmp_path: Path) -> None:
    """Lazy import: the module (and `rmsweb --help`) load without importing vLLM, so a
    machine without it (or with a broken one) can run everything else. A stand-in `vllm`
    package that fails when imported sits first on the path of a fresh interpreter."""
    import os
    import subprocess
    import sys

    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text(
        "raise RuntimeError('vllm was imported at module import time')\n"
    )
    code = (
        "import sys\n"
        "import rmsweb.agents.vllm_policy as m, rmsweb.agents.build, rmsweb.cli\n"
        "assert hasattr(m, 'VLLMPolicy')\n"
        "assert 'vllm' not in sys.modules, 'vllm is in sys.modules'\n"
        "from typer.testing import CliRunner\n"
        "r = CliRunner().invoke(rmsweb.cli.app, ['--help'])\n"
        "assert r.exit_code == 0, r.output\n"
        "assert 'vllm' not in sys.modules, 'rmsweb --help imported vllm'\n"
    )
    path = os.pathsep.join([str(tmp_path), *sys.path])
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
