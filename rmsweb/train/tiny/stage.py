"""Stage `model` (`rmsweb model`): a tiny random model whose tokenizer knows the suite.

The tokenizer is trained on the suite's own texts (corpus.py), the weights are
initialised from the training seed: the model depends on the suite and model
config only, so every arm of a study starts from the same model. Writes
<out>/model (a Hugging Face folder) and metrics.

With model.pretrain set there is one model stage for all training seeds and arms (the
`pretrain` stage trains it next): the weights come from pretrain.seed, the corpus runs
on its own seeds from suite.train.start whatever suite.train.count (so every
demonstration budget shares it), the tokenizer also sees a sample of the synthetic
pretraining texts, and <out>/suite_instructions.txt lists the suite's instructions
(the pretrain stage checks its templates against them).
"""

from __future__ import annotations

import time

from rmsweb.models.config import TinySize
from rmsweb.models.tiny import save_tiny_model
from rmsweb.stage_io import StageIO
from rmsweb.train.tiny.corpus import budget_free, suite_corpus, suite_corpus_and_instructions

INSTRUCTIONS = "suite_instructions.txt"  # beside <out>/model; read by the pretrain stage
SYNTHETIC_SEED_OFFSET = 7  # the tokenizer's synthetic sample: not the training set's draws


def synthetic_texts(pretrain: object, suite_texts: int) -> list[str]:
    """A sample of synthetic texts about as large as the suite's corpus (>= 1,500)."""
    from rmsweb.train.pretrain.synthetic import generate, texts

    n = max(500, suite_texts // 3)  # 3 texts an example: instruction, page, action
    seed = pretrain.seed + SYNTHETIC_SEED_OFFSET  # type: ignore[attr-defined]
    return texts(generate(n, seed, tuple(pretrain.skills)))  # type: ignore[attr-defined]


def main(io: StageIO) -> None:
    m = io.spec.model
    if m.kind != "tiny":
        raise ValueError("the model stage only exists for tiny models")  # the compiler ensures it
    size = TinySize.of(m)
    start = time.time()
    extra: dict[str, int] = {}
    if m.pretrain is None:
        texts = suite_corpus(io.spec.suite, m.corpus_seeds_per_task)
        seed = io.train_seed
    else:
        suite = budget_free(io.spec.suite, m.corpus_seeds_per_task)
        texts, instructions = suite_corpus_and_instructions(suite, m.corpus_seeds_per_task)
        synthetic = synthetic_texts(m.pretrain, len(texts))
        extra = {"suite_texts": len(texts), "synthetic_texts": len(synthetic)}
        texts += synthetic
        seed = m.pretrain.seed
        io.out.mkdir(parents=True, exist_ok=True)
        (io.out / INSTRUCTIONS).write_text("\n".join(instructions) + "\n", encoding="utf-8")
    info = save_tiny_model(io.out / "model", m.arch, texts, m.vocab_size, size, seed)
    io.write_metrics(
        {**info, **extra, "corpus_texts": len(texts), "wall_s": round(time.time() - start, 1)}
    )
