"""The rl stage with compute.sharding fsdp, in one process (FSDP2 over a group of one):
the stage shards the policy, and its model folder (the gathered weights in the unsharded
start model) equals the unsharded stage's."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from typing import Any

import pytest

from rmsweb.spec import ExperimentSpec
from rmsweb.stage_io import StageIO


@pytest.fixture
def process_group() -> Any:
    yield
    import torch.distributed as dist

    if dist.is_initialized():  # the one-rank group sharding.shard made: gone with the test
        dist.destroy_process_group()


def _mined(run_dir: Path) -> None:
    """test_salvage_stage.py's three mined click states."""
    path = Path(__file__).with_name("test_salvage_stage.py")
    spec = importlib.util.spec_from_file_location("rl_stage_cases", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    module._mined(run_dir)


def _run(name: str, sharding: str, tiny_text_dir: Path, tmp_path: Path) -> Path:
    from rmsweb.train.salvage_ds.stage import main

    spec = ExperimentSpec.model_validate(
        {
            "name": "rl-test",
            "model": {"kind": "tiny", "prompt": {"system": "none", "max_new_tokens": 6}},
            "rl": {
                "kind": "salvage_ds",
                "steps": 3,
                "group_size": 2,
                "batch_size": 4,
                "save_steps": 2,
                "learning_rate": 1e-3,
                "torch_threads": 1,
            },
            "compute": {"sharding": sharding},
        }
    )
    mine, sft, out = tmp_path / f"mine-{name}", tmp_path / f"sft-{name}", tmp_path / name
    _mined(mine)
    shutil.copytree(tiny_text_dir, sft / "model")
    main(StageIO("rl-test", spec, {"mine": mine, "sft": sft}, out, tmp_path / f"{name}.json"))
    return out / "model"


def test_rl_stage_sharded_writes_the_same_model(
    tiny_text_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, process_group: Any
) -> None:
    import torch

    from rmsweb.models.load import load_model
    from rmsweb.train import sharding

    monkeypatch.delenv("RMSWEB_CHECKPOINT_DIR", raising=False)
    sharded_models: list[Any] = []
    shard = sharding.shard

    def spy(model: Any, *args: Any, **kwargs: Any) -> Any:
        sharded_models.append(model)
        return shard(model, *args, **kwargs)

    monkeypatch.setattr(sharding, "shard", spy)
    plain = load_model(_run("none", "none", tiny_text_dir, tmp_path), device="cpu").model
    assert sharded_models == []
    sharded = load_model(_run("fsdp", "fsdp", tiny_text_dir, tmp_path), device="cpu").model
    assert len(sharded_models) == 2  # the policy and its frozen reference (the KL probe)
    a, b = plain.state_dict(), sharded.state_dict()
    assert a.keys() == b.keys()
    start = load_model(tiny_text_dir, device="cpu").model.state_dict()
    assert any(not torch.equal(a[k], start[k]) for k in a)  # RL moved the weights
    for k in a:
        assert torch.allclose(a[k], b[k], rtol=1e-4, atol=1e-6), k
