"""Experts for the form tasks: focusing, typing, logging in, lists, dates, search."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from rmsweb.env.actions import Action, click, fill, press, select
from rmsweb.env.types import Element, HistoryItem, Observation

from .common import elements, enabled, find, quoted, text_fields, value


def _fill_then_click(
    obs: Observation, wanted: list[tuple[Element | None, str]], button: str, fold: bool = False
) -> list[Action]:
    """Fill every field whose value differs from what it should hold (any order is on
    the shortest path); once all hold it, click the button."""
    if any(field is None for field, _ in wanted):
        return []
    todo = [fill(f.id, text) for f, text in wanted if f is not None and value(f) != text]
    if todo:
        return todo
    return [click(b.id) for b in enabled(find(obs, "button", button, fold=fold))]


def focus_text(instruction: str, obs: Observation, history: Sequence[HistoryItem]) -> list[Action]:
    # "Focus into the textbox."
    return [click(f.id) for f in text_fields(obs)[:1]]


_ORDINALS = {"1st": 0, "2nd": 1, "3rd": 2}


def focus_text_2(
    instruction: str, obs: Observation, history: Sequence[HistoryItem]
) -> list[Action]:
    # "Focus into the 2nd input textbox."
    m = re.search(r"the (\d\w\w) input", instruction)
    fields = text_fields(obs)
    i = _ORDINALS.get(m.group(1), -1) if m else -1
    return [click(fields[i].id)] if 0 <= i < len(fields) else []


def enter_text(instruction: str, obs: Observation, history: Sequence[HistoryItem]) -> list[Action]:
    # 'Enter "Jerald" into the text field and press Submit.'
    (text,) = quoted(instruction)[:1] or [""]
    fields = text_fields(obs)
    return _fill_then_click(obs, [(fields[0] if fields else None, text)], "Submit")


def enter_text_2(
    instruction: str, obs: Observation, history: Sequence[HistoryItem]
) -> list[Action]:
    # 'Type "myron" in all upper case letters in the text input and press Submit.'
    (text,) = quoted(instruction)[:1] or [""]
    text = text.upper() if "upper case" in instruction else text.lower()
    fields = text_fields(obs)
    return _fill_then_click(obs, [(fields[0] if fields else None, text)], "Submit")


def enter_password(
    instruction: str, obs: Observation, history: Sequence[HistoryItem]
) -> list[Action]:
    # 'Enter the password "fU" into both text fields and press submit.'
    (pw,) = quoted(instruction)[:1] or [""]
    fields = text_fields(obs)[:2]
    if len(fields) < 2:
        return []
    return _fill_then_click(obs, [(f, pw) for f in fields], "Submit")


def _login(instruction: str, obs: Observation, button: str) -> list[Action]:
    # 'Enter the username "vina" and the password "US" into the text fields and press login.'
    parts = quoted(instruction)
    if len(parts) < 2:
        return []
    user = next(iter(find(obs, "textbox", "Username")), None)
    pw = next(iter(find(obs, "textbox", "Password")), None)
    return _fill_then_click(obs, [(user, parts[0]), (pw, parts[1])], button)


def login_user(instruction: str, obs: Observation, history: Sequence[HistoryItem]) -> list[Action]:
    return _login(instruction, obs, "Login")


def login_user_popup(
    instruction: str, obs: Observation, history: Sequence[HistoryItem]
) -> list[Action]:
    # A pop-up ("Your session is about to expire ... Exit to home page?") may open when a
    # field gets focus and disables the form; "Cancel" closes it, "OK" loses the task.
    cancel = find(obs, "button", "Cancel")
    if cancel:
        return [click(c.id) for c in cancel]
    return _login(instruction, obs, "OK")


def choose_list(instruction: str, obs: Observation, history: Sequence[HistoryItem]) -> list[Action]:
    # "Select Heard Island and McDonald Islands from the list and click Submit."
    m = re.match(r"Select (.*) from the list and click Submit\.?$", instruction.strip())
    lists = find(obs, "combobox")
    if not m or not lists:
        return []
    wanted = m.group(1)
    if lists[0].value != wanted:
        return [select(lists[0].id, wanted)]
    return [click(b.id) for b in find(obs, "button", "Submit")]


def enter_date(instruction: str, obs: Observation, history: Sequence[HistoryItem]) -> list[Action]:
    # "Enter 07/26/2017 as the date and hit submit." A date input takes YYYY-MM-DD.
    m = re.search(r"(\d\d)/(\d\d)/(\d{4})", instruction)
    fields = [e for e in elements(obs) if e.tag == "input:date"]
    if not m or not fields:
        return []
    iso = f"{m.group(3)}-{m.group(1)}-{m.group(2)}"
    return _fill_then_click(obs, [(fields[0], iso)], "Submit")


def use_autocomplete(
    instruction: str, obs: Observation, history: Sequence[HistoryItem]
) -> list[Action]:
    # 'Enter an item that starts with "Rus" and ends with "sia".' Type the start, open
    # the suggestions (ArrowDown asks at once; typing waits 300 ms), pick a fitting one.
    parts = quoted(instruction)
    fields = text_fields(obs)
    if not parts or not fields:
        return []
    start, end = parts[0], (parts[1] if len(parts) > 1 else "")
    box = fields[0]
    menu = [e for e in elements(obs) if e.role in ("menuitem", "option", "link", "text")]
    menu = [e for e in menu if e.tag in ("li", "div") and e.depth >= 0 and e.id != box.id]

    def fits(s: str) -> bool:
        return s.startswith(start) and s.endswith(end)

    if fits(value(box)):
        if any(fits(e.name) for e in menu):
            return [press("Escape")]  # the open list covers the Submit button
        return [click(b.id) for b in find(obs, "button", "Submit")]
    picks = [click(e.id) for e in menu if fits(e.name)]
    if picks:
        return picks
    if value(box) == start and "focused" in box.states:
        return [press("ArrowDown")]
    return [fill(box.id, start)]


def search_engine(
    instruction: str, obs: Observation, history: Sequence[HistoryItem]
) -> list[Action]:
    # 'Use the textbox to enter "Kanesha" and press "Search", then find and click the
    # 4th search result.' Three results per page; pages 1-3 via the pager links.
    parts = quoted(instruction)
    m = re.search(r"click the (\d+)\w\w search result", instruction)
    fields = text_fields(obs)
    if not parts or not m or not fields:
        return []
    term, n = parts[0], int(m.group(1))
    if value(fields[0]) != term:
        return [fill(fields[0].id, term)]
    links = find(obs, "link")
    pager = [e for e in links if e.name in ("<", ">") or e.name.isdigit()]
    results = [e for e in links if e not in pager]
    if not pager:
        return [click(b.id) for b in find(obs, "button", "Search")]
    names = {e.name for e in pager}
    # The pager hides "<" on the first page and ">" on the last.
    page = 1 if "<" not in names else 3 if ">" not in names else 2
    want_page = math.ceil(n / 3)
    if page != want_page:
        return [click(e.id) for e in pager if e.name == str(want_page)]
    i = (n - 1) % 3
    return [click(results[i].id)] if i < len(results) else []


def enter_time(instruction: str, obs: Observation, history: Sequence[HistoryItem]) -> list[Action]:
    # "Enter 2:54 PM as the time and press submit." A time input takes 24-hour HH:MM.
    m = re.search(r"(\d{1,2}):(\d\d)\s*([AP]M)", instruction)
    fields = [e for e in elements(obs) if e.tag == "input:time"]
    if not m or not fields:
        return []
    hour = int(m.group(1)) % 12 + (12 if m.group(3) == "PM" else 0)
    return _fill_then_click(obs, [(fields[0], f"{hour:02d}:{m.group(2)}")], "Submit")


def ordinal_index(word: str) -> int | None:
    """0-based index of an ordinal such as "1st", "2nd", "13th"."""
    m = re.fullmatch(r"(\d+)(?:st|nd|rd|th)", word)
    return int(m.group(1)) - 1 if m else None


def find_word(instruction: str, obs: Observation, history: Sequence[HistoryItem]) -> list[Action]:
    # 'Find the 5th word in the paragraph, type that into the textbox and press "Submit".'
    # The page compares letters only: "amet." is typed as "amet".
    m = re.search(r"the (\d+\w\w) word", instruction)
    fields = text_fields(obs)
    texts = [e for e in elements(obs) if e.role == "text"]
    i = ordinal_index(m.group(1)) if m else None
    if i is None or not fields or not texts:
        return []
    words = texts[0].name.split()
    if i >= len(words) or (texts[0].name.endswith("…") and i >= len(words) - 1):
        return []  # the paragraph was cut short in the observation
    word = re.sub(r"[^a-zA-Z0-9]", "", words[i])
    return _fill_then_click(obs, [(fields[0], word)], "Submit")


_POSITIONS = {"1st": 0, "2nd": 1, "3rd": 2}


def form_sequence_2(
    instruction: str, obs: Observation, history: Sequence[HistoryItem]
) -> list[Action]:
    # 'Check the 2nd radio button and enter the number "-2" into the 3rd textbox.'
    m = re.search(
        r'the (\w+) radio button and enter the number "(.*)" into the (\w+) textbox', instruction
    )
    radios, fields = find(obs, "radio"), text_fields(obs)
    if not m or len(radios) < 3 or len(fields) < 3:
        return []
    radio, field = radios[_POSITIONS[m.group(1)]], fields[_POSITIONS[m.group(3)]]
    if "checked" not in radio.states:
        return [click(radio.id)]
    return _fill_then_click(obs, [(field, m.group(2))], "Submit")


def form_sequence_3(
    instruction: str, obs: Observation, history: Sequence[HistoryItem]
) -> list[Action]:
    # 'Choose 5ft 9in from the dropdown, then click the button labeled "Yes".'
    m = re.match(
        r'Choose (.*) from the dropdown, then click the button labeled "(.*)"', instruction
    )
    lists = find(obs, "combobox")
    if not m or not lists:
        return []
    if lists[0].value == m.group(1):
        return [click(b.id) for b in find(obs, "button", m.group(2))]
    # a Selectric dropdown covers the <select>: open it ("▾"), then click the option
    options = find(obs, "link", m.group(1))
    return [click(e.id) for e in options or find(obs, "link", "▾")]


def _table_value(obs: Observation, key: str) -> str | None:
    """The cell after the text `key` (read-table's rows: key cell, value cell)."""
    els = elements(obs)
    for i, e in enumerate(els[:-1]):
        if e.role == "text" and e.name == key and els[i + 1].role == "text":
            return els[i + 1].name
    return None


def read_table(instruction: str, obs: Observation, history: Sequence[HistoryItem]) -> list[Action]:
    # "Enter the value of Country into the text field and press Submit."
    m = re.match(r"Enter the value of (.*) into the text field", instruction)
    fields = text_fields(obs)
    text = _table_value(obs, m.group(1)) if m else None
    if text is None or not fields:
        return []
    return _fill_then_click(obs, [(fields[0], text)], "Submit")


def read_table_2(
    instruction: str, obs: Observation, history: Sequence[HistoryItem]
) -> list[Action]:
    # "Enter the value that corresponds with each label into the form ..." Each field's
    # label ("Gender:") names a row of the table.
    fields = text_fields(obs)
    wanted = [(f, _table_value(obs, f.name.rstrip(":").strip())) for f in fields]
    if not wanted or any(v is None for _, v in wanted):
        return []
    return _fill_then_click(obs, [(f, v or "") for f, v in wanted], "Submit")


def copy_paste(instruction: str, obs: Observation, history: Sequence[HistoryItem]) -> list[Action]:
    # "Copy the text in the textarea below, paste it into the textbox and press Submit."
    areas = [e for e in elements(obs) if e.tag == "textarea"]
    inputs = [e for e in text_fields(obs) if e.tag != "textarea"]
    m = re.search(r"the (\w+) text area", instruction)
    i = _POSITIONS.get(m.group(1), -1) if m else 0
    if not inputs or not 0 <= i < len(areas) or value(areas[i]).endswith("…"):
        return []
    return _fill_then_click(obs, [(inputs[0], value(areas[i]))], "Submit")


def _math_text(obs: Observation) -> str:
    return " ".join(e.name for e in elements(obs) if e.role == "text")


def simple_arithmetic(
    instruction: str, obs: Observation, history: Sequence[HistoryItem]
) -> list[Action]:
    # "Solve the math problem ..." with the problem "7 x 3 =" on the page.
    m = re.search(r"(-?\d+)\s*([-+x])\s*(-?\d+)\s*=", _math_text(obs))
    fields = text_fields(obs)
    if not m or not fields:
        return []
    a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
    result = a + b if op == "+" else a - b if op == "-" else a * b
    return _fill_then_click(obs, [(fields[0], str(result))], "Submit")


def simple_algebra(
    instruction: str, obs: Observation, history: Sequence[HistoryItem]
) -> list[Action]:
    # "Solve for x ..." with "x - 3 = 14" or "3 - x = 14" on the page.
    text = _math_text(obs)
    fields = text_fields(obs)
    m1 = re.search(r"x\s*([-+])\s*(\d+)\s*=\s*(-?\d+)", text)
    m2 = re.search(r"(\d+)\s*([-+])\s*x\s*=\s*(-?\d+)", text)
    if not fields or not (m1 or m2):
        return []
    if m1:
        op, d, total = m1.group(1), int(m1.group(2)), int(m1.group(3))
        x = total - d if op == "+" else total + d
    else:
        assert m2 is not None
        d, op, total = int(m2.group(1)), m2.group(2), int(m2.group(3))
        x = total - d if op == "+" else d - total
    return _fill_then_click(obs, [(fields[0], str(x))], "Submit")


def text_transform(
    instruction: str, obs: Observation, history: Sequence[HistoryItem]
) -> list[Action]:
    # "Type the text below into the text field ..." The captcha is one text per letter.
    fields = text_fields(obs)
    if not fields:
        return []
    els = elements(obs)
    letters = [e.name for e in els[: els.index(fields[0])] if e.role == "text"]
    return _fill_then_click(obs, [(fields[0], "".join(letters))], "Submit")


# multi-layouts: three fields whose labels sit before them (or, in one layout, after).
_MOVIE_LABELS = {"genre": "Genre", "director": "Director", "year": "Year", "released": "Year"}


def _movie_label(name: str) -> str | None:
    words = name.lower().rstrip(":").split()
    return next((_MOVIE_LABELS[w] for w in words if w in _MOVIE_LABELS), None)


def multi_layouts(
    instruction: str, obs: Observation, history: Sequence[HistoryItem]
) -> list[Action]:
    # "Search for action movies directed by Cantrell from year 1989."
    m = re.match(r"Search for (.*) movies directed by (.*) from year (\d+)\.", instruction)
    if not m:
        return []
    want = {"Genre": m.group(1), "Director": m.group(2), "Year": m.group(3)}
    els = elements(obs)
    fields = text_fields(obs)
    labels = [e for e in els if e.role == "text" and _movie_label(e.name)]
    if len(fields) != 3 or len(labels) < 3:
        return []
    label_first = els.index(labels[0]) < els.index(fields[0])
    wanted: list[tuple[Element | None, str]] = []
    for f in fields:
        i = els.index(f)
        near = els[i - 1] if label_first else els[i + 1] if i + 1 < len(els) else None
        key = _movie_label(near.name) if near is not None and near.role == "text" else None
        if key is None:
            return []
        wanted.append((f, want[key]))
    todo = [fill(f.id, t) for f, t in wanted if f is not None and value(f) != t]
    if todo:
        return todo
    buttons = [e for e in els if e.role in ("button", "link", "text")]
    return [click(e.id) for e in buttons if e.name in ("Submit", "Search", "Go!")]


EXPERT_FUNCTIONS = {
    "enter-text-dynamic": enter_text,
    "enter-time": enter_time,
    "find-word": find_word,
    "form-sequence-2": form_sequence_2,
    "form-sequence-3": form_sequence_3,
    "read-table": read_table,
    "read-table-2": read_table_2,
    "copy-paste": copy_paste,
    "copy-paste-2": copy_paste,
    "simple-arithmetic": simple_arithmetic,
    "simple-algebra": simple_algebra,
    "text-transform": text_transform,
    "multi-layouts": multi_layouts,
    "multi-orderings": multi_layouts,
    "focus-text": focus_text,
    "focus-text-2": focus_text_2,
    "enter-text": enter_text,
    "enter-text-2": enter_text_2,
    "enter-password": enter_password,
    "login-user": login_user,
    "login-user-popup": login_user_popup,
    "choose-list": choose_list,
    "enter-date": enter_date,
    "use-autocomplete": use_autocomplete,
    "use-autocomplete-nodelay": use_autocomplete,
    "search-engine": search_engine,
}
