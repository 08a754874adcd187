"""Stage `model` (`rmsweb model`): a tiny random model whose tokenizer knows the suite.

The tokenizer is trained on the collected instructions, observations and
actions plus the prompt's fixed texts, so element ids and common UI words are
single tokens. Writes <out>/model (a Hugging Face folder) and metrics.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

from rmsweb.agents.prompt import SYSTEM_PROMPTS
from rmsweb.models.config import TinySize
from rmsweb.models.tiny import save_tiny_model
from rmsweb.stage_io import StageIO


def corpus(collect_dir: Path) -> Iterator[str]:
    from rmsweb.store.reader import read_rows

    yield from (t for t in SYSTEM_PROMPTS.values() if t)
    for ep in read_rows(collect_dir, "episodes"):
        yield ep.instruction
    for st in read_rows(collect_dir, "steps"):
        yield st.obs_text
        yield st.output_text


def main(io: StageIO) -> None:
    m = io.spec.model
    if m.kind != "tiny":
        raise ValueError("the model stage only exists for tiny models")  # the compiler ensures it
    size = TinySize(
        hidden_size=m.hidden_size,
        num_layers=m.num_layers,
        num_heads=m.num_heads,
        num_kv_heads=m.num_kv_heads,
        head_dim=m.head_dim,
        intermediate_size=m.intermediate_size,
        max_position_embeddings=m.max_position_embeddings,
        vision_depth=m.vision_depth,
        vision_hidden_size=m.vision_hidden_size,
        patch_size=m.patch_size,
    )
    start = time.time()
    texts = list(corpus(io.input("collect")))
    info = save_tiny_model(io.out / "model", m.arch, texts, m.vocab_size, size, io.spec.seed)
    io.write_metrics({**info, "corpus_texts": len(texts), "wall_s": round(time.time() - start, 1)})
