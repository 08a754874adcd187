"""The synthetic tasks' wording is not the study's: a 4-gram check of the templates.

A template's literal text is split at its slots (`{value}` and the like: the slot
values are the generator's random words, not template text); each run of 4 consecutive
words of a literal part is a template 4-gram. The references are
- the suite's task instructions (the model stage's corpus, `suite_instructions.txt`),
- every MiniWoB++ task page (its whole text, HTML tags dropped: the JavaScript that
  builds the instructions holds their wording as string literals), so a suite that
  changes its tasks later is still covered.
The pretrain stage fails when any template 4-gram occurs in a reference, and reports
how many of the generator's fixed words (vocab.py) occur in them (the rest of its
words are drawn at random).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

N = 4
_SLOT = re.compile(r"\{[a-z_]+\}")
_TAG = re.compile(r"<[^>]*>")
_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def ngrams(seq: list[str], n: int = N) -> set[tuple[str, ...]]:
    return {tuple(seq[i : i + n]) for i in range(len(seq) - n + 1)}


def template_ngrams(template: str, n: int = N) -> set[tuple[str, ...]]:
    """The n-grams of a template's literal text; slots break the runs."""
    out: set[tuple[str, ...]] = set()
    for part in _SLOT.split(template):
        out |= ngrams(words(part), n)
    return out


def reference_ngrams(texts: Iterable[str], n: int = N) -> set[tuple[str, ...]]:
    out: set[tuple[str, ...]] = set()
    for text in texts:
        out |= ngrams(words(_TAG.sub(" ", text)), n)
    return out


def miniwob_texts() -> list[str]:
    """The text of every MiniWoB++ task page and shared script (tags are dropped later)."""
    from rmsweb.suites.miniwob_html import html_root

    root = html_root()
    files = sorted(root.glob("miniwob/*.html")) + sorted(root.glob("common/**/*.js"))
    return [p.read_text(encoding="utf-8", errors="replace") for p in files]


def read_instructions(path: Path) -> list[str]:
    """The model stage's `suite_instructions.txt` (one instruction a line); [] if absent."""
    if not path.is_file():
        return []
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@dataclass(frozen=True)
class OverlapReport:
    template_hits: list[tuple[str, str]]  # (template, the 4-gram it shares)
    word_hits: list[str]  # fixed vocabulary words that occur in the references
    templates: int
    reference_ngrams: int

    @property
    def count(self) -> int:
        return len(self.template_hits)


def check(
    templates: Iterable[str], references: Iterable[str], fixed_words: Iterable[str] = ()
) -> OverlapReport:
    """Which template 4-grams (and fixed words) occur in the reference texts."""
    refs = list(references)
    ref = reference_ngrams(refs)
    ref_words = {w for text in refs for w in words(_TAG.sub(" ", text))}
    hits: list[tuple[str, str]] = []
    templates = list(templates)
    for t in templates:
        for gram in sorted(template_ngrams(t) & ref):
            hits.append((t, " ".join(gram)))
    word_hits = sorted({w for fw in fixed_words for w in words(fw)} & ref_words)
    return OverlapReport(hits, word_hits, len(templates), len(ref))
