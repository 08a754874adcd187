"""SFT step time: the LM head on the completion positions only, against the model's own
loss (every position projected to the vocabulary), same model, batches and threads.

    python benchmarks/completion_loss.py                       # the default job's shapes
    python benchmarks/completion_loss.py --prompt-tokens 250 --vocab 151936 --hidden 256

A step is forward, backward and AdamW on one batch of right-padded rows (prompt lengths
drawn up to --prompt-tokens, --completion-tokens labelled at each row's end), the
tiny Qwen3 of the default job (rmsweb/models/config.py's TinySize) at its vocabulary.
Both sides run the same steps, interleaved, after one warm-up step each. Last line:

    own_loss_s_per_step=X completion_loss_s_per_step=Y speedup=Z
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from rmsweb.models.config import TinySize
    from rmsweb.train.sft.completion_loss import completion_loss

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--prompt-tokens", type=int, default=460, help="longest prompt")
    ap.add_argument("--completion-tokens", type=int, default=20)
    ap.add_argument("--vocab", type=int, default=1536)
    ap.add_argument("--hidden", type=int, default=TinySize().hidden_size)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    size = TinySize()
    config = Qwen3Config(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=3 * args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=size.num_heads,
        num_key_value_heads=size.num_kv_heads,
        head_dim=args.hidden // size.num_heads,
        max_position_embeddings=2 * (args.prompt_tokens + args.completion_tokens),
        tie_word_embeddings=True,
    )
    model = Qwen3ForCausalLM(config)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    width = args.prompt_tokens + args.completion_tokens
    lengths = torch.randint(args.prompt_tokens // 2, args.prompt_tokens + 1, (args.batch_size,))
    lengths = lengths + args.completion_tokens
    ids = torch.randint(3, args.vocab, (args.batch_size, width))
    positions = torch.arange(width)[None, :]
    mask = (positions < lengths[:, None]).long()
    completion = (positions >= (lengths - args.completion_tokens)[:, None]) & (mask == 1)
    batch = {
        "input_ids": ids.masked_fill(mask == 0, 0),
        "attention_mask": mask,
        "labels": ids.masked_fill(~completion, -100),
    }

    def own() -> None:
        model(**batch).loss.backward()

    def selected() -> None:
        completion_loss(model, batch).backward()

    timings: dict[str, float] = {"own": 0.0, "selected": 0.0}
    for step in (own, selected):  # warm-up
        step()
        opt.step()
        opt.zero_grad(set_to_none=True)
    for _ in range(args.steps):
        for name, step in (("own", own), ("selected", selected)):
            start = time.perf_counter()
            step()
            opt.step()
            opt.zero_grad(set_to_none=True)
            timings[name] += time.perf_counter() - start
    own_s, selected_s = timings["own"] / args.steps, timings["selected"] / args.steps
    print(
        f"batch {args.batch_size} x {width} tokens ({args.completion_tokens} labelled), "
        f"vocab {args.vocab}, hidden {args.hidden}, {args.layers} layers, "
        f"{args.threads} threads, {args.steps} steps each"
    )
    print(
        f"own_loss_s_per_step={own_s:.3f} completion_loss_s_per_step={selected_s:.3f} "
        f"speedup={own_s / selected_s:.2f}"
    )


if __name__ == "__main__":
    main()
