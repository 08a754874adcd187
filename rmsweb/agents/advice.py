"""Reading a reflection the way a teacher would: which step it blames, and which action.

A reflection is plain language ("Step 3: clicked [12] button "Cancel"; the goal asks
for "Submit"."). `parse_advice` turns it into `Advice` items: the steps a note names
(none: any step), and the action it calls wrong (type, element id, element text,
typed value). Nothing here knows what the right action was: a note that names the
wrong step or the wrong action parses just as well, and then simply does not help.

The simulated teacher (rmsweb.agents.mistaken_expert) avoids what it parses; the
oracle grader (rmsweb.judge.grade) reads the named steps to score the reflector.
Both read the same parse, so the critic is graded on exactly what the teacher heard.

Grammar (the rule critic writes it; LLM reflections are read with the same rules):
- a note starts at "Step N" or "Steps N-M" (1-based; any case) and runs to the
  next one; text outside notes is split into sentences, each a note for any step;
- the wrong action is the note's first clause: everything before ";" or a word
  that starts the explanation ("instead", "before", "but", ...), outside quotes;
- in that clause: an explicit call (`click(12)`) wins; else a verb ("clicked",
  "filled", "scrolled", "stopped", ...), the first `[id]`, the first quoted text
  (the element's name) and, after " with " / " to ", the typed value or option.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from rmsweb.env.actions import Action, ParseError, normalize_text, parse_action
from rmsweb.env.types import Observation


@dataclass(frozen=True)
class Advice:
    """One note of a reflection: "at these steps, do not do this"."""

    steps: tuple[int, ...]  # 0-based steps the note names; () = any step
    type: str | None  # the action type called wrong; None: no action could be read
    target: str | None = None  # element id
    name: str | None = None  # element text
    text: str | None = None  # typed value, option, key, answer or scroll direction

    def applies(self, step: int) -> bool:
        return not self.steps or step in self.steps

    def forbids(self, action: Action, observation: Observation) -> bool:
        """Does this note call `action` (in a page like `observation`) wrong?

        The element is identified by its id or by its text (either suffices: ids
        are stable on the same task and seed, texts survive a changed page). A
        note too vague to name an element forbids nothing.
        """
        if self.type is None or action.type != self.type:
            return False
        if action.type in ("stop", "go_back"):
            return True
        if action.type in ("scroll", "press", "answer", "goto"):
            return self.text is None or _same(action.text, self.text)
        if action.type == "click_xy":
            return False  # coordinates are not named in reflections
        same_id = self.target is not None and action.target == self.target
        element = observation.elements.get(action.target or "")
        same_name = self.name is not None and element is not None and element.name == self.name
        if not (same_id or same_name):
            return False
        return self.text is None or _same(action.text, self.text)


def _same(a: str | None, b: str | None) -> bool:
    return normalize_text(a or "", casefold=True) == normalize_text(b or "", casefold=True)


_STEP = re.compile(r"\bsteps?\s+(\d+)(?:\s*(?:-|–|to|and)\s*(\d+))?\s*[:,.]?", re.IGNORECASE)
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"|“([^”]*)”')
# Words that end the "what was done" clause and start the explanation.
_CUT = re.compile(
    r";|\b(?:instead|rather than|but|before|after|although|because|while|which|when|"
    r"so that|since|the goal|the right|should)\b",
    re.IGNORECASE,
)
_VERBS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern, re.IGNORECASE))
    for kind, pattern in (
        ("go_back", r"\b(?:went|go|going|goes) back\b"),
        ("goto", r"\b(?:went|navigated) to\b"),
        ("fill", r"\b(?:fill(?:ed|s|ing)?|typed|typing|entered|entering)\b"),
        ("select", r"\b(?:select(?:ed|s|ing)?|set|chose)\b"),
        ("scroll", r"\bscroll(?:ed|s|ing)?\b"),
        ("press", r"\bpress(?:ed|es|ing)?\b"),
        ("stop", r"\b(?:stop(?:ped|s|ping)?|gave up|ended the episode)\b"),
        ("answer", r"\banswer(?:ed|s|ing)?\b"),
        ("click", r"\bclick(?:ed|s|ing)?\b"),
    )
)
_ID = re.compile(r"\[(\d+)\]|\b(?:element|id)\s*#?(\d+)\b", re.IGNORECASE)
_DIRECTION = re.compile(r"\b(up|down|left|right)\b", re.IGNORECASE)
_VALUE_MARK = re.compile(r"\s(?:with|to|as)\s", re.IGNORECASE)
# An unquoted element name right after the verb ("clicked Cancel", "clicked on the OK
# button"): what LLM reflections often write.
_BARE_NAME = re.compile(
    r"^\w+(?:\s+(?:on|into|in))?(?:\s+(?:the|a|an))?\s+([A-Za-z0-9][\w#-]*)", re.IGNORECASE
)
_ROLE_WORDS = {"button", "link", "tab", "textbox", "field", "box", "element", "text", "checkbox"}


def _mask_quotes(s: str) -> str:
    """`s` with quoted spans blanked out, so cut words inside names do not count."""
    return _QUOTED.sub(lambda m: " " * len(m.group(0)), s)


def _clause(note: str) -> str:
    m = _CUT.search(_mask_quotes(note))
    return note[: m.start()] if m else note


def _quotes(s: str) -> list[tuple[int, str]]:
    out = []
    for m in _QUOTED.finditer(s):
        raw = m.group(1) if m.group(1) is not None else m.group(2)
        out.append((m.start(), raw.replace('\\"', '"').replace("\\\\", "\\")))
    return out


def _read_action(clause: str) -> tuple[str | None, str | None, str | None, str | None]:
    """(type, target, name, text) of the action a clause calls wrong."""
    parsed = parse_action(clause)
    if not isinstance(parsed, ParseError):
        return parsed.type, parsed.target, None, parsed.text
    masked = _mask_quotes(clause)
    hits = [(m.start(), kind) for kind, rx in _VERBS if (m := rx.search(masked))]
    if not hits:
        return None, None, None, None
    start, kind = min(hits)
    rest = clause[start:]
    masked_rest = masked[start:]
    target = None
    if m := _ID.search(masked_rest):
        target = m.group(1) or m.group(2)
    quotes = _quotes(rest)
    name = text = None
    if kind == "scroll":
        d = _DIRECTION.search(masked_rest)
        return kind, None, None, d.group(1).lower() if d else None
    if kind in ("press", "answer", "goto"):
        return kind, None, None, quotes[0][1] if quotes else None
    if kind in ("stop", "go_back"):
        return kind, None, None, None
    mark = _VALUE_MARK.search(masked_rest)
    for pos, q in quotes:
        if kind in ("fill", "select") and mark and pos > mark.start():
            text = text if text is not None else q
        elif name is None:
            name = q
    if target is None and name is None and (m := _BARE_NAME.match(masked_rest)):
        word = m.group(1)
        name = word if word.lower() not in _ROLE_WORDS else None
    return kind, target, name, text


def _note(steps: tuple[int, ...], body: str) -> Advice | None:
    kind, target, name, text = _read_action(_clause(body))
    if not steps and kind is None:
        return None  # a sentence that names neither a step nor an action: not advice
    return Advice(steps, kind, target, name, text)


def _sentences(text: str) -> list[str]:
    masked = _mask_quotes(text)
    cuts = [m.end() for m in re.finditer(r"[.!?](?:\s+|$)", masked)]
    out, prev = [], 0
    for c in cuts:
        out.append(text[prev:c].strip())
        prev = c
    out.append(text[prev:].strip())
    return [s for s in out if s]


@functools.lru_cache(maxsize=4096)
def parse_advice(reflection: str) -> tuple[Advice, ...]:
    """Every note of a reflection, in order of appearance."""
    out: list[Advice] = []

    def loose(text: str) -> None:
        out.extend(note for s in _sentences(text) if (note := _note((), s)))

    marks = list(_STEP.finditer(_mask_quotes(reflection)))
    loose(reflection[: marks[0].start()] if marks else reflection)
    for i, m in enumerate(marks):
        first = int(m.group(1)) - 1
        last = int(m.group(2)) - 1 if m.group(2) else first
        steps = tuple(range(first, max(first, last) + 1)) if first >= 0 else ()
        end = marks[i + 1].start() if i + 1 < len(marks) else len(reflection)
        # A note is the sentence after its step mark; further sentences are loose advice.
        sentences = _sentences(reflection[m.end() : end])
        if note := _note(steps, sentences[0] if sentences else ""):
            out.append(note)
        loose(" ".join(sentences[1:]))
    return tuple(out)


def named_steps(reflection: str) -> list[int]:
    """The 0-based steps a reflection names, in order of mention, without repeats."""
    seen: dict[int, None] = {}
    for advice in parse_advice(reflection):
        for s in advice.steps:
            seen.setdefault(s, None)
    return list(seen)
