"""Size and budget probe: `python -m rmsweb.train.pretrain.probe --hidden 128 --layers 4`.

Builds a tiny Qwen3 of the given size (tokenizer on synthetic texts and the action
syntax, or on a corpus file), pretrains it on the synthetic set and prints the
per-skill held-out accuracy before and after, and the wall time, as one JSON object
(also written to --out). The prompt is the default job's (no system text, 3 history
steps, 512 tokens).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from rmsweb.agents.prompt import PromptConfig

from .run import PretrainSettings, pretrain
from .synthetic import SKILLS, generate, texts


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--samples", type=int, default=20_000)
    p.add_argument("--eval-per-skill", type=int, default=50)
    p.add_argument("--skills", nargs="*", default=list(SKILLS))
    p.add_argument("--vocab-size", type=int, default=1536)
    p.add_argument("--corpus", type=Path, help="Extra tokenizer texts, one a line.")
    p.add_argument("--threads", type=int, help="torch threads (default: models/threads.py's share)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, help="Also write the result JSON here.")
    a = p.parse_args(argv)

    import torch

    from rmsweb.models.config import TinySize
    from rmsweb.models.threads import torch_threads
    from rmsweb.models.tiny import build_text_model, count_parameters
    from rmsweb.models.tokenizer import train_tokenizer

    # On a busy machine 1 thread can be 5x faster than 2 (spinning OpenMP workers).
    torch.set_num_threads(torch_threads(a.threads))
    start = time.time()
    corpus = texts(generate(2000, a.seed + 7, a.skills))
    if a.corpus:
        corpus += a.corpus.read_text(encoding="utf-8").splitlines()
    tokenizer = train_tokenizer(corpus, a.vocab_size)
    heads = max(2, a.hidden // 16)
    size = TinySize(
        hidden_size=a.hidden,
        num_layers=a.layers,
        num_heads=heads,
        num_kv_heads=heads // 2,
        head_dim=16,
        intermediate_size=3 * a.hidden,
    )
    model = build_text_model(tokenizer, size, a.seed)
    settings = PretrainSettings(
        steps=a.steps,
        batch_size=a.batch_size,
        learning_rate=a.lr,
        samples=a.samples,
        skills=tuple(a.skills),
        seed=a.seed,
        eval_per_skill=a.eval_per_skill,
    )
    prompt = PromptConfig(history_steps=3, max_prompt_tokens=512, system="none")
    with tempfile.TemporaryDirectory() as work:
        _, metrics, _ = pretrain(model, tokenizer, settings, prompt, Path(work))
    result = {
        "hidden": a.hidden,
        "layers": a.layers,
        "params": count_parameters(model),
        "vocab_size": len(tokenizer),
        "batch_size": a.batch_size,
        "learning_rate": a.lr,
        **metrics,
        "wall_s": round(time.time() - start, 1),
    }
    print(json.dumps(result, indent=2))
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    main()
