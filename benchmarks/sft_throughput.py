"""SFT throughput: the SFT stage's trainer against a plain PyTorch loop, same everything.

    python benchmarks/sft_throughput.py                  # the default job's data and model
    python benchmarks/sft_throughput.py --steps 300 --batch-size 32
    python benchmarks/sft_throughput.py --tiny           # seconds: synthetic samples

Both train the same initial weights on the same samples (the SFT stage's own
build_samples over a collect run) at the same batch size, fp32, with the same torch
threads. The plain loop is the floor of what the hardware does: samples tokenised once
up front, batches padded to their longest row, the causal-LM loss on the completion
tokens (the head on those positions only), AdamW. Each side's rate counts its whole
call, setup included (the stage pays it too). Last line:

    sft_samples_per_s=X plain_loop_samples_per_s=Y ratio=Z      (target: ratio >= 0.8)
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def real_samples(collect: Path, model_dir: Path, spec_name: str) -> tuple[Any, list[Any]]:
    from rmsweb.agents.build import prompt_config
    from rmsweb.models.load import load_model
    from rmsweb.spec import load_experiment
    from rmsweb.store.reader import read_records
    from rmsweb.train.sft.samples import build_samples

    spec = load_experiment(ROOT / "experiments" / f"{spec_name}.yaml")
    loaded = load_model(str(model_dir), dtype="float32", device="cpu")
    prompt = prompt_config(spec.model)

    def count(text: str) -> int:
        return len(loaded.tokenizer(text, add_special_tokens=False)["input_ids"])

    return loaded, build_samples(read_records(collect), prompt, count)


def tiny_samples(n: int) -> tuple[Any, list[Any]]:
    """Synthetic click samples and a tiny random model (no pipeline outputs needed)."""
    from rmsweb.agents.prompt import PromptConfig, build_messages, completion_text
    from rmsweb.models.config import TinySize
    from rmsweb.models.load import LoadedModel
    from rmsweb.models.tiny import build_text_model
    from rmsweb.models.tokenizer import train_tokenizer
    from rmsweb.train.sft.samples import Sample

    rng = random.Random(0)
    words = ["alpha", "beta", "gamma", "delta", "ok", "cancel", "next", "submit"]
    rows = []
    for k in range(n):
        labels = rng.sample(words, 4)
        t = rng.randrange(4)
        obs = "\n".join(f'[{i + 2}] button "{w}"' for i, w in enumerate(labels))
        rows.append((f'Click on the "{labels[t]}" button.', obs, f"click({t + 2})", k))
    tok = train_tokenizer([f"{i}\n{o}\n{a}" for i, o, a, _ in rows], 300)
    cfg = PromptConfig(system="none")
    samples = [
        Sample("click-button", k, 0, build_messages(i, o, [], cfg), completion_text(a))
        for i, o, a, k in rows
    ]
    model = build_text_model(tok, TinySize(hidden_size=32, intermediate_size=64), 0)
    return LoadedModel(model=model, tokenizer=tok, processor=tok, is_vl=False), samples


def plain_loop(model: Any, tokenizer: Any, samples: list[Any], steps: int, batch: int) -> float:
    """Seconds for `steps` AdamW steps of the completion-token loss (module doc)."""
    import torch

    from rmsweb.train.sft.completion_loss import completion_loss

    start = time.perf_counter()
    encoded = []
    for s in samples:
        prompt = tokenizer.apply_chat_template(
            s.messages, tokenize=False, add_generation_prompt=True
        )
        p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        c = tokenizer(s.completion + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
        encoded.append((p + c, [-100] * len(p) + c))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.01)
    rng = random.Random(0)
    pad = tokenizer.pad_token_id
    model.train()
    for _ in range(steps):
        rows = rng.sample(encoded, batch)
        width = max(len(ids) for ids, _ in rows)
        ids = torch.tensor([r + [pad] * (width - len(r)) for r, _ in rows])
        labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in rows])
        attn = torch.arange(width)[None, :] < torch.tensor([len(r) for r, _ in rows])[:, None]
        batch_in = {"input_ids": ids, "attention_mask": attn.long(), "labels": labels}
        loss = completion_loss(model, batch_in)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return time.perf_counter() - start


def stage_trainer(
    model: Any,
    tokenizer: Any,
    samples: list[Any],
    steps: int,
    batch: int,
    callbacks: list[Any] | None = None,
) -> float:
    from rmsweb.train.sft.trainer import SFTHyper, train_sft

    hyper = SFTHyper(
        max_steps=steps,
        batch_size=batch,
        grad_accum=1,
        learning_rate=1e-3,
        lr_scheduler="cosine",
        warmup_ratio=0.03,
        min_lr_ratio=0.1,
        weight_decay=0.01,
        adam_beta1=0.9,
        adam_beta2=0.95,
        max_grad_norm=1.0,
        max_seq_len=512,
        save_steps=10 * steps,  # no checkpoint inside the measured run
        logging_steps=max(1, steps // 10),
        val_fraction=0.02,
        precision="fp32",
        gradient_checkpointing=False,
        seed=0,
    )
    with tempfile.TemporaryDirectory() as work:
        start = time.perf_counter()
        train_sft(model, tokenizer, samples, hyper, Path(work), callbacks=callbacks)
        return time.perf_counter() - start


def data_arguments(ap: argparse.ArgumentParser) -> None:
    """The samples, model and run size (benchmarks/thread_share.py takes them too)."""
    ap.add_argument("--exp", default="miniwob-cpu")
    ap.add_argument("--collect", type=Path, default=ROOT / "runs/collect/miniwob-cpu")
    ap.add_argument("--model", type=Path, default=ROOT / "runs/model/miniwob-cpu/s0/model")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--tiny", action="store_true", help="synthetic samples, tiny model")


def main() -> None:
    import copy

    import torch

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    data_arguments(ap)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.tiny:
        loaded, samples = tiny_samples(256)
    else:
        loaded, samples = real_samples(args.collect, args.model, args.exp)
    tok = loaded.tokenizer
    n = args.steps * args.batch_size
    print(f"{len(samples)} samples, {args.steps} steps x {args.batch_size}, {args.threads} threads")
    start = copy.deepcopy(loaded.model)
    plain_s = plain_loop(copy.deepcopy(start), tok, samples, args.steps, args.batch_size)
    sft_s = stage_trainer(copy.deepcopy(start), tok, samples, args.steps, args.batch_size)
    sft_rate, plain_rate = n / sft_s, n / plain_s
    print(f"plain loop {plain_s:.1f}s, SFT stage trainer {sft_s:.1f}s")
    print(
        f"sft_samples_per_s={sft_rate:.1f} plain_loop_samples_per_s={plain_rate:.1f} "
        f"ratio={sft_rate / plain_rate:.3f}"
    )


if __name__ == "__main__":
    main()
