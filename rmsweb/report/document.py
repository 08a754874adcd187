"""A report as plain blocks (paragraphs, tables, figures, links), rendered to markdown and HTML.

One structure, two renderers, so report.md and report.html never disagree.
Tables render as GitHub pipe tables that can be pasted into a README as is.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from typing import Literal

Align = Literal["left", "right"]


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    align: list[Align] | None = None  # default: left
    # (row, column) -> relative href of that cell, in HTML only: report.md's tables are
    # pasted into the README, where the report's relative links would not resolve.
    links: dict[tuple[int, int], str] = field(default_factory=dict)

    def _align(self) -> list[Align]:
        return self.align or ["left"] * len(self.headers)

    def to_markdown(self) -> str:
        def cell(text: str) -> str:
            return text.replace("|", "\\|").replace("\n", " ")

        rule = ["---:" if a == "right" else "---" for a in self._align()]
        lines = [
            "| " + " | ".join(cell(h) for h in self.headers) + " |",
            "| " + " | ".join(rule) + " |",
        ]
        lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in self.rows]
        return "\n".join(lines)

    def to_html(self) -> str:
        aligns = self._align()
        head = "".join(f"<th>{html.escape(h)}</th>" for h in self.headers)

        def cell(i: int, j: int, text: str, align: str) -> str:
            href = self.links.get((i, j))
            inner = html.escape(text)
            if href:
                inner = f'<a href="{html.escape(href)}">{inner}</a>'
            return f'<td class="{align}">{inner}</td>'

        body = "".join(
            "<tr>"
            + "".join(cell(i, j, c, a) for j, (c, a) in enumerate(zip(row, aligns, strict=True)))
            + "</tr>"
            for i, row in enumerate(self.rows)
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


@dataclass
class Para:
    text: str
    note: bool = False  # an aside, e.g. why a section is empty: italic


@dataclass
class Figure:
    name: str  # file stem under plots/
    png: bytes
    caption: str


@dataclass
class Links:
    items: list[tuple[str, str]]  # (text, relative href)


Block = Table | Para | Figure | Links


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Document:
    title: str
    subtitle: str
    sections: list[Section]

    def figures(self) -> list[Figure]:
        return [b for s in self.sections for b in s.blocks if isinstance(b, Figure)]


def to_markdown(doc: Document, plots_dir: str = "plots") -> str:
    out = [f"# {doc.title}", "", doc.subtitle, ""]
    for section in doc.sections:
        out += [f"## {section.title}", ""]
        for block in section.blocks:
            if isinstance(block, Table):
                out.append(block.to_markdown())
            elif isinstance(block, Para):
                out.append(f"_{block.text}_" if block.note else block.text)
            elif isinstance(block, Figure):
                out.append(f"![{block.caption}]({plots_dir}/{block.name}.png)")
            elif isinstance(block, Links):
                out += [f"- [{text}]({href})" for text, href in block.items]
            out.append("")
    return "\n".join(out)


CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto;
       max-width: 1100px; padding: 1rem 2rem 4rem; color: #1d1f23; }
h1 { margin-bottom: 0.2rem; } .subtitle { color: #5a6070; margin-top: 0; }
h2 { border-bottom: 1px solid #d9dce3; padding-bottom: 0.2rem; margin-top: 2.2rem; }
table { border-collapse: collapse; margin: 0.8rem 0; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d9dce3; padding: 0.25rem 0.6rem; }
th { background: #f2f4f8; text-align: left; } td.right { text-align: right; }
tbody tr:nth-child(even) { background: #fafbfc; }
figure { margin: 1rem 0; } figure img { max-width: 100%; border: 1px solid #e6e8ee; }
figcaption { color: #5a6070; font-size: 0.9em; }
p.note { color: #5a6070; font-style: italic; }
"""


def to_html(doc: Document) -> str:
    """A self-contained page: styles inline, figures as base64 PNG data URLs."""
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(doc.title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(doc.title)}</h1>",
        f'<p class="subtitle">{html.escape(doc.subtitle)}</p>',
    ]
    for section in doc.sections:
        parts.append(f"<section><h2>{html.escape(section.title)}</h2>")
        for block in section.blocks:
            if isinstance(block, Table):
                parts.append(block.to_html())
            elif isinstance(block, Para):
                cls = ' class="note"' if block.note else ""
                parts.append(f"<p{cls}>{html.escape(block.text)}</p>")
            elif isinstance(block, Figure):
                data = base64.b64encode(block.png).decode("ascii")
                alt = html.escape(block.caption)
                parts.append(
                    f'<figure><img alt="{alt}" src="data:image/png;base64,{data}">'
                    f"<figcaption>{alt}</figcaption></figure>"
                )
            elif isinstance(block, Links):
                items = "".join(
                    f'<li><a href="{html.escape(href)}">{html.escape(text)}</a></li>'
                    for text, href in block.items
                )
                parts.append(f"<ul>{items}</ul>")
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts)
