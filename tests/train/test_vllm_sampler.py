"""RL sampling through vLLM with the current LoRA adapter (rmsweb/train/salvage_ds/vllm_sampler.py).

CPU tests run the trainer with a stand-in `vllm` package (tests cannot install vLLM here):
what the selection builds, what every sampling call hands the engine (a new adapter id,
the adapter's weights as the trainer holds them at that step, the trainer's own prompt
tokens), and that the trainer trains on what the engine returned. The GPU test (needs
CUDA and vLLM: `python -m pytest -m gpu tests/train/test_vllm_sampler.py`) compares real
vLLM samples' log-probabilities with HF's under the same LoRA weights.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from rmsweb.errors import UserError
from rmsweb.spec.rl import HFSamplerSpec, VLLMSamplerSpec
from rmsweb.train.salvage_ds.trainer import RLHyper, SalvageDSTrainer, algorithm
from rmsweb.train.salvage_ds.vllm_sampler import (
    VLLMSampler,
    build_sampler,
    finish,
    lora_rank_limit,
)

LORA = {"r": 4, "lora_alpha": 8, "lora_dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}

# A stand-in for the parts of vLLM's API the sampler uses. Each generate call records its
# requests, sampling params and adapter, reads the adapter's weights from its folder then
# (the sampler deletes the folder on the next call), and returns the completions the test
# scripted, as vLLM's RequestOutput / CompletionOutput would carry them.
STAND_IN = """
from types import SimpleNamespace

ENGINES = []


class SamplingParams:
    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


class LLM:
    script = None  # (k, request) -> (token ids, finish_reason, stop_reason)

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.calls = []
        ENGINES.append(self)

    def generate(self, requests, params, lora_request=None, use_tqdm=True):
        from safetensors.torch import load_file
        import os

        weights = load_file(os.path.join(lora_request.lora_path, "adapter_model.safetensors"))
        self.calls.append({"requests": requests, "params": params, "lora": lora_request,
                           "weights": weights})
        outs = []
        for k, req in enumerate(requests):
            ids, reason, stop = LLM.script(k, req)
            gen = SimpleNamespace(token_ids=ids, finish_reason=reason, stop_reason=stop,
                                  logprobs=None)
            outs.append(SimpleNamespace(outputs=[gen], prompt_token_ids=req.get("prompt_token_ids")))
        return outs
"""
LORA_REQUEST = """
class LoRARequest:
    def __init__(self, lora_name, lora_int_id, lora_path):
        self.lora_name, self.lora_int_id, self.lora_path = lora_name, lora_int_id, lora_path
"""


@pytest.fixture
def stand_in_vllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """`import vllm` gets the stand-in; the CUDA check passes (the engine is the stand-in)."""
    import torch

    pkg = tmp_path / "site" / "vllm"
    (pkg / "lora").mkdir(parents=True)
    (pkg / "__init__.py").write_text(STAND_IN)
    (pkg / "lora" / "__init__.py").write_text("")
    (pkg / "lora" / "request.py").write_text(LORA_REQUEST)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    import vllm

    yield vllm
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        del sys.modules[name]


def _trainer(tiny_text_dir: Path, make_states: Any, tmp_path: Path, **hyper: Any) -> Any:
    from rmsweb.models.load import load_model

    loaded = load_model(tiny_text_dir, dtype="float32", device="cpu")
    h = RLHyper(
        **{
            "steps": 2,
            "group_size": 2,
            "batch_size": 4,
            "learning_rate": 5e-2,  # large: the adapter visibly moves in one step
            "algorithm": algorithm("grpo"),
            "max_new_tokens": 8,  # shrunk: the stand-in's completions are short
            "kl_probe_states": 0,  # the probe samples with HF generate; not under test
            **hyper,
        }
    )
    states = make_states(3)
    return SalvageDSTrainer(
        loaded.model, loaded.tokenizer, states, h, tmp_path / "work", lora=dict(LORA)
    )


def _adapter_now(model: Any) -> dict[str, Any]:
    """The adapter's weights as PEFT saves them (the keys of adapter_model.safetensors)."""
    from peft import get_peft_model_state_dict

    return {k: v.detach().clone() for k, v in get_peft_model_state_dict(model).items()}


