"""The rule critic: a reflector for offline suites that reads only what a real one could.

Input: the goal text, each step's observation text, output, action and error, and the
outcome (reward, success, the judge's verdict). No oracle labels, no expert: it can be
wrong, and the collect stage measures how often (rmsweb.judge.grade).

Output: plain-language notes, one per suspicious step, in step order, e.g.
    Step 3: clicked [12] button "Cancel"; the goal asks for "Submit".
    Steps 2-3: scrolled down; then scrolled up, and the page ended as it was.
    Step 2: stopped before "pw" was filled.
The first clause of a note says what was done (the element's id, role and text, the
typed value); what follows (after ";" or "before") says why it looks wrong. rmsweb.agents.advice reads
notes back; a test holds the two to the same grammar.

How it looks for problems (heuristics a careful reader of the trajectory would use):
1. wasted steps (rmsweb.judge.trajectory): errors, no change, back and forth,
   repeats, overwritten fills;
2. in a failed attempt, the first of:
   - a click on an element whose text the goal does not ask for, while the page has
     one it does ask for (quoted goal text names it exactly, or its text occurs in
     the goal);
   - a click on a button while a value the goal gives is not yet in any field, or a
     text field is still empty (a premature submit; "values" are quoted goal texts
     that name no element, on a page with text fields);
   - a fill with a value the goal does not give, or into a field the goal labels
     for another value ('the username "vina"' labels "vina" for "Username");
   - a final stop or answer (stopped before the task was done);
   - otherwise the last step (the attempt ended in failure right after it).
Where it errs, by construction: it takes a field's last fill as the one that counts
(so a correct fill later spoiled is blamed instead of the spoiling one), and a wrong
fill undone at once reads as back and forth over both steps.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rmsweb.env.actions import Action
from rmsweb.judge.trajectory import Finding, PageElement, action_of, parse_page, wasted_steps
from rmsweb.judge.types import ReflectFn, Reflection, Verdict
from rmsweb.store.rows import EpisodeRecord

TEXT_FIELDS = ("textbox", "searchbox")
_QUOTED = re.compile(r'"([^"]*)"|“([^”]*)”')
MAX_NAME = 40  # longer element texts are cut (with "…") to keep notes short
# The last rule of a failed attempt's note: no rule found the error, so the critic
# names the last step. Graded apart as "no error found" (rmsweb.report.retry_study).
GUESS = "the attempt failed right after it"


def found_error(text: str) -> bool:
    """Did a rule of the critic find the error of a failed attempt (not its guess)?"""
    return GUESS not in text


# --------------------------------------------------------------------------- the goal


@dataclass(frozen=True)
class Goal:
    text: str
    quoted: tuple[str, ...]
    labels: dict[str, str]  # quoted value -> the word before it ('username "vina"')

    @staticmethod
    def read(instruction: str) -> Goal:
        quoted = tuple(a if a is not None else b for a, b in _QUOTED.findall(instruction))
        labels = {}
        for m in re.finditer(r'(\w+)\s+"([^"]*)"', instruction):
            labels.setdefault(m.group(2), m.group(1).lower())
        return Goal(instruction, quoted, labels)

    def targets(self, page: dict[str, PageElement]) -> set[str]:
        """Ids of the elements the goal asks for on this page."""
        exact = {e.id for e in page.values() if e.name and e.name in self.quoted}
        if exact:
            return exact
        lowered = self.text.lower()
        return {
            e.id
            for e in page.values()
            if e.name and re.search(rf"(?<!\w){re.escape(e.name.lower())}(?!\w)", lowered)
        }

    def values(self, page: dict[str, PageElement]) -> list[str]:
        """Quoted goal texts that name no element: values to type (when there are fields)."""
        if not any(e.role in TEXT_FIELDS for e in page.values()):
            return []
        names = {e.name for e in page.values()}
        return [q for q in self.quoted if q not in names]


# --------------------------------------------------------------------------- describing


def _q(s: str) -> str:
    s = " ".join(s.split())
    return '"' + (s if len(s) <= MAX_NAME else s[: MAX_NAME - 1] + "…") + '"'


def element(page: dict[str, PageElement], target: str | None) -> str:
    el = page.get(target or "")
    if el is None:
        return f"[{target}]"
    return f"[{el.id}] {el.role}" + (f" {_q(el.name)}" if el.name else "")


def describe(action: Action | None, page: dict[str, PageElement]) -> str:
    """The "what was done" clause of a note."""
    if action is None:
        return "wrote an output that is not an action"
    t = action.type
    if t == "click":
        return f"clicked {element(page, action.target)}"
    if t == "fill":
        return f"filled {element(page, action.target)} with {_q(action.text or '')}"
    if t == "select":
        return f"set {element(page, action.target)} to {_q(action.text or '')}"
    if t == "scroll":
        return f"scrolled {action.text}"
    if t == "press":
        return f"pressed {_q(action.text or '')}"
    if t == "stop":
        return "stopped"
    if t == "answer":
        return f"answered {_q(action.text or '')}"
    if t == "go_back":
        return "went back"
    if t == "goto":
        return f"went to {_q(action.text or '')}"
    return f"clicked at ({action.x:g}, {action.y:g})"


@dataclass(frozen=True)
class Note:
    steps: tuple[int, ...]
    what: str
    why: str

    def render(self) -> str:
        first, last = self.steps[0] + 1, self.steps[-1] + 1
        head = f"Step {first}" if first == last else f"Steps {first}-{last}"
        sep = " " if self.why.startswith("before ") else "; "
        return f"{head}: {self.what}{sep}{self.why}."


# --------------------------------------------------------------------------- the rules


def _wasted_note(f: Finding, rec: EpisodeRecord, pages: list) -> Note:
    i = f.steps[0]
    what = describe(action_of(rec.steps[i]), pages[i])
    if f.kind == "back_and_forth":
        then = describe(action_of(rec.steps[f.steps[1]]), pages[f.steps[1]])
        return Note(f.steps, what, f"then {then}, and the page ended as it was")
    why = {
        "failed": f"it failed ({f.detail})",
        "unparseable": "the step was lost",
        "repeat": "the same action twice, and the first changed nothing",
        "no_change": "the page did not change",
        "overwritten": f"a later step replaced it with {_q(f.detail)}",
    }[f.kind]
    return Note(f.steps, what, why)


def _missing(goal: Goal, page: dict[str, PageElement]) -> str | None:
    """What the page still lacks of the goal's values: the "before ..." of a note."""
    filled = {e.value for e in page.values() if e.role in TEXT_FIELDS}
    missing = [v for v in goal.values(page) if v not in filled]
    if missing:
        return f"before {_q(missing[0])} was filled"
    if goal.values(page):
        empty = [e for e in page.values() if e.role in TEXT_FIELDS and not e.value]
        if empty:
            return f"before {element(page, empty[0].id)} was filled"
    return None


