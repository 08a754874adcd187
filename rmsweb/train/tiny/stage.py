"""Stage `model` (`rmsweb model`): a tiny random model whose tokenizer knows the suite.

The tokenizer is trained on the suite's own texts (corpus.py), the weights are
initialised from the training seed: the model depends on the suite and model
config only, so every arm of a study starts from the same model. Writes
<out>/model (a Hugging Face folder) and metrics.
"""

from __future__ import annotations

import time

from rmsweb.models.config import TinySize
from rmsweb.models.tiny import save_tiny_model
from rmsweb.stage_io import StageIO
from rmsweb.train.tiny.corpus import suite_corpus


def main(io: StageIO) -> None:
    m = io.spec.model
    if m.kind != "tiny":
        raise ValueError("the model stage only exists for tiny models")  # the compiler ensures it
    size = TinySize.of(m)
    start = time.time()
    texts = suite_corpus(io.spec.suite, m.corpus_seeds_per_task)
    info = save_tiny_model(io.out / "model", m.arch, texts, m.vocab_size, size, io.train_seed)
    io.write_metrics({**info, "corpus_texts": len(texts), "wall_s": round(time.time() - start, 1)})
