"""benchmarks/rl_efficiency.py end to end on tiny inputs: a tiny random text model as the
SFT checkpoint, three synthetic mined states, 2 optimizer steps per algorithm, and one
held-out seed on two MiniWoB tasks in a real headless Chromium."""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

from rmsweb.env.types import HistoryItem
from rmsweb.spec import ExperimentSpec
from rmsweb.store.reader import read_rows
from rmsweb.store.rows import MinedStateRow
from rmsweb.store.writer import TableWriter

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "rl_efficiency.py"
LAST_LINE = re.compile(
    r"samples_ratio_dapo_over_salvage=(\d+\.\d+) success_salvage=(\d\.\d+) "
    r"success_dapo=(\d\.\d+) success_grpo=(\d\.\d+)"
)
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


def _mined(run_dir: Path) -> None:
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
    with TableWriter(run_dir, "mined_states") as w:
        w.write_many(rows)


def test_variants_swap_only_the_kind_and_resampling() -> None:
    bench = _module()
    spec = ExperimentSpec.model_validate(
        {**SPEC, "rl": {**SPEC["rl"], "min_std": 0.2, "anchor_weight": 0.7, "max_resample": 1}}
    )
    variants = bench.rl_variants(spec, 5, 2)
    assert list(variants) == ["salvage_ds", "dapo_ds", "grpo"]
    salvage, dapo, grpo = (variants[k].rl for k in ("salvage_ds", "dapo_ds", "grpo"))
    assert (salvage.max_resample, salvage.anchor_weight, salvage.min_std) == (0, 0.7, 0.2)
    assert (dapo.kind, dapo.max_resample, dapo.min_std) == ("dapo_ds", 2, 0.2)
    assert grpo.kind == "grpo" and not hasattr(grpo, "min_std")
    for rl in (salvage, dapo, grpo):
        assert (rl.steps, rl.batch_size, rl.group_size, rl.learning_rate) == (5, 4, 2, 1e-3)
    assert all(v.model == spec.model and v.suite == spec.suite for v in variants.values())


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


@pytest.mark.browser
def test_benchmark_end_to_end_prints_the_trainers_sample_counts(
    tiny_text_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bench = _module()
    monkeypatch.delenv("RMSWEB_CHECKPOINT_DIR", raising=False)
    mine, sft, out = tmp_path / "mine", tmp_path / "sft", tmp_path / "out"
    _mined(mine)
    shutil.copytree(tiny_text_dir, sft / "model")
    spec = ExperimentSpec.model_validate(SPEC)

    result = bench.run(spec, "rl-bench", sft, mine, out, steps=2, seeds_per_task=1, dapo_resample=2)

    printed = capsys.readouterr().out.strip().splitlines()
    match = LAST_LINE.fullmatch(printed[-1])
    assert match, printed[-1]
    metrics, success = result["metrics"], result["success"]
    # The samples are the trainer's: G completions per group it logged, every round.
    samples = {}
    for kind, m in metrics.items():
        groups = read_rows(out / kind, "rl_groups")
        assert {g.rl_step for g in groups} == {1, 2}
        samples[kind] = sum(len(g.rewards) for g in groups)
        assert m["samples_generated"] == samples[kind] and m["steps"] == 2
    # Every group of a random model is all wrong: salvage_ds anchors its 2 groups a step,
    # dapo_ds redraws them in each of its 2 resampling rounds, grpo uses them all.
    assert samples == {"salvage_ds": 2 * 2 * 2, "dapo_ds": 2 * 2 * 2 * 3, "grpo": 2 * 2 * 2}
    assert metrics["dapo_ds"]["reasons"]["all_wrong"] == 2 * 2 * 3
    assert metrics["grpo"]["reasons"]["ungated"] == 2 * 2
    # dapo_ds steps with no accepted group make no update; salvage_ds anchors instead.
    assert [metrics[k]["empty_steps"] for k in bench.ALGORITHMS] == [0, 2, 0]
    assert float(match[1]) == 3.0
    for name, key in (("salvage_ds", 2), ("dapo_ds", 3), ("grpo", 4)):
        assert float(match[key]) == pytest.approx(success[name]["success"], abs=1e-4)
    assert set(success) == {"sft", "salvage_ds", "dapo_ds", "grpo"}
    assert all(s["n"] == 2 for s in success.values())  # 2 tasks x 1 val seed each
    text = "\n".join(printed)
    assert "sft baseline: held-out val success" in text
    assert text.count("stalled: no (ran 2/2 steps)") == 3
    for kind in metrics:
        assert (out / kind / "model" / "config.json").is_file()
