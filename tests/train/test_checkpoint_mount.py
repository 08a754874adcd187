"""Checkpoints are staged locally and copied in: no rename inside the work dir (a mount)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from rmsweb.train.salvage_ds import checkpoint as ck


def _model_and_optimizer() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    return model, optimizer


def test_save_renames_nothing_in_the_work_dir(tmp_path: Path, monkeypatch) -> None:
    work = tmp_path / "mount"
    local = tmp_path / "local"
    monkeypatch.setenv("RMSWEB_LOCAL_TMP", str(local))
    real_rename, real_replace = os.rename, os.replace

    def refuse(kind):
        real = real_rename if kind == "rename" else real_replace

        def inner(src, dst, *a, **k):
            if str(work) in str(src) or str(work) in str(dst):
                raise OSError(f"{kind} refused inside the mount: {src} -> {dst}")
            return real(src, dst, *a, **k)

        return inner

    monkeypatch.setattr(os, "rename", refuse("rename"))
    monkeypatch.setattr(os, "replace", refuse("replace"))
    model, optimizer = _model_and_optimizer()
    for step in (1, 2, 3):
        ck.save_checkpoint(work, step, model, optimizer, {"curve": [step]})
    assert [p.name for p in ck.checkpoints(work)] == ["checkpoint-2", "checkpoint-3"]
    assert sorted(p.name for p in (work / "checkpoint-3").iterdir()) == sorted(
        [*ck.FILES, ck.COMPLETE]
    )
    assert list(local.iterdir()) == []  # staging folders are removed

    fresh, fresh_opt = torch.nn.Linear(3, 2), torch.optim.AdamW(model.parameters(), lr=0.1)
    step, logs = ck.load_checkpoint(work, fresh, fresh_opt)
    assert (step, logs) == (3, {"curve": [3]})
    assert torch.equal(fresh.weight, model.weight)


def test_a_folder_without_complete_is_an_interrupted_save(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("RMSWEB_LOCAL_TMP", str(tmp_path / "local"))
    model, optimizer = _model_and_optimizer()
    ck.save_checkpoint(tmp_path / "w", 2, model, optimizer, {})
    half = tmp_path / "w" / "checkpoint-4"
    half.mkdir()
    for name in ck.FILES:  # both files copied, killed before COMPLETE
        (half / name).write_bytes((tmp_path / "w" / "checkpoint-2" / name).read_bytes())
    assert [p.name for p in ck.checkpoints(tmp_path / "w")] == ["checkpoint-2"]


@pytest.mark.parametrize(
    ("env", "device", "want"),
    [
        ({"LOCAL_RANK": "3"}, "cuda", "cuda:3"),
        ({}, "cuda", "cuda"),
        ({"LOCAL_RANK": "1"}, "cpu", "cpu"),
    ],
)
def test_cuda_placement_follows_local_rank(monkeypatch, env, device, want) -> None:
    from rmsweb.models import load

    monkeypatch.delenv("LOCAL_RANK", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # no set_device here
    assert load.resolve_device(device) == want
