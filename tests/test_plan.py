"""`rmsweb plan`: the memory formulas by hand, the paper specs' verdicts, validate's refusal."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from rmsweb.cli import app
from rmsweb.models import plan as P
from rmsweb.models.flops import Shape

ROOT = Path(__file__).resolve().parents[1]


def _dims() -> P.ModelDims:
    shape = Shape(
        text_linear=1000, head=100, vision_linear=0, lora=10, layers=2, attn_width=4,
        vision_layers=0, vision_width=0,
    )  # fmt: skip
    return P.ModelDims(shape, params=1300, hidden=4, q=4, kv=2, ffn=8, vocab=25)


def test_memory_formulas_by_hand() -> None:
    d = _dims()
    # One layer keeps w * (4h + 2q + 2kv + 4f) = 2 * (16 + 8 + 4 + 32) = 120 bytes a token.
    assert P.activation_bytes_per_token(d, 2, checkpointing=False) == 2 * 120
    # Checkpointed: each layer's input (2 * 4 = 8 bytes) + one layer recomputed (120).
    assert P.activation_bytes_per_token(d, 2, checkpointing=True) == 2 * 8 + 120
    # K and V of 2 layers x kv 2 x 2 bytes.
    assert P.kv_bytes_per_token(d, 2) == 2 * 2 * 2 * 2
    # LoRA: fp32 weight + gradient + AdamW m, v = 16 bytes; full: w + w + 2w.
    assert P.trainable_bytes(d, 2, lora=True) == 160
    assert P.trainable_bytes(d, 2, lora=False) == 3 * 2 * 1300


def test_dims_count_the_8b_model() -> None:
    from rmsweb.models.flops import TEXT_8B, VISION_8B

    class Lora:
        enabled, rank, targets = True, 64, ["q_proj", "k_proj", "v_proj", "o_proj"]

    d = P.dims_from_config(TEXT_8B, VISION_8B, Lora())
    assert 8.6e9 < d.params < 8.9e9  # Qwen3-VL-8B: 8.77 B parameters
    # 36 layers x 64 x (q 4096+4096, k 4096+1024, v 4096+1024, o 4096+4096)
    assert d.shape.lora == 36 * 64 * (8192 + 5120 + 5120 + 8192)
    # KV cache: 2 x 36 layers x 8 heads x 128 x 2 bytes = 144 KiB a token.
    assert P.kv_bytes_per_token(d, 2) == 147456


def _spec(name: str, *overrides: str):
    from rmsweb.compile import load_specs

    specs, _, errors = load_specs([ROOT / "experiments" / name], list(overrides))
    assert not errors
    return specs[0]


def test_paper_8b_fits_and_its_sft_numbers_add_up() -> None:
    spec = _spec("paper-8b.yaml")
    p = P.plan(spec)
    assert p.problems == []
    sft = next(s for s in p.stages if s.stage == "sft")
    d = P.model_dims(spec)
    seq = min(spec.sft.max_seq_len, 12000 + (768 // 16) * (1024 // 16) // 4 + 2 + 256)
    act = spec.sft.batch_size * seq * P.activation_bytes_per_token(d, 2, True)
    assert sft.peak_bytes == 2 * d.params + 16 * d.shape.lora + act
    # Time: FLOPs over (8 GPUs x 989.4 TFLOP/s x sft's MFU); cost: 8 GPUs x hours x price.
    assert sft.hours == pytest.approx(sft.flops / (8 * 989.4e12 * P.MFU["sft"][0]) / 3600)
    # The global batch is batch x grad_accum x GPUs per node, whatever the node count.
    two = P.plan(_spec("paper-8b.yaml", "compute.num_nodes=2"))
    sft2 = next(s for s in two.stages if s.stage == "sft")
    assert sft2.flops == sft.flops and sft2.hours == pytest.approx(sft.hours / 2)
    odd = P.plan(_spec("paper-8b.yaml", "compute.num_nodes=3"))
    assert ("sft", "sft.grad_accum") in [(s, k) for s, k, _ in odd.field_problems]
    assert sft.usd == pytest.approx(sft.hours * 8 * 2.50)


def test_unbounded_rl_micro_batch_is_refused_naming_the_field() -> None:
    p = P.plan(_spec("paper-8b.yaml", "rl.micro_batch_size=null"))
    assert [(stage, key) for stage, key, _ in p.field_problems] == [("rl", "rl.micro_batch_size")]
    assert "at most 9 fits" in p.field_problems[0][2]
    off = P.plan(
        _spec("paper-8b.yaml", "rl.micro_batch_size=null", "sft.gradient_checkpointing=false")
    )
    assert ("sft", "sft.gradient_checkpointing") in [(s, k) for s, k, _ in off.field_problems]


def test_paper_32b_needs_sharding_on_h100_and_fits_on_h200() -> None:
    spec = _spec("paper-32b.yaml")
    whole = P.plan(spec, sharding="none")  # what null resolves from: a missing feature
    assert whole.field_problems == []
    assert {(s, k) for s, k, _ in whole.missing_features} == {
        ("sft", "compute.accelerators"),
        ("rl", "compute.accelerators"),
    }
    assert all("FSDP or DeepSpeed ZeRO-3" in m for _, _, m in whole.missing_features)
    # Written in the spec, none is the field to change: validate refuses it.
    none = P.plan(_spec("paper-32b.yaml", "compute.sharding=none"))
    assert none.missing_features == []
    assert {(s, k) for s, k, _ in none.field_problems} == {
        ("sft", "compute.sharding"),
        ("rl", "compute.sharding"),
    }
    h200 = P.plan(
        _spec(
            "paper-32b.yaml",
            "compute.accelerators=H200:8",
            "rl.micro_batch_size=4",
            "compute.sharding=none",
        )
    )
    assert h200.problems == []


def test_paper_32b_fits_2x8_h100_sharded_by_default() -> None:
    spec = _spec("paper-32b.yaml")
    assert spec.compute.sharding is None and P.resolved_sharding(spec) == "fsdp"
    p = P.plan(spec)
    assert (p.sharding, p.shards, p.problems) == ("fsdp", 16, [])
    result = CliRunner().invoke(app, ["plan", str(ROOT / "experiments" / "paper-32b.yaml")])
    assert result.exit_code == 0, result.output
    assert "sharding fsdp over 16 ranks" in result.output
    # paper-8b fits whole on each H100: null stays data parallel.
    assert P.resolved_sharding(_spec("paper-8b.yaml")) == "none"


def test_sharded_memory_and_collectives_by_hand() -> None:
    spec = _spec("paper-32b.yaml")
    d = P.model_dims(spec)
    assert d is not None
    p = P.plan(spec)
    sft = next(s for s in p.stages if s.stage == "sft")
    rl = next(s for s in p.stages if s.stage == "rl")
    n, w = 16, 2
    weights, state = w * d.params, 16 * d.shape.lora
    layer = d.shape.text_linear / d.shape.layers
    gathered = w * (d.params - d.shape.text_linear + 2 * layer)
    assert P.fsdp_gather_bytes(d, w) == pytest.approx(gathered)
    seq = min(spec.sft.max_seq_len, 12000 + 770 + 256)
    act = spec.sft.batch_size * seq * P.activation_bytes_per_token(d, w, True)
    assert sft.peak_bytes == pytest.approx(weights / n + state / n + gathered + act)
    # RL sampling gathers the whole model: the rest of it (15/16) beside each rank's 1/16.
    total = 12000 + 770 + 256
    kv = 2 * total * P.kv_bytes_per_token(d, w)
    sampling = weights / n + state / n + (weights - weights / n) + kv
    assert rl.peak_bytes >= sampling
    # One all-gather moves (N-1)/N of the weights at the network's bandwidth (2 nodes).
    assert P.fsdp_seconds(weights, n, 2) == pytest.approx(weights * 15 / 16 / 50e9)
    assert P.fsdp_seconds(weights, n, 1) == pytest.approx(weights * 15 / 16 / 360e9)
    assert P.fsdp_seconds(weights, 1, 2) == 0.0
    # The SFT time carries 8 micro-batches x (2 all-gathers + a reduce-scatter) a step.
    unsharded = P.plan(spec, sharding="none")
    sft0 = next(s for s in unsharded.stages if s.stage == "sft")
    comm = 8 * (2 * P.fsdp_seconds(weights, n, 2) + P.fsdp_seconds(4 * d.shape.lora, n, 2))
    assert sft.hours * 3600 == pytest.approx(sft0.hours * 3600 + spec.sft.max_steps * comm)


def test_sharding_does_not_hide_a_micro_batch_too_large() -> None:
    p = P.plan(_spec("paper-32b.yaml", "rl.micro_batch_size=8"))
    assert [(s, k) for s, k, _ in p.field_problems] == [("rl", "rl.micro_batch_size")]
    assert "at most 2 fits" in p.field_problems[0][2]
    with pytest.raises(ValueError):
        P.plan(_spec("paper-32b.yaml"), sharding="zero3")


def test_validate_refuses_a_stage_that_cannot_fit(tmp_path: Path) -> None:
    # extends: stays inside the spec's tree (issue 26), so the parent is copied beside it
    (tmp_path / "paper-8b.yaml").write_text((ROOT / "experiments" / "paper-8b.yaml").read_text())
    spec = tmp_path / "big.yaml"
    spec.write_text("extends: paper-8b.yaml\nname: big\nrl:\n  micro_batch_size: 64\n")
    result = CliRunner().invoke(app, ["validate", str(spec)])
    assert result.exit_code == 2
    assert "rl.micro_batch_size: rl: needs" in result.output
    planned = CliRunner().invoke(app, ["plan", str(spec)])
    assert planned.exit_code == 2 and "REFUSED" in planned.output
    assert (
        CliRunner().invoke(app, ["plan", str(ROOT / "experiments" / "paper-8b.yaml")]).exit_code
        == 0
    )


def test_rl_time_is_sharded_sampling_plus_a_share_of_the_update_plus_the_probe() -> None:
    from rmsweb.models.flops import train_flops

    spec = _spec("paper-8b.yaml")
    p = P.plan(spec)
    rl = next(s for s in p.stages if s.stage == "rl")
    d = P.model_dims(spec)
    patches, img = P.image_tokens(spec)
    prompt = spec.model.prompt.max_prompt_tokens + img
    new = spec.model.prompt.max_new_tokens
    r = spec.rl
    peak, bw = 989.4e12, 3.35e12
    # HF generate: 128 / 8 = 16 chunks of 8, 2 per rank; each a prefill and 256 decode steps
    prefill = 8 * (2 * d.shape.text_linear * prompt + P.vision_forward_of(d, patches))
    chunk = prefill / (peak * P.MFU["prefill"][0]) + P.decode_seconds(
        d, 2, 8, prompt, new, bw, P.DECODE_EFFICIENCY["hf"][0]
    )
    update = 16 * train_flops(d.shape, prompt + new, new, patches) / (peak * P.MFU["rl_update"][0])
    step = 2 * chunk + update
    assert f"sampling {2 * chunk:.0f} s" in rl.notes[0] and f"update {update:.0f} s" in rl.notes[0]
    # the KL probe: 64 states in micro-batches of 8 at each of 15 checkpoints (300 / 20)
    assert "x 15 checkpoints (64 states in micro-batches of 8)" in rl.notes[0]
    assert rl.hours > r.steps * step / 3600
    assert rl.usd == pytest.approx(rl.hours * 8 * 2.50)
    # decode: 256 steps, each reading the weights and 8 sequences' KV cache
    assert P.decode_seconds(d, 2, 8, 1000, 256, bw, 1.0) == pytest.approx(
        256 * (2 * d.params + 8 * (1000 + 128) * P.kv_bytes_per_token(d, 2)) / bw
    )


def test_kl_probe_memory_is_one_micro_batch_and_in_the_peak() -> None:
    spec = _spec("paper-8b.yaml")
    rl = next(s for s in P.plan(spec).stages if s.stage == "rl")
    d = P.model_dims(spec)
    _, img = P.image_tokens(spec)
    total = spec.model.prompt.max_prompt_tokens + img + spec.model.prompt.max_new_tokens
    new = spec.model.prompt.max_new_tokens
    probe = next(v for k, v in rl.memory.items() if k.startswith("kl_probe (8 x"))
    per_seq = total * P.kv_bytes_per_token(d, 2) + P.PROBE_LOGIT_BYTES * d.vocab * new
    assert probe == 8 * per_seq  # micro-batch 8, not the 64 probe states at once
    assert 64 * total * P.kv_bytes_per_token(d, 2) / P.GIB > 100  # the old all-at-once cache
    big = P.plan(_spec("paper-8b.yaml", "rl.micro_batch_size=null"))
    assert [(s, k) for s, k, _ in big.field_problems] == [("rl", "rl.micro_batch_size")]


def test_plan_prices_every_stage_and_warns_about_checkpoint_gaps() -> None:
    units = {"train": 267, "val": 0, "test": 274, **EVAL_UNITS}
    # paper-8b checkpoints SFT every 20 minutes; without that, every 500 steps (~8 h).
    p = P.plan(_spec("paper-8b.yaml", "sft.save_minutes=null"), units=units)
    names = [s.stage for s in p.stages]
    assert names[:5] == ["collect", "sft", "mine", "rl", "eval sft on webvoyager"]
    assert "eval rl on webtailbench" in names
    assert p.total_hours == pytest.approx(sum(s.hours for s in p.stages))
    assert all(s.hours > 0 and s.usd > 0 for s in p.stages if s.stage != "eval/mine (vllm)")
    assert any(w.startswith("sft: the plan puts") for w in p.warnings)  # save_steps 500
    ok = P.plan(_spec("paper-8b.yaml"), units=units)
    assert not any(w.startswith("sft:") for w in ok.warnings)
    sized = P.plan(_spec("paper-8b.yaml", "sft.epochs=3"), units=units)
    sft = next(s for s in sized.stages if s.stage == "sft")
    samples = int(267 * 15 * P.SFT_STEPS_PER_EPISODE)
    assert f"{-(-3 * samples // 256)} steps" in " ".join(sft.notes)
    text = P.render(p)
    assert "total:" in text and "source of MFU sft" in text and "llm-foundry" in text


EVAL_UNITS = {"eval:webvoyager": 595, "eval:om2w": 300, "eval:webtailbench": 609}


def test_plan_prices_each_evaluation_benchmark_by_its_steps_and_judge() -> None:
    p = P.plan(_spec("paper-8b.yaml"), units={"train": 36, **EVAL_UNITS})
    by = {s.stage: s for s in p.stages}
    for policy in ("sft", "rl"):
        for bench, n, steps in (
            ("webvoyager", 595, 15),
            ("om2w", 300, 30),
            ("webtailbench", 609, 30),
        ):
            stage = by[f"eval {policy} on {bench}"]
            notes = " ".join(stage.notes)
            assert f"{n * steps:,} model calls ({n} episodes)" in notes, notes
            assert "judge o4-mini:" in notes and stage.usd > 0
    # WebVoyager's judge sees its last 15 screenshots: fewer judge tokens a task than the
    # 30-step benchmarks' (all their screenshots)
    wv, wtb = by["eval sft on webvoyager"], by["eval sft on webtailbench"]
    assert wv.usd < wtb.usd
    # without eval.suites the training suite's test split is priced, as before
    plain = P.plan(_spec("paper-8b.yaml", "eval.suites=null"), units={"train": 36, "test": 4})
    assert [s.stage for s in plain.stages if s.stage.startswith("eval ")] == ["eval sft", "eval rl"]


def test_plan_command_counts_each_benchmarks_tasks() -> None:
    result = CliRunner().invoke(app, ["plan", str(ROOT / "experiments" / "paper-8b.yaml")])
    assert result.exit_code == 0, result.output
    assert "eval rl on om2w: (fits)" in result.output
    assert "9,000 model calls (300 episodes)" in result.output  # Online-Mind2Web whole
    assert "8,925 model calls (595 episodes)" in result.output  # WebVoyager, cleaned


def test_validate_warns_when_checkpoints_are_far_apart() -> None:
    spec = str(ROOT / "experiments" / "paper-8b.yaml")
    far = ["-o", "sft.save_minutes=null", "-o", "rl.save_steps=50"]  # paper-8b sets both
    result = CliRunner().invoke(app, ["validate", spec, *far])
    assert result.exit_code == 0
    assert "sft: the plan puts" in result.output and "sft.save_minutes" in result.output
    assert "warning" not in CliRunner().invoke(app, ["validate", spec]).output
