"""Which request parameters a chat model takes, read from its name.

OpenAI's reasoning models (o1, o3, o4-mini, gpt-5 and their dated or -mini/-pro variants)
refuse two parameters every other OpenAI-compatible server takes: `max_tokens` (HTTP 400
"Use 'max_completion_tokens' instead") and any `temperature` but the default. Their
`max_completion_tokens` also counts the hidden reasoning tokens, so a cap sized for the
visible answer (WebJudge's 512, a teacher's 256) can be spent before the model writes
a word: the reply comes back empty with finish_reason "length". OpenAI's reasoning guide
advises reserving at least 25,000 tokens for reasoning and output; that is the floor here.
The cap is a limit, not a charge: only the tokens generated are billed.

Everything else (vLLM, `transformers serve`, gpt-4o, ...) gets `max_tokens` and
`temperature` as asked. A provider prefix ("openai/o4-mini", as routers spell it) and a
date suffix ("o4-mini-2025-04-16") do not change the family.
"""

from __future__ import annotations

import re
from typing import Any

REASONING_MIN_COMPLETION_TOKENS = 25_000

# o<digit>... (o1, o3-mini, o4-mini-2025-04-16) or gpt-5... (gpt-5, gpt-5-mini, gpt-5.1),
# after an optional provider prefix.
_REASONING = re.compile(r"^(?:[\w.-]+/)*(?:o\d[\w.-]*|gpt-5[\w.-]*)$", re.IGNORECASE)


def is_reasoning_model(model: str) -> bool:
    """True for OpenAI reasoning models (see the module docstring)."""
    return bool(_REASONING.match(model.strip()))


def sampling_params(model: str, max_tokens: int, temperature: float) -> dict[str, Any]:
    """The length and sampling fields of a chat request for `model`."""
    if is_reasoning_model(model):
        return {"max_completion_tokens": max(max_tokens, REASONING_MIN_COMPLETION_TOKENS)}
    return {"max_tokens": max_tokens, "temperature": temperature}
