"""model.pretrain: one model and one pretrain stage shared by every seed, budget and arm."""

from __future__ import annotations

from pathlib import Path

from rmsweb.compile.graph import plan_experiment, plan_project
from rmsweb.spec import ExperimentSpec
from rmsweb.spec.loader import load_experiment


def _spec(repo_root: Path, name: str, **changes: object) -> ExperimentSpec:
    data = load_experiment(repo_root / "experiments" / "miniwob-cpu.yaml").model_dump(mode="json")
    data["name"] = name
    data["sweep"] = {}  # sweep names are unique in a project; these tests plan two specs
    for dotted, value in changes.items():
        node = data
        *parents, last = dotted.split("__")
        for p in parents:
            node = node[p]
        node[last] = value
    return ExperimentSpec.model_validate(data)


def test_budgets_and_seeds_share_one_model_and_one_pretrain_stage(repo_root: Path) -> None:
    pre = {"steps": 10, "samples": 100}
    a = _spec(repo_root, "budget-a", model__pretrain=pre, seeds=[0, 1])
    b = _spec(
        repo_root,
        "budget-b",
        model__pretrain=pre,
        seeds=[0, 1, 2],
        suite__train={"start": 0, "count": 50},
        sft__max_steps=700,
        rl__steps=3,
    )
    stages = plan_project([a, b])
    models = [s for s in stages if s.kind == "model"]
    pretrains = [s for s in stages if s.kind == "pretrain"]
    assert len(models) == 1 and len(pretrains) == 1
    model, pretrain = models[0], pretrains[0]
    assert model.seed is None and pretrain.seed is None
    assert sorted(pretrain.sharers) == ["budget-a", "budget-b"]
    assert pretrain.upstream == {"model": model}
    sfts = [s for s in stages if s.kind == "sft"]
    assert len(sfts) == 5  # 2 + 3 seeds: the budgets differ
    assert all(s.upstream["model"] is pretrain for s in sfts)
    # What they read: the suite's tasks and the model section, never the budget or splits.
    for stage in (model, pretrain):
        assert not [k for k in stage.params if k.split(".")[0] in ("sft", "rl", "mine", "collect")]
        assert not [
            k
            for k in stage.params
            if k.startswith(("suite.val", "suite.test", "suite.mine", "suite.train.count"))
        ]
    assert "suite.tasks" in model.params and "suite.train.start" in model.params
    assert "model.pretrain.seed" in model.params and "model.pretrain.steps" not in model.params
    assert "model.pretrain" in pretrain.params and "model.prompt" in pretrain.params


def test_pretraining_settings_rerun_pretrain_not_the_model_stage(repo_root: Path) -> None:
    a = plan_experiment(_spec(repo_root, "x", model__pretrain={"steps": 10}))
    b = plan_experiment(_spec(repo_root, "x", model__pretrain={"steps": 20}))
    kinds = {s.kind: s.identity for s in a}
    other = {s.kind: s.identity for s in b}
    assert kinds["model"] == other["model"]
    assert kinds["pretrain"] != other["pretrain"] and kinds["sft"] != other["sft"]
    c = plan_experiment(_spec(repo_root, "x", model__pretrain={"steps": 10, "seed": 3}))
    assert {s.kind: s.identity for s in c}["model"] != kinds["model"]


def test_a_stopping_bar_reruns_pretrain_only_and_is_absent_from_specs_without_it(
    repo_root: Path,
) -> None:
    plain = _spec(repo_root, "x", model__pretrain={"steps": 10})
    assert "until" not in plain.model_dump(mode="json")["model"]["pretrain"]  # hashes as before
    until = {"accuracy": {"copy": 0.5}, "check_every": 5}
    barred = _spec(repo_root, "x", model__pretrain={"steps": 10, "until": until})
    a = {s.kind: s.identity for s in plan_experiment(plain)}
    b = {s.kind: s.identity for s in plan_experiment(barred)}
    assert a["model"] == b["model"]  # the tokenizer and initial weights do not read it
    assert a["pretrain"] != b["pretrain"]


def test_a_spec_without_pretrain_is_unchanged(repo_root: Path) -> None:
    spec = _spec(repo_root, "plain", seeds=[0, 1], model__pretrain=None)
    assert "pretrain" not in spec.model_dump(mode="json")["model"]  # params.yaml as before
    stages = plan_experiment(spec)
    assert not [s for s in stages if s.kind == "pretrain"]
    models = [s for s in stages if s.kind == "model"]
    assert [m.seed for m in models] == [0, 1]  # one random model per training seed
    sft = next(s for s in stages if s.kind == "sft" and s.seed == 1)
    assert sft.upstream["model"] is models[1]
    assert not [k for s in stages for k in s.params if "pretrain" in k]
    # The model stage reads the whole suite but its held-out seeds, as before the field.
    assert "suite.train" in models[0].params
    # An explicit null and an absent field are one spec (the default job sets the field).
    data = spec.model_dump(mode="json")
    assert "pretrain" not in data["model"]
    absent = ExperimentSpec.model_validate(data)
    assert [s.identity for s in plan_experiment(absent)] == [s.identity for s in stages]


def test_the_run_key_of_a_pretraining_spec_s_model_stage_has_no_seed() -> None:
    from rmsweb.compile.identity import stage_run_key
    from rmsweb.spec import ExperimentSpec

    spec = ExperimentSpec.model_validate(
        {
            "name": "x",
            "suite": {"kind": "miniwob", "tasks": ["click-button"]},
            "model": {"kind": "tiny", "pretrain": {"steps": 10}},
        }
    )
    # One model stage for every seed: found without a seed, not looked up at seed 0.
    assert stage_run_key(spec, "model") != stage_run_key(spec, "pretrain")
