"""Paste a report's result tables into README.md, between marker comments.

    python -m rmsweb.report.readme runs/report/miniwob-cpu/report.md README.md
    python -m rmsweb.report.readme runs/report/<study>/report.md README.md paper

The third argument names the marker pair (`<!-- paper:start -->` ... `:end -->`;
default `results`) and which sections are pasted (SECTIONS). The README's numbers
are then the report stage's output, not typed by hand. FIGURES names the report's
plots that go with them: runs/ is DVC's, not git's, so each is copied to
docs/figures/<report>-<plot> beside README and linked from there.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

# Marker name -> the report sections whose tables go between its markers.
SECTIONS = {
    "results": ("Results", "Per-task success"),
    "paper": ("Arms over training seeds (test split)", "Val success per RL checkpoint"),
}
# Marker name -> (report section, plot file under the report's plots/, caption) pasted
# after the tables; a plot goes in when its section is in the report (a study without
# evalckpt stages has no checkpoint curve).
FIGURES = {
    "results": (),
    "paper": (
        (
            "Arms over training seeds",
            "arms.png",
            "Test success per arm: mean over training seeds (dots), "
            "95% CI over seeds (one-run arms: Wilson)",
        ),
        (
            "Val success per RL checkpoint",
            "val_per_checkpoint.png",
            "Val success per RL checkpoint: mean over training seeds (thick), each seed "
            "(thin); step 0 is SFT",
        ),
    ),
}
FIGURE_DIR = Path("docs/figures")


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def extract(report_md: str, sections: tuple[str, ...] = SECTIONS["results"]) -> str:
    """The tables of the named report sections."""
    out = []
    for title in sections:
        # The heading may go on after the title, e.g. "Per-task success (test split)".
        pattern = rf"^## ({re.escape(title)}[^\n]*)\n(.*?)(?=^## |\Z)"
        m = re.search(pattern, report_md, re.S | re.M)
        if not m:
            continue
        tables = _tables(m.group(2))
        if tables:
            # A blank line between tables: Markdown would otherwise run them together.
            out.append(f"**{m.group(1)}**\n\n" + "\n\n".join(tables))
    return "\n\n".join(out)


def _tables(section: str) -> list[str]:
    """Each run of consecutive table lines in `section`, as one string."""
    tables, current = [], []
    for line in [*section.splitlines(), ""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append("\n".join(current))
            current = []
    return tables


def paste(readme: str, tables: str, source: str, name: str = "results") -> str:
    start, end = markers(name)
    if start not in readme or end not in readme:
        raise SystemExit(f"README has no {start} ... {end} markers")
    head, rest = readme.split(start, 1)
    _, tail = rest.split(end, 1)
    body = f"{start}\n_From `{source}` (written by the report stage)._\n\n{tables}\n{end}"
    return head + body + tail


def copy_figures(report: Path, readme: Path, name: str) -> str:
    """Copy the marker's plots next to README; the Markdown image links to them."""
    links = []
    report_md = report.read_text()
    for section, plot, caption in FIGURES[name]:
        if f"\n## {section}" not in f"\n{report_md}":
            continue
        src = report.parent / "plots" / plot
        if not src.is_file():
            raise SystemExit(f"{src} does not exist: rerun the report stage (`dvc repro`).")
        rel = FIGURE_DIR / f"{report.parent.name}-{plot}"
        (readme.parent / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, readme.parent / rel)
        links.append(f"![{caption}]({rel.as_posix()})")
    return "\n\n".join(links)


def main(argv: list[str]) -> None:
    report, readme = Path(argv[0]), Path(argv[1])
    name = argv[2] if len(argv) > 2 else "results"
    if name not in SECTIONS:
        raise SystemExit(f"unknown marker {name!r}; one of {', '.join(SECTIONS)}")
    if not report.is_file():
        raise SystemExit(f"{report} does not exist: run its report stage first (`dvc repro`).")
    tables = extract(report.read_text(), SECTIONS[name])
    figures = copy_figures(report, readme, name)
    if figures:
        tables = f"{tables}\n\n{figures}"
    readme.write_text(paste(readme.read_text(), tables, argv[0], name))


if __name__ == "__main__":
    main(sys.argv[1:])
