"""benchmarks/rl_efficiency.py on tiny inputs: a tiny random text model as the SFT
checkpoint and three synthetic mined states. Its pure measures are tested in
tests/report/test_efficiency.py; here the wiring: the variants, a DAPO-DS run continued
to equal accepted groups, and (browser) the whole run with every kept policy played."""

from __future__ import annotations

import importlib.util
import itertools
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

from rmsweb.env.types import HistoryItem
from rmsweb.spec import ExperimentSpec
from rmsweb.store.rows import MinedStateRow
from rmsweb.store.writer import TableWriter

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "rl_efficiency.py"
# rl.steps 3 in the spec, 2 passed: the benchmark's --steps wins. max_new_tokens 6
# (shrunk): a random tiny model never stops early, and never writes a right action.
SPEC = {
    "name": "rl-bench",
    "model": {"kind": "tiny", "prompt": {"system": "none", "max_new_tokens": 6}},
    "rl": {
        "kind": "salvage_ds",
        "steps": 3,
        "group_size": 2,
        "batch_size": 4,
        "learning_rate": 1e-3,
        "torch_threads": 1,
        "kl_probe_states": 0,
    },
    "suite": {
        "kind": "miniwob",
        "tasks": ["click-button", "focus-text"],
        "val": {"start": 50_000, "count": 5},
        "max_steps": 2,
        "browser": {"contexts": 1},
    },
}


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rl_efficiency", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["rl_efficiency"] = module
    spec.loader.exec_module(module)
    return module


def _inputs(tmp_path: Path, model_dir: Path) -> tuple[Path, Path]:
    mine, sft = tmp_path / "mine", tmp_path / "sft"
    rows = []
    for k, (word, target) in enumerate([("ok", 2), ("cancel", 3), ("next", 4)]):
        rows.append(
            MinedStateRow(
                state_id=f"e{k}/1",
                episode_id=f"e{k}",
                step=1,
                obs_text='[2] button "ok"\n[3] button "cancel"\n[4] button "next"',
                screenshot=None,
                history=[HistoryItem("Action: click(2)", "click(2)", None)],
                reference_actions=[f"click({target})"],
                policy_action="click(2)",
                failure_mode="wrong_element",
                weight=1.0,
                task_id="click-button",
                instruction=f'Click on the "{word}" button.',
            )
        )
    with TableWriter(mine, "mined_states") as w:
        w.write_many(rows)
    shutil.copytree(model_dir, sft / "model")
    return sft, mine


def test_variants_swap_only_the_kind_resampling_and_the_eval_cadence() -> None:
    bench = _module()
    spec = ExperimentSpec.model_validate(
        {**SPEC, "rl": {**SPEC["rl"], "min_std": 0.2, "anchor_weight": 0.7, "max_resample": 1}}
    )
    variants = bench.rl_variants(spec, 5, 2, save_steps=2)
    assert list(variants) == ["salvage_ds", "dapo_ds", "grpo"]
    salvage, dapo, grpo = (variants[k].rl for k in ("salvage_ds", "dapo_ds", "grpo"))
    assert (salvage.max_resample, salvage.anchor_weight, salvage.min_std) == (0, 0.7, 0.2)
    assert (dapo.kind, dapo.max_resample, dapo.min_std) == ("dapo_ds", 2, 0.2)
    assert grpo.kind == "grpo" and not hasattr(grpo, "min_std")
    for rl in (salvage, dapo, grpo):
        assert (rl.steps, rl.batch_size, rl.group_size, rl.save_steps) == (5, 4, 2, 2)
    assert all(v.model == spec.model and v.suite == spec.suite for v in variants.values())
    assert bench.rl_variants(spec, 5, 2)["grpo"].rl.save_steps == spec.rl.save_steps


def test_missing_inputs_fail_with_a_clear_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = _module()
    assert bench.main(["--sft", str(tmp_path / "sft"), "--mine", str(tmp_path)]) == 2
    assert "no SFT model" in capsys.readouterr().err
    (tmp_path / "sft" / "model").mkdir(parents=True)
    (tmp_path / "sft" / "model" / "config.json").write_text("{}")
    assert bench.main(["--sft", str(tmp_path / "sft"), "--mine", str(tmp_path / "m")]) == 2
    assert "no mined_states table" in capsys.readouterr().err


