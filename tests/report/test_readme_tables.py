"""README's result tables are pasted from a report, between markers."""

from __future__ import annotations

import pytest

from rmsweb.report.readme import extract, markers, paste

START, END = markers("results")

REPORT = """# x

## Results

| Policy | n |
| --- | ---: |
| sft | 400 |

Some text.

| Policy | Steps / expert's steps |
| --- | ---: |
| sft | 1.000 |

## Per-task success

| Task | sft |
| --- | ---: |
| click-button | 50.0% (50) |

## Collection

| a | b |
"""


def test_extract_and_paste() -> None:
    tables = extract(REPORT)
    assert "| sft | 400 |" in tables and "| click-button | 50.0% (50) |" in tables
    assert "| a | b |" not in tables and "Some text" not in tables
    # Two tables of one section stay two tables (a blank line between them).
    assert "| sft | 400 |\n\n| Policy | Steps / expert's steps |" in tables
    readme = f"intro\n{START}\nold\n{END}\noutro\n"
    new = paste(readme, tables, "runs/report/x/report.md")
    assert new.startswith("intro\n") and new.endswith("\noutro\n")
    assert "old" not in new and "| sft | 400 |" in new
    assert paste(new, tables, "runs/report/x/report.md") == new  # idempotent


def test_missing_markers_is_an_error() -> None:
    with pytest.raises(SystemExit):
        paste("no markers", "t", "s")


def test_paper_marker_pastes_the_arms_section() -> None:
    report = (
        "# study\n\n## Results\n\n| a |\n| --- |\n| 1 |\n\n"
        "## Arms over training seeds (test split)\n\n| Arm | Success |\n| --- | ---: |\n"
        "| SFT | 80.0% |\n\nnote\n\n| A − B | diff |\n| --- | ---: |\n| x − y | +7.0 |\n"
    )
    start, end = markers("paper")
    new = paste(
        f"x\n{start}\n{end}\n",
        extract(report, ("Arms over training seeds (test split)",)),
        "r",
        "paper",
    )
    assert "| SFT | 80.0% |" in new and "| x − y | +7.0 |" in new and "| a |" not in new


def test_paper_figure_is_copied_beside_readme_and_linked(tmp_path) -> None:
    from rmsweb.report.readme import main

    report_dir = tmp_path / "runs" / "report" / "study"
    (report_dir / "plots").mkdir(parents=True)
    (report_dir / "plots" / "arms.png").write_bytes(b"\x89PNG fake")
    (report_dir / "report.md").write_text(
        "# s\n\n## Arms over training seeds (test split)\n\n| Arm |\n| --- |\n| SFT |\n"
    )
    start, end = markers("paper")
    readme = tmp_path / "README.md"
    readme.write_text(f"x\n{start}\n{end}\n")
    main([str(report_dir / "report.md"), str(readme), "paper"])
    text = readme.read_text()
    assert "](docs/figures/study-arms.png)" in text and "| SFT |" in text
    assert (tmp_path / "docs" / "figures" / "study-arms.png").read_bytes() == b"\x89PNG fake"
    # A report without its plot is a clear error, and README is left as it was.
    (report_dir / "plots" / "arms.png").unlink()
    with pytest.raises(SystemExit, match=r"arms\.png does not exist"):
        main([str(report_dir / "report.md"), str(readme), "paper"])
    assert readme.read_text() == text


def test_paper_checkpoint_curve_goes_in_only_where_the_report_has_it(tmp_path) -> None:
    from rmsweb.report.readme import main

    report_dir = tmp_path / "runs" / "report" / "study"
    (report_dir / "plots").mkdir(parents=True)
    (report_dir / "plots" / "arms.png").write_bytes(b"\x89PNG arms")
    (report_dir / "plots" / "val_per_checkpoint.png").write_bytes(b"\x89PNG curve")
    arms = "## Arms over training seeds (test split)\n\n| Arm |\n| --- |\n| SFT |\n"
    curve = "## Val success per RL checkpoint (val split)\n\n| RL step |\n| --- |\n| 0 (SFT) |\n"
    start, end = markers("paper")
    readme = tmp_path / "README.md"
    # Without the section (a study with no evalckpt stages): no curve, no link.
    (report_dir / "report.md").write_text(f"# s\n\n{arms}")
    readme.write_text(f"x\n{start}\n{end}\n")
    main([str(report_dir / "report.md"), str(readme), "paper"])
    assert "val_per_checkpoint" not in readme.read_text()
    # With it: its table and its figure, copied beside README.
    (report_dir / "report.md").write_text(f"# s\n\n{arms}\n{curve}")
    main([str(report_dir / "report.md"), str(readme), "paper"])
    text = readme.read_text()
    assert "| 0 (SFT) |" in text and "](docs/figures/study-val_per_checkpoint.png)" in text
    copied = tmp_path / "docs" / "figures" / "study-val_per_checkpoint.png"
    assert copied.read_bytes() == b"\x89PNG curve"
