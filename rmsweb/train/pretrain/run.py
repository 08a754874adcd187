"""One pretraining run: synthetic set, accuracy before, SFT on it, accuracy after.

Shared by the `pretrain` stage and the size/budget probe (probe.py). The training set
and the held-out set are drawn from different seeds of the same generator (the same
skills and templates, fresh pages and words).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmsweb.agents.prompt import PromptConfig
from rmsweb.train.sft.trainer import SFTHyper, train_sft

from .evaluate import accuracy
from .synthetic import SKILLS, generate, to_sample

HELD_OUT_OFFSET = 1_000_003  # the held-out set's seed: the training seed plus this
STOP_CHECK_OFFSET = 2_000_006  # the `until` checks' own set: never the reported one


@dataclass(frozen=True)
class PretrainSettings:
    """What a pretraining run needs (the spec's model.pretrain section has these fields)."""

    steps: int = 1500
    batch_size: int = 32
    learning_rate: float = 1e-3
    warmup_ratio: float = 0.03
    samples: int = 20_000
    skills: tuple[str, ...] = SKILLS
    seed: int = 0
    max_seq_len: int = 512
    eval_per_skill: int = 50
    until: tuple[tuple[str, float], ...] = ()  # (skill, bar) pairs; () trains all steps
    check_every: int = 250
    check_examples: int = 50

    @classmethod
    def of(cls, spec: Any) -> PretrainSettings:
        """From the spec's model.pretrain section (same field names)."""
        return cls(
            steps=spec.steps,
            batch_size=spec.batch_size,
            learning_rate=spec.learning_rate,
            warmup_ratio=spec.warmup_ratio,
            samples=spec.samples,
            skills=tuple(spec.skills),
            seed=spec.seed,
            max_seq_len=spec.max_seq_len,
            eval_per_skill=spec.eval_per_skill,
            **_until_of(spec.until),
        )


def _until_of(until: Any) -> dict[str, Any]:
    if until is None:
        return {}
    return {
        "until": tuple(sorted(until.accuracy.items())),
        "check_every": until.check_every,
        "check_examples": until.check_examples,
    }


def hyper(s: PretrainSettings) -> SFTHyper:
    return SFTHyper(
        max_steps=s.steps,
        batch_size=s.batch_size,
        grad_accum=1,
        learning_rate=s.learning_rate,
        lr_scheduler="cosine",
        warmup_ratio=s.warmup_ratio,
        min_lr_ratio=0.1,
        weight_decay=0.01,
        adam_beta1=0.9,
        adam_beta2=0.95,
        max_grad_norm=1.0,
        max_seq_len=s.max_seq_len,
        save_steps=max(s.steps // 2, 1),  # a resume point halfway, and the last step
        logging_steps=max(1, min(50, s.steps // 4)),
        val_fraction=0.0,
        precision="fp32",
        gradient_checkpointing=False,
        seed=s.seed,
    )


def _mean(shares: dict[str, float]) -> float:
    return round(sum(shares.values()) / len(shares), 4)


def pretrain(
    model: Any,
    tokenizer: Any,
    s: PretrainSettings,
    prompt: PromptConfig,
    work_dir: Path,
    callbacks: list[Any] | None = None,
) -> tuple[Any, dict[str, Any], list[dict]]:
    """Train `model` on the synthetic set; returns the model, metrics and log history."""

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    train = generate(s.samples, s.seed, s.skills)
    held_out = generate(s.eval_per_skill * len(s.skills), s.seed + HELD_OUT_OFFSET, s.skills)
    samples = [to_sample(ex, i, prompt, count) for i, ex in enumerate(train)]
    callbacks = list(callbacks or [])
    stop = None
    if s.until:
        stop = stop_at_accuracy(tokenizer, s, prompt)
        callbacks.append(stop)
    t0 = time.time()
    before, target_before = accuracy(model, tokenizer, held_out, prompt)
    t1 = time.time()
    model, history = train_sft(model, tokenizer, samples, hyper(s), work_dir, callbacks=callbacks)
    wall = time.time() - t1
    steps_trained = max((h.get("step", 0) for h in history), default=s.steps)
    after, target_after = accuracy(model, tokenizer, held_out, prompt)
    losses = [h["loss"] for h in history if "loss" in h]
    metrics: dict[str, Any] = {
        "samples": len(samples),
        "held_out": len(held_out),
        "steps": s.steps,
        "steps_trained": steps_trained,
        "accuracy_before": before,
        "accuracy_after": after,
        "accuracy_before_mean": _mean(before),
        "accuracy_after_mean": _mean(after),
        # right action type and element, the typed value aside
        "target_accuracy_before": target_before,
        "target_accuracy_after": target_after,
        "target_accuracy_after_mean": _mean(target_after),
        "loss_first": losses[0] if losses else None,
        "loss_final": losses[-1] if losses else None,
        "train_wall_s": round(wall, 1),
        "eval_wall_s": round(time.time() - t0 - wall, 1),
        "samples_per_s": round(steps_trained * s.batch_size / max(wall, 1e-9), 1),
    }
    if stop is not None:
        metrics["until"] = dict(s.until)
        metrics["until_stopped_early"] = stop.reached
        metrics["until_checks"] = stop.checks  # this process's checks (a resume starts anew)
        metrics["until_check_wall_s"] = round(stop.wall, 1)
    return model, metrics, history


def stop_at_accuracy(tokenizer: Any, s: PretrainSettings, prompt: PromptConfig) -> Any:
    """A TrainerCallback that ends training at the first check where every skill of
    `s.until` reaches its bar on the stop-check set (its own seed, apart from the
    reported held-out set)."""
    from transformers import TrainerCallback

    skills = tuple(skill for skill, _ in s.until)
    check_set = generate(s.check_examples * len(skills), s.seed + STOP_CHECK_OFFSET, skills)

    class StopAtAccuracy(TrainerCallback):
        def __init__(self) -> None:
            self.checks: list[dict[str, Any]] = []
            self.reached = False
            self.wall = 0.0

        def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any):
            if state.global_step % s.check_every or state.global_step >= state.max_steps:
                return control
            t = time.time()
            side = tokenizer.padding_side  # generation pads left; training keeps its own
            shares, _ = accuracy(model, tokenizer, check_set, prompt)
            tokenizer.padding_side = side
            self.wall += time.time() - t
            self.checks.append({"step": state.global_step, **shares})
            if all(shares.get(skill, 0.0) >= bar for skill, bar in s.until):
                self.reached = True
                control.should_training_stop = True
            # A line per check: a long pretraining otherwise shows its steps, not its skills.
            read = ", ".join(f"{k} {shares.get(k, 0.0):.2f} (bar {b:g})" for k, b in s.until)
            verdict = "reached: stopping" if self.reached else "not yet"
            print(f"pretrain check at step {state.global_step}: {read}; {verdict}", flush=True)
            return control

    return StopAtAccuracy()
