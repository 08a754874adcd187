"""Collect with an LLM teacher behind a real local OpenAI-compatible server.

- the LLM reflector writes a reflection, it is stored, and it is in the next
  attempt's prompt;
- the API key set in the environment appears nowhere: params.yaml, dvc.lock,
  any Parquet table, any log of the run.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from rmsweb.spec import ExperimentSpec

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[2]


def openai_spec(server: Any, name: str = "llm") -> dict:
    endpoint = {
        "base_url": server.base_url,
        "model": server.model,
        "api_key_env": "RMSWEB_TEST_KEY",
        "timeout_s": 60,
        "max_http_retries": 1,
    }
    return {
        "name": name,
        "suite": {
            "kind": "miniwob",
            "tasks": ["enter-text"],  # the served model always clicks: attempt 0 fails
            "train": {"start": 0, "count": 2},
            "test": {"start": 1000, "count": 2},
            "max_steps": 3,
            "browser": {"contexts": 1},
        },
        "collect": {
            "teacher": {"kind": "openai", **endpoint},
            "retry": "reflect",
            "max_retries": 1,
        },
        "eval": {"policies": [{"kind": "openai", "name": "llm", **endpoint}]},
    }


def test_llm_reflection_is_stored_and_prompted(
    transformers_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rmsweb.collect.job import collect_job
    from rmsweb.collect.retry import RetryLoop
    from rmsweb.collect.teacher import build_teacher
    from rmsweb.rollout.build import build_runner
    from rmsweb.store.reader import read_records
    from rmsweb.store.writer import ShardWriter

    monkeypatch.setenv("RMSWEB_TEST_KEY", "sk-local-test")
    spec = ExperimentSpec.model_validate(openai_spec(transformers_server))
    seen: list[Any] = []

    async def go() -> None:
        runner = build_runner(spec.suite, run="collect/llm", stage="collect", progress=False)
        async with runner:
            teacher = build_teacher(spec, runner.suite)
            inner = teacher.policy.inner
            act = inner.act

            async def spy(request: Any) -> Any:
                seen.append((request, inner.messages(request)))
                return await act(request)

            inner.act = spy
            with ShardWriter(tmp_path / "run") as sink:
                await runner.run(
                    teacher.policy,
                    runner.suite.task_ids(),
                    [0],
                    sink,
                    job=collect_job(RetryLoop("reflect", 1), teacher.judge, teacher.reflector),
                )
            await teacher.policy.close()

    asyncio.run(go())
    records = read_records(tmp_path / "run")
    assert [r.episode.attempt for r in records] == [0, 1]
    assert not records[0].episode.success
    (reflection,) = records[0].reflections
    assert reflection.source == transformers_server.model
    assert reflection.text and reflection.tokens_in > 0 and reflection.tokens_out > 0
    second = [msgs for req, msgs in seen if req.attempt == 1]
    assert second, "attempt 1 was prompted"
    assert reflection.text in second[0][-1]["content"]
    assert "Lessons from earlier attempts" in second[0][-1]["content"]
    first = [msgs for req, msgs in seen if req.attempt == 0]
    assert all("Lessons" not in m[-1]["content"] for m in first)


def test_api_key_is_written_nowhere(transformers_server: Any, tmp_path: Path) -> None:
    """A whole openai-backend run through `dvc repro`: grep every file it leaves for the key."""
    key = "sk-rmsweb-SECRET-7f3a9c"
    project = tmp_path / "project"
    (project / "experiments").mkdir(parents=True)
    (project / "rmsweb").symlink_to(ROOT / "rmsweb")  # DVC hashes the stage code deps
    spec_file = project / "experiments" / "llm.yaml"
    spec_file.write_text(yaml.safe_dump(openai_spec(transformers_server)))
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        "RMSWEB_TEST_KEY": key,
        "DVC_NO_ANALYTICS": "1",
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
    }

    def run(*cmd: str) -> str:
        proc = subprocess.run(
            cmd, cwd=project, env=env, capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout + proc.stderr

    logs = run("git", "init", "-q")
    logs += run("rmsweb", "compile")
    logs += run("dvc", "init", "-q")
    logs += run("dvc", "repro", "collect_llm", "eval-llm_llm")
    (project / "repro.log").write_text(logs)
    files = [
        p
        for p in project.rglob("*")
        if p.is_file() and p.relative_to(project).parts[0] not in (".git", "rmsweb")
    ]
    parquet = [p for p in files if p.suffix == ".parquet"]
    assert parquet, "the run wrote tables"
    assert (project / "dvc.lock").is_file() and (project / "params.yaml").is_file()
    hits = [p for p in files if key.encode() in p.read_bytes()]
    assert hits == []
    assert key not in logs
    shutil.rmtree(project / ".dvc" / "cache", ignore_errors=True)
