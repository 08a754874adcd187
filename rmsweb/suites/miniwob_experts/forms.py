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


EXPERT_FUNCTIONS = {
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
    "search-engine": search_engine,
}
