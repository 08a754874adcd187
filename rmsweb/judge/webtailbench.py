"""WebTailBench's judge, as in the evals the bundled task file comes from.

WebTailBench's authors (Microsoft, the Fara-7B report) score with a rubric verifier that
is not published (microsoft/fara lists its "Task Verification pipeline" as coming soon),
so rmsweb's WebTailBench numbers are NOT comparable with theirs. The task file comes
from browserbase/stagehand's evals, which judge every task with a YES/NO evaluator over
the run's screenshots; rmsweb follows that, as of stagehand commit
9971a7b3d8ecca255b4548cfb9128657c053cca7 (the last before the evals moved to a rubric
verifier in f2873cda): packages/evals/tasks/bench/agent/webtailbench.ts, its
packages/evals/utils/ScreenshotCollector.ts and packages/core/lib/v3LegacyEvaluator.ts
(V3Evaluator.ask, `_evaluateWithMultipleScreenshots`), MIT:
- the question is the eval's, verbatim: did the agent complete the task, with the note
  that the agent cannot purchase or book (tests/judge pins it);
- system and user prompts are the evaluator's multi-screenshot prompts, verbatim,
  including the template's indentation, with its agent-reasoning variants (the eval
  always passes reasoning: the agent's final message, or "no reasoning available,
  agent potentially hit step limit");
- screenshots as the ScreenshotCollector keeps them (`select_frames`): the first frame
  (its "initial" capture) always; each later frame only if it is no near-duplicate of
  the last frame kept (MSE of 400x300 RGB >= 30, then a global SSIM of 400x300 greyscale
  < 0.75); the final page (its "final" capture at stop()) always, duplicate or not; at
  most 8 (maxScreenshots), the oldest dropped first. Then scaled to 70% (its
  imageResize(..., 0.7)), as PNG;
- "Today's date is ..." is the date the agent ran, in en-US M/D/YYYY as
  `toLocaleDateString()` prints it, so a rerun of the judge sends the same prompt;
- the verdict is the JSON {"evaluation": "YES"|"NO", "reasoning": ...}; YES is success.
Departures: the collector captures every 3 s of wall time; rmsweb's frames are the page
at each step and after the last action (the runner's screenshots), deduplicated the same
way. Images are compared and scaled with Pillow, not sharp (libvips): its resize to
400x300 crops to cover as sharp's default fit does, with Lanczos, but pixel values and
greyscale weights differ slightly, and imageResize's 256-colour palette PNG is not
reproduced. Stagehand asks its LLM client for the JSON through a response schema; rmsweb
sends no schema (not every OpenAI-compatible server takes one) and parses the reply: a
JSON object with "evaluation", else an "evaluation: YES|NO" line, else a reply that is
just YES or NO; anything else is asked again, then a judge failure (stagehand's INVALID).
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
LAST_K = 8  # ScreenshotCollector maxScreenshots
SCALE = 0.7
# ScreenshotCollector's near-duplicate test against the last frame kept
MSE_THRESHOLD = 30.0  # below: a duplicate
SSIM_THRESHOLD = 0.75  # MSE above, SSIM at least this: still a duplicate
COMPARE_SIZE = (400, 300)
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
    shots = [scaled(png) for png in select_frames(inp.screenshots, last_k)]
    user = USER_PROMPT.format(
        question=QUESTION.format(task=inp.task), reasoning=reasoning, n=len(shots)
    )
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": [text_part(user), *(image_part(s) for s in shots)]},
    ]


def select_frames(screenshots: list[bytes], max_frames: int = LAST_K) -> list[bytes]:
    """The frames the ScreenshotCollector would hand the evaluator (module docstring):
    first and final always, near-duplicates of the last kept frame dropped, at most
    `max_frames`, oldest out first."""
    kept: list[bytes] = []
    last: Any = None  # the last kept frame, as compared
    for i, png in enumerate(screenshots):
        frame = _comparable(png)
        edge = i == 0 or i == len(screenshots) - 1  # "initial" and "final" captures
        if edge or last is None or not near_duplicate(last, frame):
            kept.append(png)
            last = frame
            if len(kept) > max_frames:
                kept.pop(0)
    return kept


def near_duplicate(a: Any, b: Any) -> bool:
    """ScreenshotCollector's test on two `_comparable` frames: MSE < 30, else SSIM >= 0.75."""
    return mse(a[0], b[0]) < MSE_THRESHOLD or ssim(a[1], b[1]) >= SSIM_THRESHOLD


def _comparable(png: bytes) -> tuple[Any, Any]:
    """(RGB, greyscale) float arrays of the frame resized to 400x300, cropped to cover
    (sharp's resize({width: 400, height: 300}) default fit)."""
    import numpy as np
    from PIL import Image, ImageOps

    with Image.open(io.BytesIO(png)) as img:
        rgb = ImageOps.fit(img.convert("RGB"), COMPARE_SIZE, Image.Resampling.LANCZOS)
    return np.asarray(rgb, dtype=np.float64), np.asarray(rgb.convert("L"), dtype=np.float64)


def mse(a: Any, b: Any) -> float:
    """calculateMSE: the mean squared difference over every channel value."""
    return float(((a - b) ** 2).mean())


def ssim(a: Any, b: Any) -> float:
    """calculateSSIM: one global SSIM over the greyscale values (0-255), with the
    collector's constants c1 = 0.01^2 and c2 = 0.03^2 as written (not scaled by 255)."""
    c1, c2 = 0.01**2, 0.03**2
    ma, mb = a.mean(), b.mean()
    va, vb = (a * a).mean() - ma * ma, (b * b).mean() - mb * mb
    cov = (a * b).mean() - ma * mb
    num = (2 * ma * mb + c1) * (2 * cov + c2)
    return float(num / ((ma * ma + mb * mb + c1) * (va + vb + c2)))


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
