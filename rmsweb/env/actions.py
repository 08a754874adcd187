"""The action language of DESIGN.md §5: typed values, a tolerant parser, a formatter, comparison.

    click(12)   fill(12, "text")   select(12, "option")   press("Enter")
    scroll("down")   goto("url")   go_back()   answer("text")   stop()   click_xy(40, 96.5)

Pure Python, no browser: the runner, the rewards (Salvage-DS) and failure mining all
use this module. `parse_action(format_action(a)) == a` for every action (a property test
holds us to it). The parser never raises: a bad output gives a ParseError with a reason,
which the runner shows to the policy and the reward scores as -1.
"""

from __future__ import annotations

import bisect
import difflib
import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# The action values and their canonical text live in types.py (the lowest layer that
# uses them); they are re-exported here, where the rest of the action language is.
from rmsweb.env.types import Action, ActionRow, ActionType, Element, format_action

__all__ = [
    "ELEMENT_ACTIONS",
    "SCROLL_DIRECTIONS",
    "SIGNATURES",
    "TERMINAL_ACTIONS",
    "Action",
    "ActionInputError",
    "ActionRow",
    "ActionType",
    "Match",
    "ParseError",
    "answer",
    "click",
    "click_xy",
    "compare",
    "element_at",
    "fill",
    "format_action",
    "go_back",
    "goto",
    "matches_any",
    "normalize_text",
    "parse_action",
    "press",
    "scroll",
    "select",
    "split_thought",
    "stop",
    "text_similarity",
]

SCROLL_DIRECTIONS = ("up", "down", "left", "right")


# Argument kinds per action: "id" (element id), "str" (quoted text), "num" (coordinate).
SIGNATURES: dict[str, tuple[str, ...]] = {
    "click": ("id",),
    "fill": ("id", "str"),
    "select": ("id", "str"),
    "press": ("str",),
    "scroll": ("str",),
    "goto": ("str",),
    "go_back": (),
    "answer": ("str",),
    "stop": (),
    "click_xy": ("num", "num"),
}
ELEMENT_ACTIONS = ("click", "fill", "select")
TERMINAL_ACTIONS = ("answer", "stop")


def click(target: str | int) -> Action:
    return Action("click", target=str(target))


def fill(target: str | int, text: str) -> Action:
    return Action("fill", target=str(target), text=text)


def select(target: str | int, option: str) -> Action:
    return Action("select", target=str(target), text=option)


def press(key: str) -> Action:
    return Action("press", text=key)


def scroll(direction: str) -> Action:
    return Action("scroll", text=direction)


def goto(url: str) -> Action:
    return Action("goto", text=url)


def go_back() -> Action:
    return Action("go_back")


def answer(text: str) -> Action:
    return Action("answer", text=text)


def stop() -> Action:
    return Action("stop")


def click_xy(x: float, y: float) -> Action:
    return Action("click_xy", x=float(x), y=float(y))


# --------------------------------------------------------------------------- parse


@dataclass(frozen=True, slots=True)
class ParseError:
    reason: str

    def __str__(self) -> str:
        return self.reason


