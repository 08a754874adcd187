"""Expert for email-inbox-forward-nl: find the sender's email and forward it."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence

from rmsweb.env.actions import Action, click, fill
from rmsweb.env.types import HistoryItem, Observation

from .common import elements, find, value

# The task's instruction templates (email-inbox-forward-nl.html, NL_TEMPLATES and
# TEST_NL_TEMPLATES); NAME is the sender, DEST the recipient.
TEMPLATES = (
    "Find the email by NAME and forward that email to DEST.",
    "Locate the email by NAME. Forward that email to DEST.",
    "Look for the email from NAME and forward to DEST.",
    "Forward to DEST the email from NAME.",
    "Send DEST the email you got from NAME.",
    "Go to the email by NAME. Send it to DEST.",
    "Send to DEST the email you got from NAME.",
    "Forward the email from NAME to DEST.",
    "Send DEST the email from NAME.",
    "Please find the message by NAME, then send it to DEST.",
    "Please forward the information from NAME to DEST.",
    "DEST wants the email you got from NAME.",
    "DEST wants the email NAME sent to you.",
    "The mail by NAME should be forwarded to DEST.",
    "Please forward to DEST the email by NAME.",
    "Give DEST the message you received from NAME,",
    "Forward the mail by NAME to DEST.",
    "Go to the message from NAME and send it to DEST.",
    "DEST is waiting for the email by NAME.",
    "NAME wants his or her message to be sent to DEST.",
    "I want the mail by NAME to be sent to DEST.",
    "Forward to DEST the email you got from NAME.",
    "Please forward the message from NAME to DEST.",
    "Please find the mail by NAME. Forward it to DEST.",
    "Navigate to the message from NAME and send it to DEST.",
    "Forward DEST the email from NAME.",
    "Forward DEST the message NAME sent you.",
    "Send DEST the information NAME sent to you.",
    "Search for the mail NAME sent you and send it to DEST.",
    "Get NAME email and then forward it to DEST please.",
)
# Most literal text first: "Send to DEST ..." must win over "Send DEST ..." (names may
# hold spaces, "Jo Ann", so the name patterns cannot exclude them).
_PATTERNS = [
    re.compile(re.escape(t).replace("NAME", r"(?P<name>.+?)").replace("DEST", r"(?P<dest>.+?)"))
    for t in sorted(TEMPLATES, key=lambda t: -len(t.replace("NAME", "").replace("DEST", "")))
]


def parse_forward(instruction: str) -> tuple[str, str] | None:
    """(sender, recipient) of a forwarding instruction, or None."""
    for p in _PATTERNS:
        m = p.fullmatch(instruction.strip())
        if m:
            return m.group("name"), m.group("dest")
    return None


def email_inbox_forward_nl(
    instruction: str, obs: Observation, history: Sequence[HistoryItem]
) -> list[Action]:
    parsed = parse_forward(instruction)
    if not parsed:
        return []
    sender, dest = parsed
    els = elements(obs)
    names = {e.name for e in els}
    to_field = find(obs, "textbox", "to:")
    if to_field:  # the forward form
        if value(to_field[0]) != dest:
            return [fill(to_field[0].id, dest)]
        return [click(e.id) for e in find(obs, "img", "send-forward")]
    if "close-reply" in names:  # a reply form opened by mistake
        return [click(e.id) for e in find(obs, "img", "close-reply")]
    forward = find(obs, "link", "Forward")
    if forward:  # one email is open: is it the sender's?
        if sender in names:
            return [click(e.id) for e in forward]
        return [click(e.id) for e in find(obs, "img", "close-email")]
    return [click(e.id) for e in find(obs, "link", sender)]  # the inbox


EXPERT_FUNCTIONS = {"email-inbox-forward-nl": email_inbox_forward_nl}


# email-inbox and its one-action variants: the instruction names the sender and the
# action (reply with a text, forward to someone, trash, star).
_INBOX = re.compile(
    r"Find the email by (?P<name>.+?) and (?:"
    r'reply to them with the text "(?P<reply>.*)"'
    r"|forward that email to (?P<dest>.+?)"
    r"|click the (?P<icon>trash|star) icon to \w+ it(?: as important)?)\.$"
)


def parse_inbox(instruction: str) -> tuple[str, str, str] | None:
    """(sender, action, argument): action reply/forward/trash/star."""
    m = _INBOX.match(instruction.strip())
    if not m:
        return None
    if m.group("reply") is not None:
        return m.group("name"), "reply", m.group("reply")
    if m.group("dest") is not None:
        return m.group("name"), "forward", m.group("dest")
    return m.group("name"), m.group("icon"), ""


def _open_sender(obs: Observation) -> str | None:
    """The sender of the email open on the page (the text before "to me"), or None."""
    els = elements(obs)
    for i, e in enumerate(els):
        if e.role == "text" and e.name == "to me" and i > 0:
            return els[i - 1].name
    return None


def _solve_inbox(sender: str, action: str, arg: str, obs: Observation) -> list[Action]:
    els = elements(obs)
    names = {e.name for e in els}
    if "send-forward" in names:  # the forward form
        if action != "forward":
            return [click(e.id) for e in find(obs, "img", "close-forward")]
        to_field = find(obs, "textbox", "to:")
        if to_field and value(to_field[0]) != arg:
            return [fill(to_field[0].id, arg)]
        return [click(e.id) for e in find(obs, "img", "send-forward")]
    if "send-reply" in names:  # the reply form: its one text field is the message
        if action != "reply":
            return [click(e.id) for e in find(obs, "img", "close-reply")]
        fields = [e for e in els if e.role == "textbox"]
        if fields and value(fields[0]) != arg:
            return [fill(fields[0].id, arg)]
        return [click(e.id) for e in find(obs, "img", "send-reply")]
    if find(obs, "link", "Forward"):  # one email is open
        if _open_sender(obs) != sender:
            return [click(e.id) for e in find(obs, "img", "close-email")]
        if action in ("trash", "star"):
            return [click(e.id) for e in find(obs, "img", action)[:1]]
        return [click(e.id) for e in find(obs, "link", action.capitalize())]
    # the inbox: each thread is sender, subject, body links, then trash and star icons
    out: list[Action] = []
    for i, e in enumerate(els):
        if e.role != "link" or e.name != sender:
            continue
        if action in ("trash", "star"):
            icons = [x for x in els[i + 1 : i + 6] if x.role == "img" and x.name == action]
            out += [click(x.id) for x in icons[:1]]
        else:
            out.append(click(e.id))
    return out


def email_inbox(instruction: str, obs: Observation, history: Sequence[HistoryItem]) -> list[Action]:
    parsed = parse_inbox(instruction)
    return _solve_inbox(*parsed, obs) if parsed else []


EXPERT_FUNCTIONS.update(
    {
        name: email_inbox
        for name in (
            "email-inbox",
            "email-inbox-delete",
            "email-inbox-forward",
            "email-inbox-important",
            "email-inbox-noscroll",
            "email-inbox-reply",
            "email-inbox-star-reply",
        )
    }
)


# The *-nl-turk variants word each instruction with one of the crowd-written templates
# the task page loads (train split: the page runs in its default data mode).
_TURK_FILE = "common/special/email-inbox-nl/templates.js"
_TURK_ACTION = {"forward": "forward", "reply": "reply", "delete": "trash", "important": "star"}


@functools.cache
def _turk_patterns() -> list[tuple[re.Pattern[str], str]]:
    from rmsweb.suites.miniwob_html import html_root

    text = (html_root() / _TURK_FILE).read_text(encoding="utf-8")
    data = json.loads(text[text.index("{") : text.rindex("}") + 1])
    out = []
    for kind, splits in data.items():
        for t in splits["train"]:
            p = re.escape(t.strip())
            for slot, group in (("NAME", "name"), ("DEST", "dest"), ("MSG", "msg")):
                p = p.replace(slot, f"(?P<{group}>.+?)", 1)
            out.append((re.compile(p), _TURK_ACTION[kind], len(t)))
    # the most literal templates first
    return [(p, a) for p, a, _ in sorted(out, key=lambda x: -x[2])]


def parse_turk(instruction: str) -> list[tuple[str, str, str]]:
    """Every (sender, action, argument) reading of an nl-turk instruction."""
    out = []
    for p, action in _turk_patterns():
        m = p.fullmatch(instruction.strip())
        if not m:
            continue
        g = m.groupdict()
        arg = g.get("dest") or g.get("msg") or ""
        reading = (g["name"], action, arg)
        if reading not in out:
            out.append(reading)
    return out


def email_inbox_nl_turk(
    instruction: str, obs: Observation, history: Sequence[HistoryItem]
) -> list[Action]:
    # A template may swap the names' roles ("Find the email from DEST and forward it to
    # NAME."), so an instruction can read two ways: take the first reading whose sender
    # is on the page (an inbox sender, or the open email's).
    readings = parse_turk(instruction)
    if not readings:
        return []
    shown = {e.name for e in elements(obs) if e.role == "link"} | {_open_sender(obs)}
    shown |= {e.name for e in elements(obs) if e.role == "text"}
    fitting = [r for r in readings if r[0] in shown] or readings
    return _solve_inbox(*fitting[0], obs)


EXPERT_FUNCTIONS.update(
    {
        "email-inbox-nl-turk": email_inbox_nl_turk,
        "email-inbox-forward-nl-turk": email_inbox_nl_turk,
    }
)
