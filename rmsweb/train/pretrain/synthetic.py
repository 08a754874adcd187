"""Synthetic web pages, instructions and next actions, in the policy's prompt format.

Each example is one step of a made-up task: a page rendered exactly as observations
are (rmsweb.env.observe.render_text: `[id] role "name"` lines, text lines, nesting,
`value=... focused`), an instruction from templates.py with random words from
vocab.py, the actions taken so far (the prompt's `Previous actions:`) and the one
right next action. Skills (SKILLS):
- copy: a value from the instruction into the only input, or into the input a label names;
- match: click the button, link, tab, checkbox, radio or menu entry the instruction names,
  among look-alikes (other case, same prefix);
- attribute: choose by an attribute: the n-th element of a role, the role among elements
  of the same name, the unlabelled input after a caption;
- form: several labelled values, one fill a step, then the finishing button;
- select: an option of a combobox (then the finishing button, when there is one);
- enter: a value into an input with no button, then press("Enter").
Deterministic: the examples are a function of (n, seed, skills) only.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from rmsweb.agents.prompt import PromptConfig, TokenCounter, build_messages, completion_text
from rmsweb.env.observe import render_text
from rmsweb.env.types import Action, Element, HistoryItem, format_action
from rmsweb.train.sft.samples import Sample

from . import templates as T
from . import vocab as V

SKILLS: tuple[str, ...] = ("copy", "match", "attribute", "form", "select", "enter")


@dataclass
class Example:
    """One step of a synthetic task: what the policy sees and the right action."""

    skill: str
    instruction: str
    obs_text: str
    history: list[HistoryItem] = field(default_factory=list)
    action: str = ""  # canonical action text, e.g. `fill(3, "q7Rt")`
    step: int = 0

    @property
    def completion(self) -> str:
        return completion_text(self.action)


# --------------------------------------------------------------------------- pages


class _Page:
    """Elements with increasing ids (a random start, the odd gap), rendered as observed."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.next_id = 1 if rng.random() < 0.6 else rng.randint(2, 60)
        self.elements: list[Element] = []

    def add(self, role: str, name: str = "", depth: int = 0, **kw: object) -> Element:
        if self.rng.random() < 0.1:
            self.next_id += self.rng.randint(1, 3)  # ids of hidden or removed elements
        e = Element(id=str(self.next_id), role=role, name=name, depth=depth, **kw)  # type: ignore[arg-type]
        self.next_id += 1
        self.elements.append(e)
        return e

    def filler(self, lo: int = 0, hi: int = 2) -> None:
        """Non-interactive lines: a heading, a paragraph."""
        for _ in range(self.rng.randint(lo, hi)):
            if self.rng.random() < 0.4:
                self.add("heading", V.sentence(self.rng, 1, 3).rstrip("."))
            else:
                self.add("text", _cut(V.sentence(self.rng, 3, 14)))

    def text(self, updates: dict[str, Element] | None = None) -> str:
        updates = updates or {}
        return render_text([updates.get(e.id, e) for e in self.elements])


def _cut(text: str, limit: int = 100) -> str:
    # observe.MAX_NAME: longer names end in an ellipsis
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _quoted(rng: random.Random, s: str) -> str:
    """A value as instructions show it: mostly in double quotes, sometimes bare or single."""
    r = rng.random()
    if r < 0.7 or " " in s:
        return f'"{s}"'
    return s if r < 0.9 else f"'{s}'"


def _act(kind: str, target: Element | None = None, text: str | None = None) -> str:
    return format_action(Action(kind, target.id if target else None, text))  # type: ignore[arg-type]


def _filled(e: Element, value: str, focused: bool = True) -> Element:
    return replace(e, value=value, states=("focused",) if focused else ())


def _history(actions: Sequence[str]) -> list[HistoryItem]:
    return [HistoryItem(completion_text(a), a, None) for a in actions]


def _textbox(page: _Page, name: str) -> Element:
    tag = "input:password" if page.rng.random() < 0.2 else "input:text"
    return page.add("textbox", name, tag=tag)


# --------------------------------------------------------------------------- skills
# Each returns the steps of one task: (instruction, [(obs_text, history, action)]).

Steps = list[tuple[str, list[HistoryItem], str]]


def _copy(rng: random.Random) -> tuple[str, Steps]:
    page = _Page(rng)
    page.filler(0, 2)
    value = V.value(rng)
    if rng.random() < 0.4:  # the only input (labelled or not)
        box = _textbox(page, V.label(rng) if rng.random() < 0.5 else "")
        page.add("button", V.finish_word(rng))
        page.filler(0, 1)
        instruction = rng.choice(T.COPY_ONLY).format(value=_quoted(rng, value))
        return instruction, [(page.text(), [], _act("fill", box, value))]
    labels = V.distinct(rng, V.label, rng.randint(2, 4))
    boxes = [_textbox(page, lab) for lab in labels]
    page.add("button", V.finish_word(rng))
    k = rng.randrange(len(boxes))
    instruction = rng.choice(T.COPY_LABELLED).format(value=_quoted(rng, value), label=labels[k])
    return instruction, [(page.text(), [], _act("fill", boxes[k], value))]