def _error_note(goal: Goal, rec: EpisodeRecord, pages: list) -> Note | None:
    """The first step that looks like it broke a failed attempt (rule 2 of the module doc)."""
    last = len(rec.steps) - 1
    for i, st in enumerate(rec.steps):
        a, page = action_of(st), pages[i]
        if a is None:
            continue
        what = describe(a, page)
        if a.type == "click" and a.target in page:
            wanted = goal.targets(page)
            if wanted and a.target not in wanted and page[a.target].role not in TEXT_FIELDS:
                asked = sorted(page[t].name for t in wanted)[0]
                return Note((i,), what, f"the goal asks for {_q(asked)}")
            if page[a.target].role == "button" and (before := _missing(goal, page)):
                return Note((i,), what, before)
        if a.type == "fill" and a.target in page:
            values = goal.values(page)
            if values and (a.text or "") not in values:
                return Note((i,), what, f"the goal gives {_q(values[0])}, not {_q(a.text or '')}")
            label = goal.labels.get(a.text or "", "")
            field = page[a.target].name.lower()
            others = {lab for v, lab in goal.labels.items() if v != a.text}
            if field and label and label not in field and any(o in field for o in others):
                return Note((i,), what, f"the goal gives {_q(a.text or '')} for the {label}")
        if a.type in ("stop", "answer") and i == last:
            return Note((i,), what, _missing(goal, page) or "before the task was done")
    if last < 0:
        return None
    what = describe(action_of(rec.steps[last]), pages[last])
    return Note((last,), what, GUESS)


def _outcome(rec: EpisodeRecord, verdict: Verdict) -> str:
    ep = rec.episode
    if ep.error:
        return f"The attempt hit an environment error ({ep.error})."
    if not ep.success:
        return f"The attempt failed (reward {ep.reward:g})."
    # The reference length is not quoted: a reflection names no privileged number.
    ref = verdict.reference_length
    if ref and ep.n_steps > ref:
        return f"The attempt succeeded in {ep.n_steps} steps, more than the task usually takes."
    return f"The attempt succeeded in {ep.n_steps} steps but took detours."


def critique(rec: EpisodeRecord, verdict: Verdict) -> str:
    """The critic's reflection on one attempt (see the module docstring)."""
    goal = Goal.read(rec.episode.instruction)
    pages = [parse_page(s.obs_text) for s in rec.steps]
    notes = {f.steps[0]: _wasted_note(f, rec, pages) for f in wasted_steps(rec)}
    if not rec.episode.success:
        error = _error_note(goal, rec, pages)
        named = {s for n in notes.values() for s in n.steps}
        if error is not None and error.steps[0] not in named:
            notes[error.steps[0]] = error
    text = [_outcome(rec, verdict)]
    text += [notes[i].render() for i in sorted(notes)]
    if len(text) == 1:
        text.append("No single step stands out; follow the goal more directly.")
    return " ".join(text)


def rule_critic() -> ReflectFn:
    """The rule critic as a reflector (offline suites)."""

    async def reflect(rec: EpisodeRecord, verdict: Verdict, earlier: Sequence[str]) -> Reflection:
        return Reflection(rec.episode.attempt, critique(rec, verdict), "rule")

    return reflect
