"""The template check: no 4 consecutive template words occur in the study's instructions."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmsweb.errors import UserError
from rmsweb.stage_io import StageIO
from rmsweb.train.pretrain import stage as pretrain_stage
from rmsweb.train.pretrain.overlap import check, miniwob_texts, template_ngrams
from rmsweb.train.pretrain.templates import all_templates
from rmsweb.train.pretrain.vocab import fixed_words

# enter-password's instruction, as its page builds it (miniwob/html/miniwob/enter-password.html)
PLANTED = 'Enter the password "{value}" into both text fields and press submit.'


def test_slots_break_the_runs() -> None:
    assert template_ngrams("Put {value} in the {label} box now, please") == set()
    assert template_ngrams("a b {x} c d e f") == {("c", "d", "e", "f")}


def test_our_templates_share_no_4gram_with_miniwob() -> None:
    refs = miniwob_texts()
    assert len(refs) > 100  # every task page
    report = check(all_templates(), refs, fixed_words())
    assert report.count == 0, report.template_hits
    assert report.templates == len(all_templates()) > 60


def test_the_check_catches_a_planted_miniwob_template() -> None:
    report = check([*all_templates(), PLANTED], miniwob_texts())
    assert report.count >= 1
    assert {t for t, _ in report.template_hits} == {PLANTED}
    shared = {g for _, g in report.template_hits}
    assert {"into both text fields", "both text fields and", "text fields and press"} <= shared


def test_suite_instructions_are_a_reference_too() -> None:
    suite = ["Type the code 12 and then press the blue Go button."]
    hits = check(["Now press the blue {name} widget."], suite).template_hits
    assert hits == []  # "now press the blue" is not in it
    hits = check(["{name}: then press the blue one."], suite).template_hits
    assert hits == [("{name}: then press the blue one.", "then press the blue")]


def _io(tmp_path: Path, instructions: str) -> StageIO:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "suite_instructions.txt").write_text(instructions)
    return StageIO("x", None, {"model": tmp_path / "model"}, tmp_path / "out", tmp_path / "m.json")  # type: ignore[arg-type]


def test_the_stage_fails_on_overlap_and_reports_counts(tmp_path: Path, monkeypatch) -> None:
    io = _io(tmp_path, "Whistle twice at the orange lamp.\n")
    metrics = pretrain_stage.template_overlap(io)
    assert metrics["template_overlap_4grams"] == 0
    assert metrics["suite_instructions"] == 1
    assert metrics["templates"] == len(all_templates())
    monkeypatch.setattr(pretrain_stage, "all_templates", lambda: ["Whistle twice at the {x}"])
    with pytest.raises(UserError, match="1 synthetic template 4-grams"):
        pretrain_stage.template_overlap(io)
    monkeypatch.setattr(pretrain_stage, "all_templates", lambda: [*all_templates(), PLANTED])
    with pytest.raises(UserError, match="Enter the password"):
        pretrain_stage.template_overlap(io)