def _lookalikes(rng: random.Random, target: str, n: int) -> list[str]:
    """Distractor names: other case, shared prefix, or unrelated."""
    out: list[str] = []
    while len(out) < n:
        r = rng.random()
        if r < 0.2:
            cand = target.lower() if target != target.lower() else target.capitalize()
        elif r < 0.4 and len(target) > 3:
            cand = target[: rng.randint(2, len(target) - 1)] + V.pseudo_word(rng, (1, 1))
        else:
            cand = rng.choice((V.name, V.pseudo_word, V.finish_word))(rng)
        if cand != target and cand not in out:
            out.append(cand)
    return out


def _match(rng: random.Random) -> tuple[str, Steps]:
    page = _Page(rng)
    page.filler(0, 1)
    role = rng.choice(tuple(T.NOUNS))
    target = rng.choice((V.name, V.pseudo_word, V.finish_word))(rng)
    names = [target, *_lookalikes(rng, target, rng.randint(2, 6))]
    rng.shuffle(names)
    nested = role == "link" and rng.random() < 0.5  # links inside a paragraph
    if nested:
        page.add("text", _cut(" ".join(names + [V.pseudo_word(rng) for _ in range(4)])))
    els = [page.add(role, n, depth=1 if nested else 0) for n in names]
    if role == "tab":  # one tab is open
        i = page.elements.index(els[0])
        els[0] = page.elements[i] = replace(els[0], states=("selected",))
    page.filler(0, 1)
    pick = els[names.index(target)]
    instruction = rng.choice(T.MATCH).format(
        noun=rng.choice(T.NOUNS[role]), name=_quoted(rng, target)
    )
    return instruction, [(page.text(), [], _act("click", pick))]


def _attribute(rng: random.Random) -> tuple[str, Steps]:
    page = _Page(rng)
    page.filler(0, 1)
    kind = rng.random()
    if kind < 0.4:  # ordinal among the elements of one role, others interleaved
        role, other = rng.sample(("button", "link", "checkbox", "tab", "menuitem"), 2)
        count = rng.randint(2, 6)
        mine: list[Element] = []
        while len(mine) < count:
            if rng.random() < 0.3:
                page.add(other, V.name(rng))
            mine.append(page.add(role, V.name(rng)))
        k = rng.randrange(count)
        last = k == count - 1 and rng.random() < 0.3
        nth = "last" if last else T.ORDINALS[k]
        template = rng.choice(T.ORDINAL)
        if last and "{n}" in template:
            template = T.ORDINAL[0]
        instruction = template.format(nth=nth, n=k + 1, noun=rng.choice(T.NOUNS[role]))
        return instruction, [(page.text(), [], _act("click", mine[k]))]
    if kind < 0.7:  # the same name on several roles
        target = V.name(rng)
        roles = rng.sample(("button", "link", "checkbox", "tab", "menuitem", "radio"), 3)
        els = {}
        for role in roles:
            if rng.random() < 0.5:
                page.add(rng.choice(roles), V.name(rng))
            els[role] = page.add(role, target)
        role = rng.choice(roles)
        instruction = rng.choice(T.ROLE).format(
            name=_quoted(rng, target), noun=rng.choice(T.NOUNS[role])
        )
        return instruction, [(page.text(), [], _act("click", els[role]))]
    # an unlabelled input below each caption
    captions = V.distinct(rng, V.label, rng.randint(2, 4))
    boxes = []
    for cap in captions:
        page.add("text", cap)
        boxes.append(page.add("textbox", ""))
    page.add("button", V.finish_word(rng))
    k = rng.randrange(len(captions))
    value = V.value(rng)
    instruction = rng.choice(T.CAPTION).format(caption=captions[k], value=_quoted(rng, value))
    return instruction, [(page.text(), [], _act("fill", boxes[k], value))]


