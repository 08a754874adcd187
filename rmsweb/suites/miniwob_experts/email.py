"""Expert for email-inbox-forward-nl: find the sender's email and forward it."""

from __future__ import annotations

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