_NAMES = "|".join(sorted(SIGNATURES, key=len, reverse=True))
# re.ASCII: with Unicode case folding "ſcroll" and "clİck" matched too, and their
# lower() is no action name.
_CALL = re.compile(rf"(?<![\w.])({_NAMES})\s*\(", re.IGNORECASE | re.ASCII)
_ANY_CALL = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\s*\(")
_ACTION_MARK = re.compile(r"\baction\s*:", re.IGNORECASE)
_KEYWORD = re.compile(r"[A-Za-z_]\w*\s*=(?!=)\s*")
_NUMBER = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
# Element ids are ASCII digits ("²" and "١" pass str.isdigit(); int() refuses the first),
# short enough to be an id (int() also refuses > 4,300 digits).
_ELEMENT_ID = re.compile(r"[0-9]{1,18}")
_SURROGATE = re.compile("[\ud800-\udfff]")
# Quotes a model may use; each opener maps to its closer.
_QUOTES = {'"': '"', "'": "'", "“": "”", "‘": "’", "`": "`"}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/", "\\": "\\"}


def split_thought(text: str) -> tuple[str | None, str]:
    """Split "Thought: ...\\nAction: ..." into (thought, rest); thought None when absent."""
    m = _ACTION_MARK.search(text)
    head = text[: m.start()] if m else ""
    thought = re.sub(r"^\s*thought\s*:\s*", "", head.strip(), flags=re.IGNORECASE) if m else None
    return (thought or None), (text[m.end() :] if m else text)


class ActionInputError(TypeError):
    """parse_action was given something other than text (a policy bug, not a model error)."""


def parse_action(text: str) -> Action | ParseError:
    """Parse a model output into an Action, tolerating the usual noise.

    Accepts an optional "Thought: ..." part and an "Action:" prefix (the text after the
    last "Action:" is used, not counting one inside a call's quoted value), code fences
    and backticks, any whitespace, single, double or typographic quotes, backslash
    escapes, `name=` keywords, `[12]` or `"12"` as element ids, any letter case in the
    action name, and trailing prose after the call.

    More than one action is a ParseError, not the first or the last one: an output that
    offers two or more actions, as alternatives or as a sequence. That is a second
    "Action: ..." line, a second call on a line of its own, or one joined on by
    connectors only: punctuation (`;` `,` `|` `/` `->` `&&` ...) and words such as "or",
    "else", "otherwise", "alternatively", "maybe", "and", "then", "next", "followed by",
    "if that fails" (`click(1) or click(2)`, `click(1) | click(2)`, `click(1)/click(2)`,
    `click(1) else click(2)`; see _JOINERS). A call mentioned inside a sentence is prose,
    and one the text rejects ("click(3) instead of click(5)", "rather than", "not",
    "unlike") is not offered: `Action: instead of click(5), click(3)` is click(3) (an
    output that offers none is read as its first call). Why: a step runs one action and
    then observes the page, so running one of two would silently drop the other while
    the history shows the model it asked for both; and for the +-1 reward of Salvage-DS
    an output listing a right and a wrong action is a hedge that must not score as the
    right one.

    Never raises for a `str` (any content, any length: time is linear in it); raises
    ActionInputError for anything else.
    """
    if not isinstance(text, str):
        raise ActionInputError(
            f"parse_action expects the model's output text (str), got {type(text).__name__}"
        )
    if _SURROGATE.search(text):
        # Not valid Unicode: such text cannot be stored (Parquet is UTF-8) or shown.
        return ParseError("output is not valid Unicode text (it holds a lone surrogate)")
    marks = _action_marks(text)
    body = text[marks[-1].end() :] if marks else text
    m = _first_call(body)
    if m is None:
        other = _ANY_CALL.search(body)
        if other:
            name = other.group(1)
            close = difflib.get_close_matches(name.lower(), SIGNATURES, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            return ParseError(f"unknown action {name[:40]!r}{hint}")
        return ParseError('no action found; expected e.g. click(3) or fill(3, "text")')
    return _pick(body, m, text, marks[:-1])


# ----------------------------------------------------------------- one action or several
#
# After the first call, every later call is read by the clause before it (the text since
# the previous call, from its last , ; : . ! ? or line break): a clause that ends in a
# rejection names an action the text turns down; a clause of connectors only joins the
# call on (another action offered, an alternative or a next step); a clause with a word
# that offers ("or", "else", "then", ...) and none that rejects does too; any other
# clause is prose that mentions the call. A call listed after another by "or"/"and"
# within a sentence shares its standing ("instead of click(5) or click(6)" rejects
# both).

# Connector words and phrases (longest first: the alternation is atomic, so a shorter
# phrase never steals a longer one's start; the loop is possessive, so no backtracking).
_JOINERS = (
    r"(?:if|when|in\s+case|should)\s+(?:(?:that|this|it|so|the\s+\w+)\s+)?"
    r"(?:fails?|failed|(?:does|did|do|will|would)(?:\s+not|n'?t)\s+work|won'?t\s+work"
    r"|is\s+wrong|does\s+nothing|has\s+no\s+effect|(?:is|was)(?:\s+not|n'?t)\s+(?:it|right|there)"
    r"|nothing\s+happens)",
    r"if\s+(?:not|needed|necessary|required|possible|so)",
    r"failing\s+(?:that|this|it)",
    r"in\s+that\s+case",
    r"or\s+else",
    r"and\s*/\s*or",
    r"after\s+(?:that|this|it|which)",
    r"followed\s+by",
    r"as\s+a\s+(?:fallback|backup|last\s+resort|second\s+step|next\s+step)",
    r"go\s+ahead\s+and",
    r"(?:one|the\s+other|another)\s+(?:option|choice|way)(?:\s+is)?",
    r"otherwise|alternatively|alternative|maybe|perhaps|possibly|probably|either|neither",
    r"then|next|also|plus|finally|lastly|afterwards?|subsequently|later|before|after",
    r"and|or|else|but|instead|vs|versus|both|nor",
    r"try(?:ing)?|retry|again|first(?:ly)?|second(?:ly)?|third|fallback|backup",
    r"(?:option|choice|step|action|alt)s?(?:\s*\d+)?",
    r"i|i'?ll|i'?d|i'?m|we|we'?ll|let'?s|you|can|could|might|may|should|will|would|shall",
    r"to|just|do|want|need|going|gonna|click|press|now|or\s+so",
    r"\d+",
    # a few other languages' "or", "then", "otherwise"
    r"oder|dann|sonst|ou|puis|sinon|o|luego|entonces",
)
_CONNECTORS = re.compile(
    r"(?:[\W_]+|(?>(?:" + "|".join(_JOINERS) + r")\b)|或者|或|然后|否则|再)*+", re.IGNORECASE
)
_LISTED = re.compile(r"[\W_]*(?:(?:or|and|nor|and\s*/\s*or)\b[\W_]*)++", re.IGNORECASE)
# A clause that ends in one of these (before any punctuation) turns the next call down.
_REJECTS = re.compile(
    r"(?:\b(?:instead\s+of|rather\s+than|in\s+place\s+of|than|not|never|nor|avoid(?:ing)?"
    r"|unlike|except|excluding|without|skip(?:ping)?|ignor(?:e|ing)|dont|cant|wont|statt|anstatt)"
    r"|n['’]t|而不是|不是|不要|别)"
    # "do not use", "never click the", "don't go with"
    r"(?:\s+(?:use|using|click|clicking|press|pressing|choose|choosing|pick|picking|select"
    r"|selecting|try|trying|do|doing|go\s+with|the|a|an|this|that|action|option)\b){0,3}"
    r"[\W_]*\Z",
    re.IGNORECASE,
)
# Words that offer an alternative or a next step anywhere in a clause; they join a call
# on unless the clause also rejects something.
_OFFERS = re.compile(
    r"\b(?:or|else|otherwise|alternatively|either|maybe|perhaps|fallback|backup|failing"
    r"|fails|then|next|afterwards|followed)\b",
    re.IGNORECASE,
)
_REJECT_WORD = re.compile(
    r"\b(?:instead\s+of|rather\s+than|than|not|never|avoid|unlike|except|without)\b|n['’]t\b",
    re.IGNORECASE,
)
_CLAUSE_MARKS = ",;:.!?\n"
_HARD_BREAK = re.compile(r"[;:.!?\n]")
# A later call's arguments, skipped so that a call written inside them is not read as
# another one; bounded so that many unclosed calls stay linear.
_LATER_ARGS = re.compile(
    r"""(?:[^()"'\n]|"(?:[^"\\\n]|\\.){0,200}+"|'(?:[^'\\\n]|\\.){0,200}+'){0,400}+\)"""
)

# How the text stands to a call.
_OFFERED, _REJECTED, _MENTIONED = "offered", "rejected", "mentioned"


def _last_clause(gap: str) -> str:
    return gap[max(gap.rfind(c) for c in _CLAUSE_MARKS) + 1 :]


def _standing(gap: str, before: str | None) -> str:
    """How the text stands to a call that `gap` leads into; `before`: the standing of
    the call before it (None: this is the first call considered)."""
    clause = _last_clause(gap)
    if _REJECTS.search(clause[-80:]):
        return _REJECTED
    if before is None:
        return _OFFERED
    if _CONNECTORS.fullmatch(clause):
        # "or"/"and" inside one sentence lists calls that stand together
        listed = _LISTED.fullmatch(clause) and not _HARD_BREAK.search(gap)
        return before if listed else _OFFERED
    if _OFFERS.search(clause) and not _REJECT_WORD.search(clause):
        return _OFFERED
    return _MENTIONED


def _pick(
    body: str, first: re.Match[str], text: str, earlier_marks: Sequence[re.Match[str]]
) -> Action | ParseError:
    """The one action `body` offers, starting from its first call `first`."""
    chosen: tuple[str, list[_Arg]] | None = None
    before: str | None = None
    m: re.Match[str] | None = first
    gap = body[: first.start()]
    while m is not None:
        name = m.group(1).lower()
        standing = _standing(gap, before)
        if standing == _OFFERED and chosen is not None:
            return ParseError(
                f"more than one action ({chosen[0]}(...) and {name}(...)); "
                "reply with exactly one action per step"
            )
        if standing == _OFFERED:
            parsed = _parse_args(body, m.end())
            if isinstance(parsed, ParseError):
                return ParseError(f"{name}: {parsed.reason}")
            chosen, end = (name, parsed[0]), parsed[1]
        else:
            skip = _LATER_ARGS.match(body, m.end())
            end = skip.end() if skip else m.end()
        before = standing
        m = _CALL.search(body, end)
        if m is not None:
            gap = body[end : m.start()]
    if chosen is None:
        # Nothing offered, only turned down ("Do not do click(2) again."): the call it
        # names is what the text is about (the reflection reader relies on this).
        parsed = _parse_args(body, first.end())
        if isinstance(parsed, ParseError):
            return ParseError(f"{first.group(1).lower()}: {parsed.reason}")
        chosen = (first.group(1).lower(), parsed[0])
    second = _earlier_action(text, earlier_marks)
    if second is not None:
        return ParseError(
            f"more than one action ({chosen[0]}(...) and {second}(...)); "
            "reply with exactly one action per step"
        )
    return _build(*chosen)


# How many trailing "Action:" marks may be found inside a call's quoted arguments, and
# how many calls before a mark are tried as the one holding it: bounds keep the time
# linear in the text (a call with an unclosed quote reads to the end of it).
_MAX_QUOTED_MARKS = 8
_CALLS_TRIED = 4


def _action_marks(text: str) -> list[re.Match[str]]:
    """The "Action:" marks of `text`, less trailing ones inside a call's arguments.

    `fill(3, "Action: done")` types the words "Action: done"; read from the last mark,
    the call would be cut at its own argument. A mark counts as inside when one of the
    calls just before it parses to a closing ")" after it.
    """
    marks = list(_ACTION_MARK.finditer(text))
    if not marks:
        return marks
    calls = list(_CALL.finditer(text))
    starts = [c.start() for c in calls]
    ends: dict[int, int] = {}

    def end_of(i: int) -> int:
        if i not in ends:
            parsed = _parse_args(text, calls[i].end())
            ends[i] = -1 if isinstance(parsed, ParseError) else parsed[1]
        return ends[i]

    for _ in range(_MAX_QUOTED_MARKS):
        at = marks[-1].start()
        before = bisect.bisect_left(starts, at)
        tried = range(before - 1, max(before - 1 - _CALLS_TRIED, -1), -1)
        if not any(end_of(i) > at for i in tried):
            break
        marks.pop()
        if not marks:
            break
    return marks


_LINE_LEAD = re.compile(r"[ \t`*>\-]*(?:action\s*:\s*)?", re.I | re.A)


def _earlier_action(text: str, marks: Sequence[re.Match[str]]) -> str | None:
    """The name of an action given after an earlier "Action:" mark (one run per step)."""
    for mark in marks:
        m = _CALL.match(text, _LINE_LEAD.match(text, mark.end()).end())  # type: ignore[union-attr]
        if m:
            return m.group(1).lower()
    return None


def _first_call(body: str) -> re.Match[str] | None:
    # Prefer a call at the start of a line (after bullets/backticks): a thought that
    # mentions "click(3)" mid-sentence should lose to the action line itself.
    start = 0
    for line in body.splitlines(keepends=True):
        lead = len(line) - len(line.lstrip(" \t`*>-"))
        m = _CALL.match(body, start + lead)
        if m:
            return m
        start += len(line)
    return _CALL.search(body)


# An argument as parsed: (kind, value) with kind "str" (was quoted) or "bare".
_Arg = tuple[str, str]


def _parse_args(s: str, i: int) -> tuple[list[_Arg], int] | ParseError:
    """The arguments of the call whose "(" ends at `i`, and where its ")" ends."""
    args: list[_Arg] = []
    n = len(s)
    while True:
        while i < n and s[i].isspace():
            i += 1
        if i >= n:
            return ParseError("missing closing parenthesis")
        if s[i] == ")" and not args:
            return args, i + 1
        kw = _KEYWORD.match(s, i)
        if kw:
            i = kw.end()
        if i < n and s[i] in _QUOTES:
            value, i_or_err = _read_quoted(s, i)
            if isinstance(i_or_err, ParseError):
                return i_or_err
            i = i_or_err
            args.append(("str", value))
        elif i < n and s[i] == "[":
            j = s.find("]", i)
            if j < 0:
                return ParseError("unclosed [")
            args.append(("bare", s[i + 1 : j].strip()))
            i = j + 1
        else:
            j = i
            while j < n and s[j] not in ",)\n":
                j += 1
            value = s[i:j].strip()
            if not value:
                return ParseError("empty argument")
            args.append(("bare", value))
            i = j
        while i < n and s[i].isspace():
            i += 1
        if i >= n:
            return ParseError("missing closing parenthesis")
        if s[i] == ")":
            return args, i + 1
        if s[i] != ",":
            return ParseError(f"unexpected {s[i]!r} after argument {len(args)}")
        i += 1


def _read_quoted(s: str, i: int) -> tuple[str, int | ParseError]:
    closer = _QUOTES[s[i]]
    out: list[str] = []
    i += 1
    n = len(s)
    while i < n:
        c = s[i]
        if c == "\\" and i + 1 < n:
            e = s[i + 1]
            if e in _ESCAPES:
                out.append(_ESCAPES[e])
                i += 2
            elif e == "u" and _HEX4.fullmatch(s[i + 2 : i + 6]):
                code, width = _unicode_escape(s, i)
                if code is None:  # a lone surrogate is no character: keep the escape
                    out.append(c)
                    i += 1
                else:
                    out.append(chr(code))
                    i += width
            elif e in "\"'`”’":
                out.append(e)
                i += 2
            else:  # an unknown escape is kept literally ("C:\path")
                out.append(c)
                i += 1
            continue
        if c == closer:
            return "".join(out), i + 1
        out.append(c)
        i += 1
    return "", ParseError("unterminated string")


_HEX4 = re.compile(r"[0-9a-fA-F]{4}")


def _unicode_escape(s: str, i: int) -> tuple[int | None, int]:
    """The code point of the \\uXXXX escape at s[i] (joining a JSON surrogate pair such as
    \\ud83d\\ude00) and how many characters it spans; None for a lone surrogate."""
    code = int(s[i + 2 : i + 6], 16)
    if 0xD800 <= code < 0xDC00 and s[i + 6 : i + 8] == "\\u" and _HEX4.fullmatch(s[i + 8 : i + 12]):
        low = int(s[i + 8 : i + 12], 16)
        if 0xDC00 <= low < 0xE000:
            return 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00), 12
    if 0xD800 <= code < 0xE000:
        return None, 0
    return code, 6


def _build(name: str, args: list[_Arg]) -> Action | ParseError:
    sig = SIGNATURES[name]
    if len(args) != len(sig):
        want = ", ".join(sig) if sig else "no arguments"
        return ParseError(f"{name} takes {len(sig)} argument(s) ({want}), got {len(args)}")
    target: str | None = None
    text: str | None = None
    nums: list[float] = []
    for (_kind, value), want in zip(args, sig, strict=True):
        if want == "id":
            v = value.strip().lstrip("#")
            if not _ELEMENT_ID.fullmatch(v):
                if v.isascii() and v.isdigit():
                    return ParseError(f"{name}: element id has {len(v)} digits; ids are short")
                return ParseError(f"{name}: element id must be a number, got {value[:40]!r}")
            target = v.lstrip("0") or "0"  # as str(int(v)), without int()'s limits
        elif want == "str":
            text = value
        else:
            if not _NUMBER.fullmatch(value.strip()):
                return ParseError(f"{name}: coordinates must be numbers, got {value[:40]!r}")
            f = float(value)
            if not math.isfinite(f):
                return ParseError(f"{name}: coordinates must be finite")
            nums.append(f)
    if name == "scroll":
        assert text is not None
        direction = text.strip().lower()
        if direction not in SCROLL_DIRECTIONS:
            return ParseError(f"scroll direction must be one of {', '.join(SCROLL_DIRECTIONS)}")
        text = direction
    if name == "press" and not (text or "").strip():
        return ParseError('press needs a key, e.g. press("Enter")')
    if name == "click_xy":
        return Action("click_xy", x=nums[0], y=nums[1])
    return Action(name, target=target, text=text)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- compare


def normalize_text(s: str, *, casefold: bool = False) -> str:
    """Unicode NFKC, whitespace collapsed and stripped; optionally case-folded."""
    s = " ".join(unicodedata.normalize("NFKC", s).split())
    return s.casefold() if casefold else s


def text_similarity(a: str, b: str) -> float:
    if a == b:
        return 1.0
    return difflib.SequenceMatcher(None, a, b).ratio()


# Which arguments compare case-insensitively: typed text (fill) is case-sensitive
# because tasks check it exactly (enter-text-2 is all about case); option labels, keys,
# answers and URLs are not.
_CASEFOLD = {"select": True, "press": True, "answer": True, "goto": True, "fill": False}


@dataclass(frozen=True, slots=True)
class Match:
    """Component-wise result of comparing an action with a reference action."""

    type_ok: bool
    target_ok: bool
    arg_ok: bool

    @property
    def ok(self) -> bool:
        return self.type_ok and self.target_ok and self.arg_ok


def compare(
    action: Action,
    reference: Action,
    *,
    elements: Mapping[str, Element] | None = None,
    tau: float = 1.0,
) -> Match:
    """Semantic comparison of `action` with `reference` (DESIGN.md §1 S).

    Same type (a click_xy counts as a click when its point lies inside the reference
    target's box, and vice versa: `elements` gives the boxes); same target element;
    arguments equal after normalization, or with similarity >= tau when tau < 1.
    """
    a, r = action, reference
    if {a.type, r.type} <= {"click", "click_xy"} and a.type != r.type:
        point, elem_action = (a, r) if a.type == "click_xy" else (r, a)
        elem = (elements or {}).get(elem_action.target or "")
        inside = bool(elem and elem.box and elem.box.contains(point.x or 0.0, point.y or 0.0))
        return Match(type_ok=True, target_ok=inside, arg_ok=True)
    if a.type != r.type:
        return Match(type_ok=False, target_ok=False, arg_ok=False)
    if a.type == "click_xy":
        # Two coordinate clicks agree when they land in the same element (if known) or
        # within a few pixels of each other.
        same = _same_element_at(a, r, elements) or (
            abs((a.x or 0) - (r.x or 0)) <= 3 and abs((a.y or 0) - (r.y or 0)) <= 3
        )
        return Match(type_ok=True, target_ok=same, arg_ok=True)
    target_ok = a.target == r.target
    if r.text is None and a.text is None:
        return Match(type_ok=True, target_ok=target_ok, arg_ok=True)
    return Match(type_ok=True, target_ok=target_ok, arg_ok=_args_match(a, r, tau))


def _args_match(a: Action, r: Action, tau: float) -> bool:
    fold = _CASEFOLD.get(a.type, True)
    x = normalize_text(a.text or "", casefold=fold)
    y = normalize_text(r.text or "", casefold=fold)
    if a.type == "goto":
        x, y = x.rstrip("/"), y.rstrip("/")
    if a.type == "answer":
        x, y = x.strip(" .!?\"'"), y.strip(" .!?\"'")
    if x == y:
        return True
    return tau < 1.0 and text_similarity(x, y) >= tau


def _same_element_at(a: Action, r: Action, elements: Mapping[str, Element] | None) -> bool:
    if not elements:
        return False
    ea = element_at(elements, a.x or 0.0, a.y or 0.0)
    er = element_at(elements, r.x or 0.0, r.y or 0.0)
    return ea is not None and ea == er


def element_at(elements: Mapping[str, Element], x: float, y: float) -> str | None:
    """The id of the smallest element whose box contains the point, if any."""
    best: tuple[float, str] | None = None
    for eid, el in elements.items():
        if el.box and el.box.contains(x, y):
            area = el.box.width * el.box.height
            if best is None or area < best[0]:
                best = (area, eid)
    return best[1] if best else None


def matches_any(
    action: Action,
    references: Sequence[Action],
    *,
    elements: Mapping[str, Element] | None = None,
    tau: float = 1.0,
) -> bool:
    """True when `action` is semantically equal to one of the acceptable `references`."""
    return any(compare(action, r, elements=elements, tau=tau).ok for r in references)