def _form(rng: random.Random) -> tuple[str, Steps]:
    page = _Page(rng)
    page.filler(0, 2)
    labels = V.distinct(rng, V.label, rng.randint(2, 4))
    values = [V.value(rng) for _ in labels]
    boxes = [_textbox(page, lab) for lab in labels]
    finish = page.add("button", V.finish_word(rng))
    page.filler(0, 1)
    order = list(range(len(labels)))
    if rng.random() < 0.3:
        rng.shuffle(order)  # the instruction's order, which the steps follow
    pair = rng.choice(T.PAIR)
    parts = [pair.format(label=labels[i], value=_quoted(rng, values[i])) for i in order]
    pairs = ", ".join(parts[:-1]) + " and " + parts[-1]
    instruction = rng.choice(T.FORM).format(pairs=pairs, button=_quoted(rng, finish.name))
    steps: Steps = []
    done: list[str] = []
    updates: dict[str, Element] = {}
    for j, i in enumerate(order):
        steps.append((page.text(updates), _history(done), _act("fill", boxes[i], values[i])))
        done.append(steps[-1][2])
        if j:
            prev = boxes[order[j - 1]]
            updates[prev.id] = _filled(prev, values[order[j - 1]], focused=False)
        updates[boxes[i].id] = _filled(boxes[i], values[i])
    steps.append((page.text(updates), _history(done), _act("click", finish)))
    return instruction, steps


def _select(rng: random.Random) -> tuple[str, Steps]:
    page = _Page(rng)
    page.filler(0, 2)
    options = V.distinct(rng, rng.choice((V.name, V.pseudo_word, V.number)), rng.randint(3, 8))
    combo = page.add("combobox", "", value=options[0], options=tuple(options))
    then = rng.random() < 0.5
    finish = page.add("button", V.finish_word(rng)) if then or rng.random() < 0.5 else None
    page.filler(0, 1)
    option = rng.choice(options[1:])
    step0 = _act("select", combo, option)
    if not then or finish is None:
        instruction = rng.choice(T.SELECT).format(option=_quoted(rng, option))
        return instruction, [(page.text(), [], step0)]
    instruction = rng.choice(T.SELECT_THEN).format(
        option=_quoted(rng, option), button=_quoted(rng, finish.name)
    )
    chosen = {combo.id: replace(combo, value=option, states=("focused",))}
    return instruction, [
        (page.text(), [], step0),
        (page.text(chosen), _history([step0]), _act("click", finish)),
    ]


def _enter(rng: random.Random) -> tuple[str, Steps]:
    page = _Page(rng)
    page.filler(0, 2)
    label = V.label(rng) if rng.random() < 0.7 else ""
    box = page.add("textbox", label)
    for _ in range(rng.randint(0, 3)):  # results of an earlier search: links, no button
        page.add("link", V.name(rng))
    value = V.value(rng)
    usable = [t for t in T.ENTER if label or "{label}" not in t]  # no label: none named
    instruction = rng.choice(usable).format(value=_quoted(rng, value), label=label)
    fill = _act("fill", box, value)
    return instruction, [
        (page.text(), [], fill),
        (page.text({box.id: _filled(box, value)}), _history([fill]), _act("press", text="Enter")),
    ]


GENERATORS: dict[str, Callable[[random.Random], tuple[str, Steps]]] = {
    "copy": _copy,
    "match": _match,
    "attribute": _attribute,
    "form": _form,
    "select": _select,
    "enter": _enter,
}


def episode(skill: str, rng: random.Random) -> list[Example]:
    """Every step of one synthetic task of `skill`."""
    instruction, steps = GENERATORS[skill](rng)
    return [
        Example(skill, instruction, obs, history, action, step)
        for step, (obs, history, action) in enumerate(steps)
    ]


def generate(n: int, seed: int, skills: Sequence[str] = SKILLS) -> list[Example]:
    """n examples, the skills in turn, each one step (uniformly drawn) of a fresh task."""
    unknown = [s for s in skills if s not in GENERATORS]
    if unknown or not skills:
        raise ValueError(f"unknown skills {unknown}; known: {', '.join(SKILLS)}")
    rng = random.Random(seed)
    out = []
    for i in range(n):
        steps = episode(skills[i % len(skills)], rng)
        out.append(steps[rng.randrange(len(steps))])
    return out


def messages(ex: Example, prompt: PromptConfig, count: TokenCounter) -> list[dict]:
    """The chat the policy would see at this step (rmsweb.agents.prompt.build_messages)."""
    return build_messages(ex.instruction, ex.obs_text, ex.history, prompt, count)


def to_sample(ex: Example, index: int, prompt: PromptConfig, count: TokenCounter) -> Sample:
    """The SFT Sample of an example: the policy's chat and the completion."""
    return Sample(
        f"synthetic/{ex.skill}", index, ex.step, messages(ex, prompt, count), ex.completion
    )


def texts(examples: Sequence[Example]) -> list[str]:
    """Tokenizer corpus texts of examples: instruction, page and action, as in corpus.py."""
    out: list[str] = []
    for ex in examples:
        out += [ex.instruction, ex.obs_text, ex.completion]
    return out


def fingerprint(examples: Sequence[Example]) -> str:
    """A digest of the examples (tests: determinism)."""
    import hashlib

    blob = json.dumps(
        [[e.skill, e.instruction, e.obs_text, e.action, e.step] for e in examples],
        ensure_ascii=False,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
