"""Finding a browser, and keeping Playwright out of light imports."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rmsweb.env import launch
from rmsweb.errors import UserError


def test_no_browser_is_a_user_error_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RMSWEB_CHROMIUM", raising=False)
    monkeypatch.setattr(launch, "SYSTEM_CHROMIUM", ("/nonexistent/chromium",))
    with pytest.raises(UserError) as err:
        launch.find_chromium(playwright_path="/nonexistent/chrome")
    assert "apt-get install -y chromium" in str(err.value)
    assert "playwright install chromium" in str(err.value)


def test_browser_choice_order(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    own = tmp_path / "chrome"
    own.write_text("#!/bin/sh\n")
    own.chmod(0o755)
    monkeypatch.delenv("RMSWEB_CHROMIUM", raising=False)
    monkeypatch.setattr(launch, "SYSTEM_CHROMIUM", (sys.executable,))
    assert launch.find_chromium(str(own)) == str(own)  # Playwright's own build first
    assert launch.find_chromium(str(tmp_path / "missing")) == sys.executable
    monkeypatch.setenv("RMSWEB_CHROMIUM", str(own))
    assert launch.find_chromium(None) == str(own)
    monkeypatch.setenv("RMSWEB_CHROMIUM", str(tmp_path / "missing"))
    with pytest.raises(UserError, match="not an executable"):
        launch.find_chromium(None)


def test_light_modules_do_not_import_playwright() -> None:
    code = (
        "import sys, rmsweb.rollout.runner, rmsweb.rollout.build, rmsweb.suites.commands, rmsweb.evaluate.experts, rmsweb.suites.miniwob, "
        "rmsweb.agents.expert, rmsweb.agents.random_policy, rmsweb.env.actions; "
        "print('playwright' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
