"""Stage `pretrain` (`rmsweb pretrain`): the tiny model learns generic web-agent skills.

Input: the model stage's folder (`--in model=...`: the random model and its tokenizer,
and the suite's instructions). Checks that the synthetic templates share no 4-gram
with the suite's instructions or MiniWoB++'s pages (overlap.py; a UserError if they
do), pretrains on the synthetic set (run.py: rmsweb.train.sft.trainer.train_sft) and
writes <out>/model in the model stage's layout, so SFT reads it as it reads the random
model. Metrics: per-skill greedy accuracy of the next action on held-out synthetic
examples before and after, loss, wall time, samples/s and the overlap counts.
One stage for every training seed and arm of a study (rmsweb/compile/graph.py).
"""

from __future__ import annotations

import shutil
import time

from rmsweb.agents.build import prompt_config
from rmsweb.errors import UserError
from rmsweb.stage_io import StageIO
from rmsweb.train.sft.trainer import write_loss_curve

from .overlap import check, miniwob_texts, read_instructions
from .run import PretrainSettings, pretrain
from .templates import all_templates
from .vocab import fixed_words

INSTRUCTIONS = "suite_instructions.txt"  # written by the model stage (train/tiny/stage.py)


def template_overlap(io: StageIO) -> dict[str, object]:
    """The overlap check's metrics; raises UserError on any shared template 4-gram."""
    suite = read_instructions(io.input("model") / INSTRUCTIONS)
    report = check(all_templates(), [*suite, *miniwob_texts()], fixed_words())
    if report.count:
        shown = "; ".join(f"{t!r} shares {g!r}" for t, g in report.template_hits[:5])
        raise UserError(
            f"{report.count} synthetic template 4-grams occur in the suite's or MiniWoB++'s "
            f"instructions ({shown}). Reword those templates in "
            "rmsweb/train/pretrain/templates.py: pretraining must not teach the study's tasks."
        )
    return {
        "template_overlap_4grams": report.count,
        "templates": report.templates,
        "suite_instructions": len(suite),
        "vocab_overlap_words": len(report.word_hits),
        "vocab_overlap": report.word_hits,
    }


def main(io: StageIO) -> None:
    import torch

    from rmsweb.models.load import load_model
    from rmsweb.models.threads import share_callback, torch_threads

    m = io.spec.model
    if m.kind != "tiny" or m.pretrain is None:
        raise UserError("the pretrain stage needs a tiny model with model.pretrain set")
    torch.set_num_threads(torch_threads(None))  # all cores: it reads no sft key
    start = time.time()
    overlap = template_overlap(io)
    loaded = load_model(str(io.input("model") / "model"), dtype="float32", device="cpu")
    io.out.mkdir(parents=True, exist_ok=True)
    work_dir = io.out / "checkpoints"
    model, metrics, history = pretrain(
        loaded.model,
        loaded.tokenizer,
        PretrainSettings.of(m.pretrain),
        prompt_config(m),
        work_dir,
        callbacks=share_callback(None),  # the freed cores when a neighbour ends
    )
    model.save_pretrained(io.out / "model")
    loaded.processor.save_pretrained(io.out / "model")
    shutil.rmtree(work_dir, ignore_errors=True)  # the finished model replaces them
    write_loss_curve(io.plot_path("loss.csv"), history)
    io.write_metrics({**metrics, **overlap, "wall_s": round(time.time() - start, 1)})
