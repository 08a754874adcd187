"""SFT's replay (sft.replay): fresh samples of the pretraining generator mixed into SFT.

Many passes over a few demonstrations per task teach a tiny policy to type the values
it was trained on instead of copying the instruction's; a share of synthetic samples in
every batch keeps the generic skills pretraining taught (rmsweb/train/pretrain). The
samples are pretraining's skills on seeds that neither its training set nor its held-out
set uses. Kept here, not in rmsweb/train/pretrain, so that editing it does not make the
pretrain stage stale.
"""

from __future__ import annotations

from typing import Any

from rmsweb.agents.prompt import PromptConfig
from rmsweb.train.pretrain.run import PretrainSettings
from rmsweb.train.pretrain.synthetic import generate, to_sample
from rmsweb.train.sft.samples import Sample

REPLAY_OFFSET = 2_000_003  # past pretraining's seed and its held-out offset (1_000_003)


def replay_count(demos: int, share: float) -> int:
    """Synthetic samples to add to `demos` SFT samples so they are `share` of the whole."""
    return round(demos * share / (1.0 - share))


def replay_samples(
    n: int, s: PretrainSettings, prompt: PromptConfig, count: Any, train_seed: int = 0
) -> list[Sample]:
    """n synthetic samples, a draw of their own for each training seed."""
    examples = generate(n, s.seed + REPLAY_OFFSET + train_seed, s.skills)
    return [to_sample(ex, i, prompt, count) for i, ex in enumerate(examples)]
