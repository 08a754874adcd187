"""Paste a report's result tables into README.md, between marker comments.

    python -m rmsweb.report.readme runs/report/miniwob-cpu/report.md README.md

The README's numbers are then the report stage's output, not typed by hand.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

START, END = "<!-- results:start -->", "<!-- results:end -->"
SECTIONS = ("Results", "Per-task success")


def extract(report_md: str) -> str:
    """The tables of the report's Results and Per-task sections."""
    out = []
    for title in SECTIONS:
        m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", report_md, re.S | re.M)
        if not m:
            continue
        tables = _tables(m.group(1))
        if tables:
            # A blank line between tables: Markdown would otherwise run them together.
            out.append(f"**{title}**\n\n" + "\n\n".join(tables))
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


def paste(readme: str, tables: str, source: str) -> str:
    if START not in readme or END not in readme:
        raise SystemExit(f"README has no {START} ... {END} markers")
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    body = f"{START}\n_From `{source}` (written by the report stage)._\n\n{tables}\n{END}"
    return head + body + tail


def main(argv: list[str]) -> None:
    report, readme = Path(argv[0]), Path(argv[1])
    readme.write_text(paste(readme.read_text(), extract(report.read_text()), argv[0]))


if __name__ == "__main__":
    main(sys.argv[1:])
