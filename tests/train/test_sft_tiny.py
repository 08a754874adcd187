"""SFT on a tiny random model changes its parameters and lowers the loss."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from rmsweb.agents.prompt import PromptConfig, build_messages
from rmsweb.env.actions import ActionRow
from rmsweb.models.config import TinySize
from rmsweb.models.tiny import build_text_model
from rmsweb.models.tokenizer import train_tokenizer
from rmsweb.store.rows import EpisodeRecord, EpisodeRow, StepRow
from rmsweb.train.live_log import sft_callback
from rmsweb.train.sft.samples import Sample, build_samples, kept_records
from rmsweb.train.sft.trainer import SFTHyper, train_sft, uses_plain_loss

WORDS = ["alpha", "beta", "gamma", "delta", "submit", "cancel", "ok", "next", "prev", "yes"]


TINY_HYPER = SFTHyper(
    max_steps=40,  # shrunk: enough for the loss to fall, not to learn the task
    batch_size=16,
    grad_accum=1,
    learning_rate=3e-3,
    lr_scheduler="constant",
    warmup_ratio=0.0,
    min_lr_ratio=0.1,
    weight_decay=0.0,
    adam_beta1=0.9,
    adam_beta2=0.95,
    max_grad_norm=1.0,
    max_seq_len=256,
    save_steps=20,
    logging_steps=10,
    val_fraction=0.0,
    precision="fp32",
    gradient_checkpointing=False,
    seed=0,
)


def synthetic(n: int, seed: int) -> list[tuple[str, str, str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        labels = rng.sample(WORDS, 4)
        t = rng.randrange(4)
        obs = "\n".join(f'[{i + 2}] button "{label}"' for i, label in enumerate(labels))
        out.append((f'Click on the "{labels[t]}" button.', obs, f"click({t + 2})"))
    return out


def test_sft_changes_parameters_and_lowers_loss(tmp_path: Path) -> None:
    torch.set_num_threads(2)
    data = synthetic(256, 0)
    tok = train_tokenizer([i + "\n" + o for i, o, _ in data], 400)
    cfg = PromptConfig(system="none")
    samples = [
        Sample("t", k, 0, build_messages(i, o, [], cfg), f"Action: {a}")
        for k, (i, o, a) in enumerate(data)
    ]
    model = build_text_model(tok, TinySize(hidden_size=32, intermediate_size=64), seed=0)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    hyper = TINY_HYPER
    live = sft_callback(tmp_path / "s0.dvclive")  # as the stage logs it (live_log.py)
    trained, history = train_sft(model, tok, samples, hyper, tmp_path / "work", callbacks=[live])
    losses = [h["loss"] for h in history if "loss" in h]
    assert len(losses) == 4
    logged = (tmp_path / "s0.dvclive/plots/metrics/train/loss.tsv").read_text().splitlines()
    assert [float(r.split("\t")[-1]) for r in logged[1:]] == losses  # DVCLive saw each log
    assert [int(r.split("\t")[0]) for r in logged[1:]] == [10, 20, 30, 40]  # optimizer steps
    assert losses[-1] < losses[0] * 0.7
    changed = sum(not torch.equal(before[n], p.detach()) for n, p in trained.named_parameters())
    assert changed == len(before)
    assert (tmp_path / "work" / "checkpoint-40").is_dir()  # resume point written


def _rec(eid: str, seed: int, attempt: int, success: bool, n: int, error: str | None = None):
    ep = EpisodeRow(eid, "r", "collect", "miniwob", "t", seed, "train", "expert", attempt, success)
    ep.n_steps, ep.error, ep.instruction = n, error, "Click ok"
    steps = [
        StepRow(
            eid,
            i,
            "u",
            f'[{i}] button "ok"',
            None,
            f"click({i})",
            ActionRow("click", str(i)),
            True,
            None,
            0.0,
            False,
            0.0,
        )
        for i in range(n)
    ]
    return EpisodeRecord(ep, steps)


def test_kept_episode_is_the_shortest_success() -> None:
    recs = [
        _rec("a", 1, 0, False, 2),
        _rec("b", 1, 1, True, 5),
        _rec("c", 1, 2, True, 3),
        _rec("d", 2, 0, True, 3, error="browser crashed"),
    ]
    assert [r.episode.episode_id for r in kept_records(recs)] == ["c"]
    samples = build_samples(recs, PromptConfig(system="none"), lambda s: len(s.split()))
    assert [s.completion for s in samples] == [
        "Action: click(0)",
        "Action: click(1)",
        "Action: click(2)",
    ]
    assert "Previous actions:\nclick(0)\nclick(1)" in samples[2].messages[-1]["content"]


def test_samples_never_contain_reflection_text() -> None:
    from rmsweb.store.rows import ReflectionRow

    failed = _rec("a", 1, 0, False, 1)
    failed.reflections.append(ReflectionRow("a", 0, "LESSON: click the ok button first", "rule"))
    kept = _rec("b", 1, 1, True, 2)
    samples = build_samples([failed, kept], PromptConfig(system="full"), lambda s: len(s.split()))
    assert samples
    text = " ".join(str(s.messages) + s.completion for s in samples)
    assert "LESSON" not in text and "Lessons from earlier attempts" not in text


def test_plain_loss_equals_trl_fused_loss(tmp_path: Path, monkeypatch: Any) -> None:
    """The plain causal-LM loss (used for small vocabularies, 1.75x faster on CPU; its
    training steps project the completion positions only) is TRL's fused-LM-head loss:
    same losses, step by step, on the same batches."""
    import rmsweb.train.sft.trainer as trainer

    calls = []
    real = trainer.completion_loss
    monkeypatch.setattr(
        trainer, "completion_loss", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    torch.set_num_threads(2)
    data = synthetic(64, 1)
    tok = train_tokenizer([i + "\n" + o for i, o, _ in data], 400)
    cfg = PromptConfig(system="none")
    samples = [
        Sample("t", k, 0, build_messages(i, o, [], cfg), f"Action: {a}")
        for k, (i, o, a) in enumerate(data)
    ]
    hyper = replace(TINY_HYPER, max_steps=3, batch_size=8, save_steps=100, logging_steps=1)
    assert uses_plain_loss(tok.vocab_size, hyper)  # the tiny default takes the plain path
    losses = {}
    for plain in (True, False):
        model = build_text_model(tok, TinySize(hidden_size=32, intermediate_size=64), seed=0)
        _, history = train_sft(model, tok, samples, hyper, tmp_path / str(plain), plain_loss=plain)
        losses[plain] = [h["loss"] for h in history if "loss" in h]
    assert len(losses[True]) == 3
    assert len(calls) == 3  # the plain run's steps took the completion-positions path
    for a, b in zip(losses[True], losses[False], strict=True):
        assert abs(a - b) < 1e-4 * max(1.0, abs(b)), losses
    # A real vocabulary's logits would not fit: TRL's fused head is kept there.
    assert not uses_plain_loss(151_936, hyper)
