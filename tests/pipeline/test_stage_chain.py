"""The whole chain: the real stage mains, each on the previous stage's real outputs,
ending in the report. Slow tier (`make slow`, which CI runs): its 13 stage processes
take minutes, a large share of the default tier's 10-minute budget on two cores.

A tiny experiment (experiments/smoke.yaml shrunk: 2 MiniWoB tasks x 2 train and 2 test
seeds, SFT 4 steps, RL 2 steps) is compiled by `rmsweb compile` in a scratch project,
and every stage's `cmd` from the generated dvc.yaml runs in dependency order, as
`dvc repro` would run it (without DVC's cache, which `make smoke` and the fault tests
cover). Each stage is tested alone on synthetic tables elsewhere; this test is for the
seams: what one stage writes is what the next one reads.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EXP = "chain"
# Shrunk from experiments/smoke.yaml (each stage still does its whole job, on less):
# 2 x 2 collect units, a 2-page tokenizer corpus, 4 pretraining steps, 4 SFT steps,
# mining on 1 seed per task, 2 RL steps of 4 states on one thread, eval on test only,
# the regime on 4 mined states and 1 val seed per task.
OVERRIDES = [
    f"name={EXP}",
    "suite.train.count=2",
    "suite.test.count=2",
    "model.corpus_seeds_per_task=2",
    "sft.max_steps=4",
    "sft.batch_size=4",
    "sft.save_steps=4",
    "sft.logging_steps=2",
    "sft.torch_threads=1",
    "rl.steps=2",
    "rl.save_steps=2",
    "rl.batch_size=4",
    "rl.group_size=2",
    "rl.torch_threads=1",
    "eval.splits=[test]",
    "model.pretrain.steps=4",
    "model.pretrain.samples=48",
    "mine.seeds_per_task=1",
    "regime.val_seeds_per_task=1",
    "regime.max_mined_states=4",
]


def paths(entries: list) -> list[str]:
    """dvc.yaml's outs/deps entries: a path, or {path: options}."""
    return [e if isinstance(e, str) else next(iter(e)) for e in entries]


def dependency_order(stages: dict) -> list[str]:
    """Stage names so that each runs after the stages whose outs it depends on."""
    producer = {out: name for name, s in stages.items() for out in paths(s.get("outs", []))}
    order: list[str] = []

    def visit(name: str, seen: tuple[str, ...] = ()) -> None:
        assert name not in seen, f"cycle through {name}"
        if name in order:
            return
        for dep in paths(stages[name].get("deps", [])):
            if dep in producer:
                visit(producer[dep], (*seen, name))
        order.append(name)

    for name in stages:
        visit(name)
    return order


@pytest.mark.slow
@pytest.mark.browser
def test_every_stage_runs_on_the_previous_stages_outputs(tmp_path: Path) -> None:
    from rmsweb.spec import load_experiment

    spec = load_experiment(ROOT / "experiments" / "smoke.yaml", OVERRIDES)
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / f"{EXP}.yaml").write_text(
        yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False)
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HF_HUB_OFFLINE": "1",
        "DVC_NO_ANALYTICS": "1",
        "OMP_NUM_THREADS": "1",
    }
    env.pop("RMSWEB_CHECKPOINT_DIR", None)

    def rmsweb(*args: str) -> None:
        proc = subprocess.run(
            [sys.executable, "-m", "rmsweb", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert proc.returncode == 0, (args[:3], proc.stderr[-4000:])

    rmsweb("compile", "--root", str(tmp_path))
    stages = yaml.safe_load((tmp_path / "dvc.yaml").read_text())["stages"]
    order = dependency_order(stages)
    kinds = [name.split("_", 1)[0].split("-", 1)[0] for name in order]
    assert kinds[0] == "collect" and kinds[-1] == "report"
    assert {"model", "sft", "mine", "rl", "eval"} <= set(kinds)
    for name in order:
        argv = shlex.split(stages[name]["cmd"])
        assert argv[0] == "rmsweb", stages[name]["cmd"]
        rmsweb(*argv[1:])
        for out in paths(stages[name].get("outs", [])):  # what dvc.yaml declares is there
            assert (tmp_path / out).exists(), (name, out)

    report = next(s for n, s in stages.items() if n.startswith("report"))
    md = next(p for out in paths(report["outs"]) for p in (tmp_path / out).rglob("report.md"))
    text = md.read_text()
    n = len(spec.suite.tasks) * 2  # every test episode of every policy reached the report
    for policy in spec.eval.policies:
        assert f"| {policy.name} | miniwob | test | {n} |" in text, policy.name
    summary = json.loads((tmp_path / "metrics" / "summary" / f"{EXP}.json").read_text())
    assert {f"success/{p.name}" for p in spec.eval.policies} <= set(summary)
    assert summary["success/expert"] == 1.0  # the gold paths, through every seam
    assert summary["mine/states"] > 0 and summary["collect/yield"] > 0

    # Plain `dvc plots show` (no target) finds the training curves dvc.yaml declares.
    dvc = [str(Path(sys.executable).with_name("dvc"))]
    subprocess.run([*dvc, "init", "--no-scm", "-q"], cwd=tmp_path, env=env, check=True)
    shown = subprocess.run(
        [*dvc, "plots", "show", "--json"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)["data"]
    # SFT loss, RL reward and the RL policy's KL (to SFT at the probe steps, or the loss's
    # estimate where beta > 0).
    for curve in ("train/loss.tsv", "rl/reward_mean.tsv", ("rl/kl_to_sft.tsv", "rl/kl.tsv")):
        assert [k for k in data if k.endswith(curve)], (curve, sorted(data))
