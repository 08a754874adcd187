"""Instruction templates of the synthetic tasks: our own wording, one list per skill.

Slots are `{name}` fields filled by the generator (synthetic.py). overlap.py checks that
no 4 consecutive words of a template (slots break the run) occur in the suite's task
instructions or MiniWoB++'s task pages, so the wording is never the study's.
"""

from __future__ import annotations

# copy: one value into the only input (the input may have no label).
COPY_ONLY = (
    "Put {value} in the input box.",
    "Write {value} in the empty box.",
    "The box should end up holding {value}.",
    "Key in {value}.",
    "Fill the input with {value}.",
    "Your entry is {value}; write it down in the box.",
    "Copy {value} into the input.",
    "Make the input say {value}.",
    "Place the characters {value} in the entry area.",
    "Transcribe {value} into the blank.",
    "Jot {value} down in the box.",
    "We need {value} written in the input.",
)
# copy: one value into the input with a given label, among several inputs.
COPY_LABELLED = (
    "Put {value} in the {label} box.",
    "Write {value} beside {label}.",
    "The {label} entry should hold {value}.",
    "Set {label} to {value}.",
    "{label} gets {value}.",
    "Fill {label} with {value}.",
    "In the box marked {label}, write {value}.",
    "Key {value} into {label}.",
    "Copy {value} over to the {label} input.",
    "Only the {label} input changes: it becomes {value}.",
    "Make {label} read {value}.",
    "Jot {value} into the slot for {label}.",
)
# match: click the element whose name is named (quoted or bare).
MATCH = (
    "Press the {noun} {name}.",
    "Hit {name}.",
    "Activate the {noun} called {name}.",
    "Go for {name}.",
    "Your target is the {noun} {name}.",
    "Tap {name} once.",
    "Choose the {noun} that reads {name}.",
    "Among the {noun}s, press {name}.",
    "Find {name} and press it.",
    "Trigger {name}.",
    "Use the {noun} labelled {name}.",
    "{name} is the one to press.",
    "Pick {name} on this page.",
    "Give {name} a press.",
)
# attribute (ordinal): the n-th element of a role, counted from the top.
ORDINAL = (
    "Press the {nth} {noun}.",
    "Hit {noun} number {n}.",
    "Counting from the top, pick {noun} {n}.",
    "The {nth} {noun} from the top is the one to press.",
    "Tap whichever {noun} comes {nth}.",
    "Go down the page to the {nth} {noun} and press it.",
    "Of all the {noun}s, use the {nth}.",
    "Position {n} among the {noun}s: press that one.",
)
# attribute (role): the same name on several roles; the instruction names the role.
ROLE = (
    "Press {name}, the {noun} one.",
    "Activate the {noun} named {name}, not the others.",
    "There are several {name} entries: use the {noun}.",
    "Hit the {noun} whose text is {name}.",
    "Go for {name}, but only the {noun}.",
    "Several things say {name}; press the {noun}.",
)
# attribute (caption): an unlabelled input right after a text line.
CAPTION = (
    "Write {value} in the box below {caption}.",
    "Under the caption {caption}, put {value}.",
    "The input after the words {caption} takes {value}.",
    "Below {caption} there is a box: write {value} there.",
    "Fill the box that follows {caption} with {value}.",
    "{caption} is the heading of the box for {value}.",
)
# form: several values by label, then the finishing button (one step at a time).
FORM = (
    "Complete the form: {pairs}. Finish with {button}.",
    "{pairs}; afterwards hit {button}.",
    "Set {pairs}, then tap {button} to send it.",
    "Form duty: {pairs}. Wrap up via {button}.",
    "Here is the data: {pairs}. When all is in, press {button}.",
    "Give the form {pairs} and end by pressing {button}.",
    "Fill out {pairs}; the last move is {button}.",
    "Registration: {pairs}. Then {button}.",
)
# One label/value pair inside a form instruction.
PAIR = (
    "{label} as {value}",
    "{value} for {label}",
    "{label}: {value}",
    "{label} = {value}",
    "{label} set to {value}",
)
# select: an option of a drop-down (then the finishing button when there is one).
SELECT = (
    "From the dropdown, take {option}.",
    "Set the picker to {option}.",
    "The drop-down should show {option}.",
    "Switch the menu of choices over to {option}.",
    "Choose {option} in the drop-down.",
    "{option} is the right choice in the picker.",
    "Make the dropdown read {option}.",
)
SELECT_THEN = (
    "From the dropdown, take {option}, then hit {button}.",
    "Set the picker to {option} and confirm with {button}.",
    "Choose {option} in the drop-down; {button} afterwards.",
    "Make the dropdown read {option}. Then use {button}.",
    "Switch the choices over to {option} before pressing {button}.",
)
# enter: a value into an input that has no button; the Enter key sends it.
ENTER = (
    "Search for {value} and hit the Enter key.",
    "Look up {value}; confirm with Enter.",
    "Put {value} in the {label} box and send it with the Enter key.",
    "Query {value}, then press Enter on the keyboard.",
    "Type {value} as the search and finish with the Enter key.",
    "Find {value} using the box; the keyboard's Enter sends it.",
    "Write {value} in {label}, and confirm by pressing Enter.",
)

# The role nouns an instruction may use for an element's role.
NOUNS = {
    "button": ("button", "control"),
    "link": ("link", "hyperlink"),
    "tab": ("tab",),
    "checkbox": ("checkbox", "tick box"),
    "radio": ("radio option", "round option"),
    "menuitem": ("menu entry",),
}

ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")

# skill -> its template lists (what overlap.py checks).
TEMPLATES: dict[str, tuple[tuple[str, ...], ...]] = {
    "copy": (COPY_ONLY, COPY_LABELLED),
    "match": (MATCH,),
    "attribute": (ORDINAL, ROLE, CAPTION),
    "form": (FORM, PAIR),
    "select": (SELECT, SELECT_THEN),
    "enter": (ENTER,),
}


def all_templates() -> list[str]:
    return [t for lists in TEMPLATES.values() for ts in lists for t in ts]
