"""One rank of the sharded-vs-unsharded rehearsals (tests/train/test_sharded_*.py).

python -m torch.distributed.run --nproc_per_node 2 --standalone sharded_child.py \
    KIND MODEL_DIR OUT SHARDING STEPS [KILL_AT]

KIND rl: SalvageDSTrainer with LoRA on the tiny Qwen3-VL (screenshots in the prompts),
STEPS steps, a checkpoint every 3; KIND gen: the gathered generation check (each rank
generates a different number of tokens; a collective inside generate would hang).
KILL_AT: rank 0 kills itself with SIGKILL after that step (a crash; torchrun stops rank 1).
Rank 0 writes OUT/result.json: the curve and the final merged weights' checksums.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)

LORA = {"r": 4, "lora_alpha": 8, "lora_dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}


def states() -> list:
    from PIL import Image

    from rmsweb.agents.prompt import PromptConfig, build_messages
    from rmsweb.train.salvage_ds.states import RLState

    cfg = PromptConfig(system="none", screenshot=True)
    out = []
    words = [("submit", (200, 30, 30)), ("ok", (30, 30, 200)), ("next", (30, 200, 30))]
    for i, (word, color) in enumerate(words):
        image = Image.new("RGB", (64, 64), color)
        image.paste((255, 255, 255), (8, 8, 40, 24))
        messages = build_messages(
            f'Click the "{word}" button.', f'[{i + 2}] button "{word}"', [], cfg, with_image=True
        )
        out.append(RLState(f"vl{i}", messages, [f"click({i + 2})"], image=image))
    return out


def rl(model_dir: Path, out: Path, sharding: str, steps: int, kill_at: int | None) -> None:
    from rmsweb.models.load import load_model
    from rmsweb.train.salvage_ds import ranks
    from rmsweb.train.salvage_ds import trainer as trainer_module
    from rmsweb.train.salvage_ds.reward import Scored
    from rmsweb.train.salvage_ds.trainer import RLHyper, SalvageDSTrainer, algorithm

    ranks.init_from_env()

    # A random model never writes a parseable action (every reward -1, no advantage): a
    # reward read off the sampled text instead, so groups have contrast and PG a gradient.
    def score(text: str, *_: object, **__: object) -> Scored:
        good = len(text) % 2 == 0
        return Scored(1.0 if good else -1.0, correct=good, parsed=True)

    trainer_module.score = score
    loaded = load_model(model_dir, device="cpu")
    hyper = RLHyper(
        steps=steps,
        group_size=2,
        batch_size=8,
        learning_rate=5e-2,
        algorithm=algorithm("salvage_ds", anchor_weight=0.5),  # rejected groups anchored
        beta=0.05,  # the reference: the same network with the adapters off
        max_new_tokens=4,
        micro_batch_size=2,  # 4 chunks: 2 generate calls and 2 update passes a rank
        save_steps=3,
        kl_probe_states=2,
        temperature=1.0,
        seed=7,
    )

    def on_step(row: dict) -> None:
        if kill_at is not None and row["step"] == kill_at and ranks.is_writer():
            os.kill(os.getpid(), signal.SIGKILL)  # torchrun then stops the other rank

    trainer = SalvageDSTrainer(
        loaded.model,
        loaded.tokenizer,
        states(),
        hyper,
        out / "work",
        processor=loaded.processor,
        is_vl=True,
        lora=LORA,
        on_step=on_step,
        sharding=sharding,
    )
    result = trainer.train()
    final = trainer.final_model(base=lambda: load_model(model_dir, device="cpu").model)
    if not ranks.is_writer():
        return
    keys = ("loss", "pg_loss", "anchor_loss", "kl", "grad_norm", "kl_to_sft", "reward_mean")
    merged = {n: p.detach().double().sum().item() for n, p in final.state_dict().items()}
    (out / "result.json").write_text(
        json.dumps(
            {
                "curve": [{k: row.get(k) for k in ("step", *keys)} for row in result.curve],
                "resumed_from": result.resumed_from,
                "merged_sums": merged,
                "wall_s": result.wall_s,
            }
        )
    )


def sft(model_dir: Path, out: Path, sharding: str, steps: int, kill_at: int | None) -> None:
    """The SFT stage's trainer (TRL SFTTrainer; fsdp: accelerate's FSDP2) on screenshots."""
    import io

    from PIL import Image
    from transformers import TrainerCallback

    from rmsweb.models.load import load_model
    from rmsweb.train.sft.samples import Sample
    from rmsweb.train.sft.trainer import SFTHyper, train_sft
    from rmsweb.train.sharding import is_sharded

    loaded = load_model(model_dir, device="cpu")
    samples = []
    for k, state in enumerate(states() * 3):
        png = io.BytesIO()
        state.image.save(png, format="PNG")
        action = state.references[0]
        samples.append(
            Sample("t", k, 0, state.messages, f"Action: {action}", f"s{k}", png.getvalue())
        )
    assert Image  # the states' screenshots are PIL images
    h = SFTHyper(
        max_steps=steps,
        batch_size=1,
        grad_accum=2,
        learning_rate=1e-2,
        lr_scheduler="constant",
        warmup_ratio=0.0,
        min_lr_ratio=0.1,
        weight_decay=0.0,
        adam_beta1=0.9,
        adam_beta2=0.95,
        max_grad_norm=1.0,
        max_seq_len=512,
        save_steps=5,
        logging_steps=1,
        val_fraction=0.0,
        precision="fp32",
        gradient_checkpointing=False,
        seed=0,
    )

    ran: list[int] = []  # the steps this process trained (a resumed run: after the checkpoint)

    class Kill(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            ran.append(state.global_step)
            if (
                kill_at is not None
                and state.global_step == kill_at
                and int(os.environ.get("RANK", "0")) == 0
            ):
                os.kill(os.getpid(), signal.SIGKILL)
            return control

    trained, history = train_sft(
        loaded.model,
        loaded.tokenizer,
        samples,
        h,
        out / "work",
        LORA,
        processor=loaded.processor,
        callbacks=[Kill()],
        sharding=sharding,
    )
    from safetensors.torch import save_file

    from rmsweb.train.sharding import full_trainable

    weights = full_trainable(trained)  # every rank: gathered whole when sharded
    if int(os.environ.get("RANK", "0")) == 0:
        save_file(weights, str(out / "adapters.safetensors"))
        losses = [(r["step"], r["loss"]) for r in history if "loss" in r]
        resumed = json.loads(
            (out / "work" / f"checkpoint-{steps}" / "trainer_state.json").read_text()
        )
        (out / "result.json").write_text(
            json.dumps(
                {
                    "losses": losses,
                    "global_step": resumed["global_step"],
                    "sharded": is_sharded(trained),  # FSDP2 units in the trained model
                    "ran": ran,
                }
            )
        )


def gen(model_dir: Path, out: Path) -> None:
    """Ranks generate different numbers of tokens inside `gathered`: no collective there."""
    from rmsweb.models.load import load_model
    from rmsweb.train import sharding
    from rmsweb.train.salvage_ds import ranks

    ranks.init_from_env()
    rank, world = ranks.rank_world()
    loaded = load_model(model_dir, device="cpu")
    model = sharding.shard(loaded.model)
    ids = torch.tensor([[5, 6, 7, 8]])
    with sharding.gathered(model), torch.inference_mode():
        seq = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=2 + 5 * rank,
            min_new_tokens=2 + 5 * rank,
            do_sample=False,
            pad_token_id=0,
        )
    # Back to shards: a forward now all-gathers layer by layer (every rank calls it).
    loss = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids).loss
    (out / f"gen-{rank}.json").write_text(
        json.dumps({"tokens": seq.shape[1] - 4, "loss": float(loss.detach()), "world": world})
    )


if __name__ == "__main__":
    kind, model_dir, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    out.mkdir(parents=True, exist_ok=True)
    if kind in ("rl", "sft"):
        kill = int(sys.argv[6]) if len(sys.argv) > 6 else None
        (rl if kind == "rl" else sft)(model_dir, out, sys.argv[4], int(sys.argv[5]), kill)
    else:
        gen(model_dir, out)