def test_dapo_continues_past_its_steps_until_the_accepted_groups_match(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scripted reward gives contrast to every third group (one right, one wrong); the
    run is resumed from its last checkpoint and stops at the first step with enough."""
    from rmsweb.train.salvage_ds.reward import Scored

    bench = _module()
    calls = itertools.count()

    def scripted(*_args: object, **_kw: object) -> Scored:
        n = next(calls)
        right = (n // 2) % 3 == 0 and n % 2 == 0  # group n // 2: contrast when it is 0 mod 3
        return Scored(1.0 if right else -1.0, right, True)

    monkeypatch.setattr("rmsweb.train.salvage_ds.trainer.score", scripted)
    monkeypatch.delenv("RMSWEB_CHECKPOINT_DIR", raising=False)
    sft, mine = _inputs(tmp_path, tiny_model_dir)
    spec = ExperimentSpec.model_validate(SPEC)
    dapo = bench.rl_variants(spec, 2, 0, save_steps=1)["dapo_ds"]
    first = bench.train(dapo, sft, mine, tmp_path / "dapo", 0)
    assert sorted(first.snapshots) == [1, 2]
    assert all((p / "config.json").is_file() for p in first.snapshots.values())
    had = sum(r["accepted"] for r in first.curve)
    target = had + 3
    more = bench.continue_until_accepted(dapo, sft, mine, tmp_path / "dapo", 0, target, 40)
    accepted = [r["accepted"] for r in more.curve]
    assert [r["step"] for r in more.curve] == list(range(1, len(more.curve) + 1))
    # resumed, not restarted: the first two rows are the checkpoint's
    keys = ("step", "accepted", "samples_generated", "grad_norm", "train_s")
    assert [[r[k] for k in keys] for r in more.curve[:2]] == [
        [r[k] for k in keys] for r in first.curve
    ]
    assert more.continued_to == len(more.curve) > 2
    assert sum(accepted) >= target > sum(accepted[:-1])  # the first step with enough
    step, samples = bench.samples_at_accepted(more.curve, target)
    assert step == more.continued_to and samples == 4 * step  # 2 groups x G 2 a step


@pytest.mark.browser
def test_benchmark_end_to_end_plays_every_kept_policy(
    tiny_model_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bench = _module()
    monkeypatch.delenv("RMSWEB_CHECKPOINT_DIR", raising=False)
    sft, mine = _inputs(tmp_path, tiny_model_dir)
    spec = ExperimentSpec.model_validate(SPEC)

    result = bench.run(
        spec,
        "rl-bench",
        sft,
        mine,
        tmp_path / "out",
        steps=2,
        seeds_per_task=1,
        dapo_resample=2,
        eval_every=1,
    )

    printed = capsys.readouterr().out.strip().splitlines()
    runs, played = result["runs"], result["played"]
    # SFT and steps 1 and 2 of each algorithm, 2 tasks x 1 val seed each.
    assert set(played) == {"sft"} | {f"{k}-step-{s}" for k in bench.ALGORITHMS for s in (1, 2)}
    assert all(p.n == 2 and len(p.episodes) == 2 for p in played.values())
    # A random model is never right: salvage_ds anchors its 2 groups a step, dapo_ds
    # redraws them in each of its 2 resampling rounds, grpo uses them all.
    samples = {k: r.metrics["samples_generated"] for k, r in runs.items()}
    assert samples == {"salvage_ds": 2 * 2 * 2, "dapo_ds": 2 * 2 * 2 * 3, "grpo": 2 * 2 * 2}
    assert [runs[k].metrics["empty_steps"] for k in bench.ALGORITHMS] == [0, 2, 0]
    # No gain and no accepted group: every figure is undefined, none is a number.
    assert printed[-3:] == [
        "samples_to_half_gain salvage_ds=undefined dapo_ds=undefined grpo=undefined",
        "half_gain_ratio dapo_ds_over_salvage=undefined grpo_over_salvage=undefined",
        "equal_accepted_groups=0 samples_ratio dapo_ds_over_salvage=undefined "
        "grpo_over_salvage=undefined",
    ]
    text = "\n".join(printed)
    assert "val success per checkpoint" in text
    assert "  dapo_ds: 0: " in text and "(24)" in text  # step 2: 24 samples drawn by then
    assert text.count("-> undefined (no gain)") == 3
    assert "salvage_ds accepted no group" in text