def test_hf_is_the_default_and_builds_no_engine(stand_in_vllm: Any, tmp_path: Path) -> None:
    from rmsweb.spec.rl import SalvageDS

    assert SalvageDS().sampler.kind == "hf"
    assert build_sampler(HFSamplerSpec(), tmp_path, dict(LORA), dtype="float32", seed=0) is None
    assert stand_in_vllm.ENGINES == []
    # The default stays out of params.yaml (committed RL stages keep their params); a
    # chosen vllm sampler is written like any other setting.
    assert "sampler" not in SalvageDS().model_dump(mode="json")
    chosen = SalvageDS(sampler={"kind": "vllm"}).model_dump(mode="json")["sampler"]
    assert chosen["kind"] == "vllm" and chosen["gpu_memory_utilization"] == 0.3


def test_vllm_samples_with_the_adapter_of_each_step(
    stand_in_vllm: Any, tiny_text_dir: Path, make_states: Any, tmp_path: Path
) -> None:
    trainer = _trainer(tiny_text_dir, make_states, tmp_path)
    tok = trainer.tokenizer
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    wrong = tok("Action: click(99)", add_special_tokens=False)["input_ids"]
    reference = {
        tuple(trainer.encode(i).input_ids.tolist()): s.references[0]
        for i, s in enumerate(trainer.states)
    }

    def right(prompt_ids: list[int]) -> list[int]:
        action = reference[tuple(prompt_ids)]
        return tok(f"Action: {action}", add_special_tokens=False)["input_ids"]

    def script(k: int, request: dict) -> tuple[list[int], str, Any]:
        # Even requests: the state's reference action, which vLLM ended at the stop token
        # but returned without it; odd ones: a wrong action, the stop token, then junk.
        if k % 2 == 0:
            return right(request["prompt_token_ids"]), "stop", eos
        return [*wrong, eos, 5, 6], "stop", None

    stand_in_vllm.LLM.script = staticmethod(script)
    spec = VLLMSamplerSpec(gpu_memory_utilization=0.25, max_model_len=1024)
    trainer.sampler = build_sampler(spec, tiny_text_dir, dict(LORA), dtype="float32", seed=3)
    (engine,) = stand_in_vllm.ENGINES  # the base model, loaded once
    assert engine.kwargs["model"] == str(tiny_text_dir)
    assert engine.kwargs["enable_lora"] is True and engine.kwargs["max_lora_rank"] == 8
    assert engine.kwargs["gpu_memory_utilization"] == 0.25
    assert engine.kwargs["max_model_len"] == 1024 and engine.kwargs["seed"] == 3

    def no_hf(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("HF generate was called with rl.sampler vllm")

    trainer.model.generate = no_hf
    adapters = {}
    trainer.on_step = lambda row: adapters.update({row["step"]: _adapter_now(trainer.model)})
    before = _adapter_now(trainer.model)
    result = trainer.train()

    assert len(engine.calls) == 2  # one sampling call per step (grpo: no resampling)
    first, second = engine.calls
    assert [c["lora"].lora_int_id for c in engine.calls] == [1, 2]  # a new id every step
    assert first["lora"].lora_path != second["lora"].lora_path
    # What each call sampled with is the adapter as it was then: the start, then step 1's.
    for call, want in ((first, before), (second, adapters[1])):
        assert call["weights"].keys() == want.keys()
        for key, value in want.items():
            assert call["weights"][key].equal(value), key
    assert any(not before[k].equal(adapters[1][k]) for k in before)  # the update moved it
    # The requests are the trainer's own prompt tokens, group_size per state, each with
    # its own seed; sampling settings from RLHyper.
    h = trainer.h
    groups = [g for g in result.groups if g["rl_step"] == 1]
    drawn = [
        trainer.states.index(next(s for s in trainer.states if s.state_id == g["state_id"]))
        for g in groups
    ]
    want_ids = [trainer.encode(i).input_ids.tolist() for i in drawn for _ in range(h.group_size)]
    assert [r["prompt_token_ids"] for r in first["requests"]] == want_ids
    seeds = [p.seed for p in first["params"]]
    assert len(set(seeds)) == len(seeds)
    assert {p.temperature for p in first["params"]} == {h.temperature}
    assert {p.max_tokens for p in first["params"]} == {h.max_new_tokens}
    assert all(eos in p.stop_token_ids for p in first["params"])
    # The trainer scored what the engine returned: right, wrong, right, wrong, ...
    assert [g["rewards"] for g in groups] == [[1.0, -1.0]] * len(groups)
    # And trains on those tokens, cut as HF's are (the stop token kept, nothing after it).
    sampled = trainer.sampler.sample(trainer, drawn, 1, 0)
    assert sampled[0] == [*right(want_ids[0]), eos] and sampled[1] == [*wrong, eos]
    trainer.sampler.close()
    assert not trainer.sampler.work_dir.exists()


def test_the_vllm_sampler_needs_lora_and_cuda(
    stand_in_vllm: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    with pytest.raises(UserError, match=r"model\.lora\.enabled"):
        build_sampler(VLLMSamplerSpec(), tmp_path, None, dtype="float32", seed=0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(UserError, match="needs a CUDA GPU"):
        build_sampler(VLLMSamplerSpec(), tmp_path, dict(LORA), dtype="float32", seed=0)
    assert stand_in_vllm.ENGINES == []


def test_the_spec_refuses_vllm_sampling_without_lora() -> None:
    from pydantic import ValidationError

    from rmsweb.spec.experiment import ExperimentSpec

    with pytest.raises(ValidationError, match=r"model\.lora\.enabled: true"):
        ExperimentSpec(name="x", rl={"kind": "grpo", "sampler": {"kind": "vllm"}})
    spec = ExperimentSpec(
        name="x", model={"lora": {"enabled": True}}, rl={"sampler": {"kind": "vllm"}}
    )
    assert spec.rl.sampler.kind == "vllm"


def test_finish_cuts_as_hf_and_restores_a_dropped_stop_token() -> None:
    stops = {0, 9}
    assert finish([5, 6, 9, 7], stops, 9) == [5, 6, 9]  # cut after the first stop
    assert finish([5, 6], stops, 9) == [5, 6, 9]  # stopped at 9, returned without it
    assert finish([5, 6], stops, None) == [5, 6]  # ran out of tokens: nothing to add
    assert lora_rank_limit(4) == 8 and lora_rank_limit(64) == 64 and lora_rank_limit(100) == 128
    with pytest.raises(UserError, match="max_lora_rank"):
        lora_rank_limit(1024)


@pytest.mark.gpu
def test_vllm_log_probs_match_hf_under_the_same_lora(tmp_path: Path, tiny_tokenizer: Any) -> None:
    """vLLM's samples, scored by HF under the same adapter, have the log-probs vLLM
    reported; with the adapter off they do not (vLLM sampled with the adapter). After the
    adapter changes, the next call follows the new weights (a new id, not a cached one)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    pytest.importorskip("vllm")
    from rmsweb.agents.prompt import PromptConfig, build_messages
    from rmsweb.models.config import TinySize
    from rmsweb.models.load import load_model
    from rmsweb.models.tiny import build_text_model
    from rmsweb.train.salvage_ds.states import RLState
    from rmsweb.train.salvage_ds.vllm_sampler import load_engine, prompt_request

    model_dir = tmp_path / "base"
    # head_dim 64: a size every vLLM attention backend takes; float32 on both sides, so
    # the comparison is about the backends, not bf16 rounding.
    size = TinySize(hidden_size=128, num_heads=2, num_kv_heads=1, head_dim=64)
    base = build_text_model(tiny_tokenizer, size, 0)
    base.save_pretrained(model_dir)
    tiny_tokenizer.save_pretrained(model_dir)
    base.generation_config.save_pretrained(model_dir)
    loaded = load_model(model_dir, dtype="float32", device="cuda")
    cfg = PromptConfig(system="none")
    states = [
        RLState(
            f"s{i}",
            build_messages(f'Click the "{w}" button.', f'[{i}] button "{w}"', [], cfg),
            [f"click({i})"],
        )
        for i, w in enumerate(["ok", "next", "submit", "cancel"])
    ]
    hyper = RLHyper(
        steps=1,
        group_size=2,
        batch_size=4,
        learning_rate=1e-3,
        algorithm=algorithm("grpo"),
        max_new_tokens=12,
        temperature=1.0,
    )
    lora = {
        "r": 8,
        "lora_alpha": 16,
        "lora_dropout": 0.0,
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"],
    }
    trainer = SalvageDSTrainer(
        loaded.model, loaded.tokenizer, states, hyper, tmp_path / "work", lora=lora
    )
    torch.manual_seed(1)
    with torch.no_grad():  # a strong adapter, so "with" and "without" it differ clearly
        for name, p in trainer.model.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.5)
    sampler = VLLMSampler(
        load_engine(
            model_dir,
            lora_rank=8,
            dtype="float32",
            gpu_memory_utilization=0.3,
            max_model_len=1024,
            seed=0,
            enforce_eager=True,
        )
    )
    indices = [i for i in range(len(states)) for _ in range(4)]

    def compare() -> tuple[float, float]:
        samples = sampler.complete(
            trainer.model,
            [prompt_request(trainer, i) for i in indices],
            list(range(len(indices))),
            temperature=1.0,
            max_new_tokens=12,
            stop_ids=trainer.stop_ids,
            logprobs=True,
        )
        assert all(s.token_ids and s.logprobs for s in samples)
        prompts = [trainer.encode(i) for i in indices]
        comps = [s.token_ids[: len(s.logprobs)] for s in samples]
        batch = trainer.collate(prompts, comps, [[1.0] * len(c) for c in comps])
        with torch.no_grad():
            hf = trainer._logps(trainer.model, batch, temperature=1.0)
            with trainer.model.disable_adapter():
                off = trainer._logps(trainer.model, batch, temperature=1.0)
        diff_on, diff_off = [], []
        for k, s in enumerate(samples):
            for t, lp in enumerate(s.logprobs):
                diff_on.append(abs(lp - float(hf[k, t])))
                diff_off.append(abs(lp - float(off[k, t])))
        return max(diff_on), sum(diff_off) / len(diff_off)

    on, off = compare()
    assert on < 2e-3, f"vLLM and HF log-probs differ by up to {on:.4f} under the same adapter"
    assert off > 0.05, f"without the adapter HF differs from vLLM by only {off:.4f}"
    with torch.no_grad():  # the next step's adapter
        for name, p in trainer.model.named_parameters():
            if "lora_B" in name:
                p.mul_(-1.0)
    on, off = compare()
    assert sampler.adapter_id == 2
    assert on < 2e-3, f"after the update vLLM sampled with stale weights ({on:.4f})"
    sampler.close()


def test_plan_counts_the_vllm_share_in_place_of_hf_kv_cache() -> None:
    """`rmsweb plan` with rl.sampler vllm: RL's peak is weights + state + the engine's share
    + the update's activations (no HF KV cache); a share that cannot hold the weights, or
    one that crowds out the trainer, is refused naming rl.sampler.gpu_memory_utilization."""
    from rmsweb.compile import load_specs
    from rmsweb.models import plan as P

    def rl(*overrides: str) -> Any:
        root = Path(__file__).resolve().parents[2]
        specs, _, errors = load_specs([root / "experiments" / "paper-8b.yaml"], list(overrides))
        assert not errors
        return next(s for s in P.plan(specs[0]).stages if s.stage == "rl")

    hf, vllm = rl(), rl("rl.sampler.kind=vllm", "rl.micro_batch_size=4")
    share = 0.3 * 80 * P.GIB  # the default share of an H100 (paper-8b: H100:8)
    assert vllm.memory["vllm_share (rl.sampler: weights + KV cache)"] == share
    assert not [k for k in vllm.memory if k.startswith("kv_cache")]
    assert [k for k in hf.memory if k.startswith("kv_cache")]
    update = next(v for k, v in vllm.memory.items() if k.startswith("update activations"))
    weights, state = vllm.memory["weights"], vllm.memory["trainable_state"]
    assert vllm.peak_bytes == weights + state + share + update
    assert vllm.problem is None
    # paper-8b's micro-batch of 8 with a 24 GiB engine beside it does not fit: 5 does.
    assert rl("rl.sampler.kind=vllm").problem[0] == "rl.micro_batch_size"
    small = rl("rl.sampler.kind=vllm", "rl.sampler.gpu_memory_utilization=0.05")
    assert small.problem[0] == "rl.sampler.gpu_memory_utilization"
    assert "raise it" in small.problem[1]
    big = rl("rl.sampler.kind=vllm", "rl.sampler.gpu_memory_utilization=0.8")
    assert big.problem[0] == "rl.sampler.gpu_memory_utilization"
    assert "lower it" in big.problem[1]
