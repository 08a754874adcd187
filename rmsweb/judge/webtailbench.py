"""WebTailBench's judge, as in the evals the bundled task file comes from.

WebTailBench's authors score with a rubric verifier whose rubrics are not published
with this copy of the tasks. The copy comes from browserbase/stagehand's evals
(packages/evals/tasks/agent/webtailbench.ts, MIT), which judge every task with
stagehand's V3Evaluator.ask over the run's screenshots (packages/core/lib/
v3LegacyEvaluator.ts, `_evaluateWithMultipleScreenshots`). rmsweb follows that:
- the question is the eval's, verbatim: did the agent complete the task, with the note
  that the agent cannot purchase or book (tests/judge pins it);
- system and user prompts are the evaluator's multi-screenshot prompts, verbatim,
  including the template's indentation, with its agent-reasoning variants (the eval
  always passes reasoning: the agent's final message, or "no reasoning available,
  agent potentially hit step limit");
- screenshots: the last 8 (the eval's ScreenshotCollector keeps at most 8), scaled to
  70% (its imageResize(…, 0.7)), as PNG;
- "Today's date is …" is the date the agent ran, in en-US M/D/YYYY as
  `toLocaleDateString()` prints it, so a rerun of the judge sends the same prompt;
- the verdict is the JSON {"evaluation": "YES"|"NO", "reasoning": …}; YES is success.
Departure: stagehand asks its LLM client for that JSON through a response schema;
rmsweb sends no schema (not every OpenAI-compatible server takes one) and parses the
reply: a JSON object with "evaluation", else an "evaluation: YES|NO" line, else a reply
that is just YES or NO; anything else is a failure with parse_ok false (stagehand's
INVALID).
"""

from __future__ import annotations

import datetime as dt
import io
import json
import re
from typing import Any

from rmsweb.judge.client import JUDGE_FAILED, JudgeClient, image_part, text_part
from rmsweb.judge.episode import JudgeInput
from rmsweb.judge.types import JudgeOutcome

PROTOCOL = "webtailbench"
LAST_K = 8
SCALE = 0.7
MAX_TOKENS = 1024
NO_REASONING = "no reasoning available, agent potentially hit step limit"

QUESTION = (
    'Did the agent successfully complete this task: "{task}"? Note that the agent does not '
    "have purchasing/booking capabilities; mark as pass if the agent has successfully "
    "performed all necessary steps for the task up to the point of purchasing/booking/"
    "entering payment/user information"
)
# The evaluator's template literal, lines and indentation as written there.
SYSTEM_PROMPT = (
    "You are an expert evaluator that confidently returns YES or NO given a question and "
    "multiple screenshots showing the progression of a task.\n"
    "        {with_reasoning}\n"
    "        Analyze ALL screenshots to understand the complete journey. Look for evidence of "
    "task completion across all screenshots, not just the last one.\n"
    "        Success criteria may appear at different points in the sequence (confirmation "
    "messages, intermediate states, etc).\n"
    "        {use_reasoning}\n"
    "        Today's date is {date}"
)
WITH_REASONING = (
    "You also have access to the agent's detailed reasoning and thought process throughout "
    "the task."
)
USE_REASONING = (
    "The agent's reasoning provides crucial context about what actions were attempted, what "
    "was observed, and the decision-making process. Use this alongside the visual evidence to "
    "make a comprehensive evaluation."
)
USER_PROMPT = (
    "Question: {question}\n\nAgent's reasoning and actions throughout the task:\n{reasoning}"
    "\n\nI'm providing {n} screenshots showing the progression of the task. Please analyze "
    "both the agent's reasoning and all screenshots to determine if the task was completed "
    "successfully."
)


def us_date(day: dt.date) -> str:
    """`new Date().toLocaleDateString()` in en-US: 12/1/2026."""
    return f"{day.month}/{day.day}/{day.year}"


def build_messages(
    inp: JudgeInput, last_k: int = LAST_K, today: dt.date | None = None
) -> list[dict[str, Any]]:
    reasoning = inp.answer or NO_REASONING
    system = SYSTEM_PROMPT.format(
        with_reasoning=WITH_REASONING,
        use_reasoning=USE_REASONING,
        date=us_date(inp.date or today or dt.date.today()),
    )
    shots = [scaled(png) for png in inp.screenshots[-last_k:]]
    user = USER_PROMPT.format(
        question=QUESTION.format(task=inp.task), reasoning=reasoning, n=len(shots)
    )
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": [text_part(user), *(image_part(s) for s in shots)]},
    ]


def scaled(png: bytes, factor: float = SCALE) -> bytes:
    """The screenshot at `factor` of its size, as PNG."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as img:
        size = (max(1, round(img.width * factor)), max(1, round(img.height * factor)))
        buf = io.BytesIO()
        img.resize(size).save(buf, format="PNG")
    return buf.getvalue()


_JSON = re.compile(r"\{.*\}", re.S)
_LINE = re.compile(r"evaluation\W{0,3}\s*[:=]\s*\W{0,2}(YES|NO)\b", re.I)


def parse_evaluation(text: str) -> bool | None:
    """True (YES), False (NO) or None (INVALID)."""
    m = _JSON.search(text)
    if m:
        try:
            data = json.loads(m.group(0))
        except ValueError:
            data = None
        if isinstance(data, dict) and str(data.get("evaluation", "")).upper() in ("YES", "NO"):
            return str(data["evaluation"]).upper() == "YES"
    m = _LINE.search(text)
    if m:
        return m.group(1).upper() == "YES"
    bare = text.strip().strip(".").upper()
    return {"YES": True, "NO": False}.get(bare)


async def judge(
    inp: JudgeInput,
    client: JudgeClient,
    *,
    last_k: int | None = None,
    max_tokens: int | None = None,
    **_: Any,
) -> JudgeOutcome:
    if not inp.screenshots:
        raise ValueError(f"{inp.episode_id}: WebTailBench's judge needs screenshots")
    reply = await client.ask(
        build_messages(inp, last_k or LAST_K),
        max_tokens=max_tokens or MAX_TOKENS,
        valid=lambda text: parse_evaluation(text) is not None,
    )
    verdict = parse_evaluation(reply.text)
    client.record(
        reply,
        episode_id=inp.episode_id,
        task_id=inp.task_id,
        protocol=PROTOCOL,
        call="verdict",
        verdict=JUDGE_FAILED if verdict is None else "success" if verdict else "failure",
        parse_ok=verdict is not None,
    )
    return JudgeOutcome(
        PROTOCOL, success=bool(verdict), parse_ok=verdict is not None, reason=reply.text
    )
