"""Secrets by value shape: token prefixes, URLs with credentials, random strings.

True positives are built from random characters (seeded), so no real token is in the
repository; false positives are checked on every string of the committed YAML files
and on values a spec plausibly holds (hub ids, SHAs, hashes, URLs, bucket names).
"""

from __future__ import annotations

import random
import string
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from rmsweb.cli import app
from rmsweb.spec import SpecErrors
from rmsweb.spec.loader import parse_yaml_located, validate_located
from rmsweb.spec.secret_scan import find_secrets, scan_text

rng = random.Random(20261201)
ALNUM = string.ascii_letters + string.digits


def rnd(n: int, alphabet: str = ALNUM) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


TOKENS = {
    "openai": "sk-" + rnd(48),
    "openai project": "sk-proj-" + rnd(100, ALNUM + "_-"),
    "anthropic": "sk-ant-api03-" + rnd(93, ALNUM + "_-"),
    "hugging face": "hf_" + rnd(34),
    "github": "ghp_" + rnd(36),
    "github fine-grained": "github_pat_" + rnd(82, ALNUM + "_"),
    "gitlab": "glpat-" + rnd(20),
    "aws": "AKIA" + rnd(16, string.ascii_uppercase + "234567"),
    "slack": "xoxb-" + rnd(12, string.digits) + "-" + rnd(24),
    "google": "AIza" + rnd(35),
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0." + rnd(43, ALNUM + "_-"),
    "private key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEow...",
    "url password": "https://alice:" + rnd(12) + "@llm.example.com/v1",
    "postgres url": "postgresql://admin:" + rnd(10) + "@db:5432/runs",
    "url query": "https://b.s3.amazonaws.com/o?X-Amz-Signature=" + rnd(64, "0123456789abcdef"),
    "url token": "https://llm.example.com/v1?api_key=" + rnd(30),
    "random 32": rnd(32),
    "base64": "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg==",
    "in a sentence": "use Bearer " + rnd(40) + " for the judge",
}

# Values a spec holds that must pass.
INNOCENT = [
    "Qwen/Qwen3-VL-8B-Instruct",
    "Qwen/Qwen3-VL-32B-Instruct",
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
    "meta-llama/Meta-Llama-3.1-8B-Instruct",
    "HuggingFaceTB/SmolLM2-135M-Instruct",
    "nvidia/Llama-3_3-Nemotron-Super-49B-v1",
    "ByteDance-Seed/UI-TARS-1.5-7B",
    "unsloth/Qwen2.5-VL-7B-Instruct-bnb-4bit",
    "0123456789abcdef0123456789abcdef01234567",  # a git SHA (revision: pins)
    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",  # sha256
    "sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945",
    "123e4567-e89b-12d3-a456-426614174000",
    "ami-0a1b2c3d4e5f67890",
    "docker:nvcr.io/nvidia/pytorch:24.05-py3",
    "projects/deeplearning-platform-release/global/images/common-cu121-v20240128-ubuntu-2204",
    "s3://rmsweb-dvc-cache/paper-8b",
    "https://api.openai.com/v1",
    "http://127.0.0.1:8000/v1",
    "git@github.com:org/repo.git",
    "checkpointBucketForExperiment2024",
    "sk-learn-compatible-model-name",
    "hf_transfer_enabled_for_this_run",
    "OPENAI_API_KEY",
    "RMSWebExperimentSeedSweep2026Dec01",
]


@pytest.mark.parametrize("name", sorted(TOKENS))
def test_tokens_are_found_and_masked(name: str) -> None:
    token = TOKENS[name]
    hits = scan_text(token)
    assert hits, name
    what, masked = hits[0]
    secret_part = token.split("@")[0][-8:] if "@" in token else token[-8:]
    assert secret_part not in masked and secret_part not in what


@pytest.mark.parametrize("value", INNOCENT)
def test_plausible_spec_values_pass(value: str) -> None:
    assert scan_text(value) == []


def strings(data: Any) -> list[str]:
    if isinstance(data, dict):
        return [s for k, v in data.items() for s in [str(k), *strings(v)]]
    if isinstance(data, list):
        return [s for item in data for s in strings(item)]
    return [data] if isinstance(data, str) else []


def test_no_string_in_the_committed_yaml_files_is_flagged(repo_root: Path) -> None:
    files = [repo_root / n for n in ("params.yaml", "dvc.yaml", "dvc.lock")]
    files += sorted((repo_root / "sky").glob("*.yaml"))
    files += sorted((repo_root / "experiments").rglob("*.yaml"))
    values = [s for f in files if f.is_file() for s in strings(yaml.safe_load(f.read_text()))]
    assert len(values) > 500  # the md5s of dvc.lock, stage commands, paths, ids
    assert [v for v in values if scan_text(v)] == []


def test_findings_carry_the_key_path() -> None:
    data = {
        "name": "x",
        "compute": {"envs": {"HF_HUB_AUTH": TOKENS["hugging face"], "HF_TOKEN": "hf_abc"}},
        "collect": {"teacher": {"base_url": TOKENS["url password"]}},
        "eval": {"policies": [{"name": TOKENS["random 32"]}]},
    }
    paths = {f.path for f in find_secrets(data)}
    # HF_TOKEN is left to the key-name rule (ComputeSpec), not reported twice.
    assert paths == {
        ("compute", "envs", "HF_HUB_AUTH"),
        ("collect", "teacher", "base_url"),
        ("eval", "policies", 0, "name"),
    }


def test_validate_and_compile_refuse_a_secret_without_printing_it(
    tmp_path: Path, repo_root: Path
) -> None:
    token = TOKENS["openai"]
    spec = tmp_path / "experiments" / "leak.yaml"
    spec.parent.mkdir()
    spec.write_text(f"name: leak\ncompute:\n  envs: {{OPENAI_CONF: {token}}}\n")
    runner = CliRunner()
    validate = runner.invoke(app, ["validate", str(spec)])
    assert validate.exit_code == 2
    assert "leak.yaml:3:" in validate.stderr and "--secret NAME" in validate.stderr
    compile_ = runner.invoke(app, ["compile", "--root", str(tmp_path)])
    assert compile_.exit_code == 2
    assert not (tmp_path / "params.yaml").exists() and not (tmp_path / "sky").exists()
    for out in (validate.output, compile_.output):
        assert token[3:] not in out


def test_secret_and_schema_errors_come_together() -> None:
    located = parse_yaml_located(
        f"name: x\nseed: -1\ndescription: token {TOKENS['github']}\n", "two.yaml"
    )
    with pytest.raises(SpecErrors) as exc:
        validate_located(located)
    assert {e.key for e in exc.value.errors} == {"seed", "description"}
