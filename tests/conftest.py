"""Shared test settings: offline, no analytics, repository root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

os.environ.setdefault("DVC_NO_ANALYTICS", "1")
os.environ.setdefault("SKYPILOT_DISABLE_USAGE_COLLECTION", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture
def repo_root() -> Path:
    return ROOT
