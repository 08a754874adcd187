"""Suite and task names, seeds, the spec factory and the instruction parsers (no browser)."""

from __future__ import annotations

import pytest

from rmsweb.errors import UserError
from rmsweb.evaluate.experts import check_experts
from rmsweb.rollout.build import build_runner, runner_options
from rmsweb.spec import BrowserSpec, MiniWoBSuite, SeedRange
from rmsweb.suites.commands import list_tasks
from rmsweb.suites.factory import build_suite
from rmsweb.suites.miniwob import MiniWoB, resolve_tasks
from rmsweb.suites.miniwob_experts import EXPERTS
from rmsweb.suites.miniwob_experts.email import parse_forward

PRIORITY = [
    "click-button", "click-link", "click-dialog", "click-tab",
    "focus-text", "enter-text", "enter-password", "login-user",
]  # fmt: skip


def test_unknown_task_lists_close_names() -> None:
    with pytest.raises(UserError) as err:
        resolve_tasks(["click-buton"])
    msg = str(err.value)
    assert "unknown MiniWoB task 'click-buton'" in msg
    assert "click-button" in msg and "rmsweb suite list miniwob" in msg


def test_unknown_suite_lists_close_names() -> None:
    with pytest.raises(UserError, match=r"unknown suite 'minwob'\. Did you mean miniwob"):
        list_tasks("minwob")
    with pytest.raises(UserError, match="Did you mean miniwob"):
        check_experts("mini-wob")


def test_check_experts_rejects_tasks_without_expert() -> None:
    with pytest.raises(UserError, match="no expert for bisect-angle"):
        check_experts("miniwob", tasks=["bisect-angle"])
    with pytest.raises(UserError, match="Closest: enter-text"):
        check_experts("miniwob", tasks=["enter-txt"])
    with pytest.raises(UserError, match="has no scripted experts"):
        check_experts("webvoyager")


def test_list_tasks_marks_experts(capsys: pytest.CaptureFixture[str]) -> None:
    list_tasks(None)
    out = capsys.readouterr().out
    assert "miniwob" in out and "webvoyager" in out and str(len(EXPERTS)) in out
    list_tasks("miniwob")
    lines = capsys.readouterr().out.splitlines()
    marked = [ln for ln in lines if "click-button " in ln or "bisect-angle" in ln]
    assert any("click-button " in ln and "yes" in ln for ln in marked)
    assert any("bisect-angle" in ln and "yes" not in ln for ln in marked)


def test_experts_cover_the_default_experiment() -> None:
    assert set(PRIORITY) <= set(EXPERTS)
    assert len(EXPERTS) >= 20


def test_splits_are_disjoint() -> None:
    suite = MiniWoB(["click-button"], train_seeds=range(0, 5), test_seeds=range(10, 12))
    assert suite.seeds("train") == [0, 1, 2, 3, 4]
    assert suite.seeds("test") == [10, 11]
    with pytest.raises(ValueError, match="overlap"):
        MiniWoB(["click-button"], train_seeds=range(0, 5), test_seeds=range(4, 6))
    with pytest.raises(UserError, match="unknown split"):
        suite.seeds("dev")


def test_factory_turns_spec_into_plain_arguments() -> None:
    spec = MiniWoBSuite(
        tasks=["click-button", "enter-text"],
        train=SeedRange(start=0, count=3),
        test=SeedRange(start=500, count=2),
        max_steps=7,
        browser=BrowserSpec(contexts=3, screenshots=True, viewport_width=800),
    )
    suite = build_suite(spec)
    assert isinstance(suite, MiniWoB)
    assert suite.task_ids() == ["click-button", "enter-text"]
    assert suite.seeds("train") == [0, 1, 2] and suite.seeds("test") == [500, 501]
    assert suite.max_steps == 7
    opts = runner_options(spec.browser)
    assert opts["contexts"] == 3 and opts["screenshots"] is True
    assert opts["viewport"] == (800, 768)
    runner = build_runner(spec, run="eval/x", stage="eval")  # not started: no browser
    assert (runner.contexts, runner.max_steps, runner.run_name) == (3, 7, "eval/x")


@pytest.mark.parametrize(
    ("text", "sender", "dest"),
    [
        ("Send to Bel the email you got from Crissie.", "Crissie", "Bel"),
        ("Send Bel the email you got from Crissie.", "Crissie", "Bel"),
        ("Forward to Jo Ann the email from Dee Dee.", "Dee Dee", "Jo Ann"),
        ("Amargo is waiting for the email by Lissie.", "Lissie", "Amargo"),
        ("Give Mellicent the message you received from Bobby,", "Bobby", "Mellicent"),
    ],
)
def test_forward_instructions(text: str, sender: str, dest: str) -> None:
    assert parse_forward(text) == (sender, dest)
