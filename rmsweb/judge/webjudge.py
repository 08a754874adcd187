# ruff: noqa: W291 -- the published prompts are kept verbatim, trailing spaces and all
"""Online-Mind2Web's WebJudge (Xue et al., 2025): three kinds of calls per episode.

Source: OSU-NLP-Group/Online-Mind2Web src/methods/webjudge_online_mind2web.py and
src/utils.py (as vendored, unchanged, in microsoft/fara webeval/benchmarks/om2w/impl at
commit 3f3f1fd82cc2769a6630932d1670bac7349f4a42; MIT). The prompts below are that file's,
verbatim (tests/judge pins them). As there:
1. key points: the task alone -> a numbered list of its explicit requirements; the
   text after "**Key Points**:" (else after "Key Points:") is kept, blank lines
   dropped, lines left-stripped;
2. one call per screenshot (all of them, in order, concurrently): task, key points
   and the screenshot as JPEG (detail "high") -> reasoning and a 1-5 score; the score
   is the first digit 1-5 after the first "Score", 0 when there is none; the
   "reasoning" is the first paragraph after the last "**Reasoning**:";
3. the verdict: task, key points, the action history (numbered; the final answer is
   not in it) and the screenshots scored >= score_threshold (3) with their reasoning,
   at most 50 -> "Status: success|failure"; success when "success" appears in the
   lower-cased text after the first "status:", failure otherwise (also when there is
   no "status:", which rmsweb marks parse_ok false).
Judge failures (client.py): an empty key-point list, a screenshot reply without a
score and a verdict without "status:" are asked again. Key points still empty: the
episode's verdict is "judge_failed" and no further call is made; a screenshot still
unscored gets 0 (the reference's value) and the episode goes on; a verdict still without
"status:" is "judge_failed". Both are failures, counted apart from judged ones.
Departures: the reference's generate() default max_tokens (512) is used for all three
(a reasoning model gets a larger completion cap: rmsweb.agents.model_family);
kept screenshots go to the verdict call as JPEG labelled image/jpeg (the reference
sends the same JPEG bytes labelled image/png); a screenshot whose reply has no score
contributes no reasoning (the reference may reuse the previous screenshot's).
"""

from __future__ import annotations

import asyncio
import io
import re
from typing import Any

from rmsweb.judge.client import JUDGE_FAILED, JudgeClient, image_part, text_part
from rmsweb.judge.episode import JudgeInput
from rmsweb.judge.types import JudgeOutcome

PROTOCOL = "webjudge"
MAX_TOKENS = 512
SCORE_THRESHOLD = 3
MAX_IMAGES = 50

KEY_POINTS_SYSTEM = """You are an expert tasked with analyzing a given task to identify the key points explicitly stated in the task description.

**Objective**: Carefully analyze the task description and extract the critical elements explicitly mentioned in the task for achieving its goal.

**Instructions**:
1. Read the task description carefully.
2. Identify and extract **key points** directly stated in the task description.
   - A **key point** is a critical element, condition, or step explicitly mentioned in the task description.
   - Do not infer or add any unstated elements.
   - Words such as "best," "highest," "cheapest," "latest," "most recent," "lowest," "closest," "highest-rated," "largest," and "newest" must go through the sort function(e.g., the key point should be "Filter by highest").

**Respond with**:
- **Key Points**: A numbered list of the explicit key points for completing this task, one per line, without explanations or additional details."""
KEY_POINTS_USER = """Task: {task}"""

IMAGE_SYSTEM = """You are an expert evaluator tasked with determining whether an image contains information about the necessary steps to complete a task.

**Objective**: Analyze the provided image and decide if it shows essential steps or evidence required for completing the task. Use your reasoning to explain your decision before assigning a score.

**Instructions**:
1. Provide a detailed description of the image, including its contents, visible elements, text (if any), and any notable features.

2. Carefully examine the image and evaluate whether it contains necessary steps or evidence crucial to task completion:  
- Identify key points that could be relevant to task completion, such as actions, progress indicators, tool usage, applied filters, or step-by-step instructions.  
- Does the image show actions, progress indicators, or critical information directly related to completing the task?  
- Is this information indispensable for understanding or ensuring task success?
- If the image contains partial but relevant information, consider its usefulness rather than dismissing it outright.

3. Provide your response in the following format:  
- **Reasoning**: Explain your thought process and observations. Mention specific elements in the image that indicate necessary steps, evidence, or lack thereof.  
- **Score**: Assign a score based on the reasoning, using the following scale:  
    - **1**: The image does not contain any necessary steps or relevant information.  
    - **2**: The image contains minimal or ambiguous information, unlikely to be essential.  
    - **3**: The image includes some relevant steps or hints but lacks clarity or completeness.  
    - **4**: The image contains important steps or evidence that are highly relevant but not fully comprehensive.  
    - **5**: The image clearly displays necessary steps or evidence crucial for completing the task.

Respond with:  
1. **Reasoning**: [Your explanation]  
2. **Score**: [1-5]"""
IMAGE_USER = """**Task**: {task}

**Key Points for Task Completion**: {key_points}

The snapshot of the web page is shown in the image."""

FINAL_SYSTEM = """You are an expert in evaluating the performance of a web navigation agent. The agent is designed to help a human user navigate a website to complete a task. Given the user's task, the agent's action history, key points for task completion, some potentially important web pages in the agent's trajectory and their reasons, your goal is to determine whether the agent has completed the task and achieved all requirements.

Your response must strictly follow the following evaluation criteria!
*Important Evaluation Criteria*:
1: The filtered results must be displayed correctly. If filters were not properly applied (i.e., missing selection, missing confirmation, or no visible effect in results), the task is not considered successful.
2: You must carefully check whether these snapshots and action history meet these key points. Ensure that specific filter conditions, such as "best," "highest," "cheapest," "latest," "most recent," "lowest," "closest," "highest-rated," "largest," and "newest" are correctly applied using the filter function(e.g., sort function).
3: Certain key points or requirements should be applied by the filter. Otherwise, a search with all requirements as input will be deemed a failure since it cannot guarantee that all results meet the requirements!
4: If the task requires filtering by a specific range of money, years, or the number of beds and bathrooms, the applied filter must exactly match the given requirement. Any deviation results in failure. To ensure the task is successful, the applied filter must precisely match the specified range without being too broad or too narrow.
Examples of Failure Cases:
- If the requirement is less than $50, but the applied filter is less than $25, it is a failure.
- If the requirement is $1500-$2500, but the applied filter is $2000-$2500, it is a failure.
- If the requirement is $25-$200, but the applied filter is $0-$200, it is a failure.
- If the required years are 2004-2012, but the filter applied is 2001-2012, it is a failure.
- If the required years are before 2015, but the applied filter is 2000-2014, it is a failure.
- If the task requires exactly 2 beds, but the filter applied is 2+ beds, it is a failure.
5: Some tasks require a submission action or a display of results to be considered successful.
6: If the retrieved information is invalid or empty(e.g., No match was found), but the agent has correctly performed the required action, it should still be considered successful.
7: If the current page already displays all available items, then applying a filter is not necessary. As long as the agent selects items that meet the requirements (e.g., the cheapest or lowest price), the task is still considered successful.

*IMPORTANT*
Format your response into two lines as shown below:

Thoughts: <your thoughts and reasoning process based on double-checking each key points and the evaluation criteria>
Status: "success" or "failure"
"""
FINAL_USER = """User Task: {task}

Key Points: {key_points}

Action History:
{last_actions}

The potentially important snapshots of the webpage in the agent's trajectory and their reasons:
{thoughts}"""
FINAL_USER_NO_IMAGES = """User Task: {task}

Key Points: {key_points}

Action History:
{last_actions}"""


def key_points_messages(task: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": KEY_POINTS_SYSTEM},
        {"role": "user", "content": [text_part(KEY_POINTS_USER.format(task=task))]},
    ]


def parse_key_points(text: str) -> tuple[str, bool]:
    """The key-point list from a key-points reply, and whether it had the asked-for
    "**Key Points**:" header."""
    text = text.replace("\n\n", "\n")
    ok = "**Key Points**:" in text
    body = text.split("**Key Points**:")[1] if ok else text.split("Key Points:")[-1]
    return "\n".join(line.lstrip() for line in body.splitlines()), ok


def image_messages(task: str, key_points: str, jpeg: bytes) -> list[dict[str, Any]]:
    user = IMAGE_USER.format(task=task, key_points=key_points)
    return [
        {"role": "system", "content": IMAGE_SYSTEM},
        {
            "role": "user",
            "content": [text_part(user), image_part(jpeg, "image/jpeg", detail="high")],
        },
    ]


def parse_image_score(text: str) -> tuple[int, str]:
    """(score 1-5, reasoning) from a screenshot reply; (0, "") when it has no score."""
    if "Score" not in text:
        return 0, ""
    digits = re.findall(r"[1-5]", text.split("Score")[1])
    if not digits:
        return 0, ""
    thought = text.split("**Reasoning**:")[-1].strip().lstrip("\n").split("\n\n")[0]
    return int(digits[0]), thought.replace("\n", " ")


def final_messages(
    task: str, key_points: str, actions: list[str], kept: list[tuple[bytes, str]]
) -> list[dict[str, Any]]:
    """The verdict request; `kept` holds (JPEG, reasoning) of the kept screenshots."""
    history = "\n".join(f"{i + 1}. {a}" for i, a in enumerate(actions))
    thoughts = "\n".join(f"{i + 1}. {t}" for i, t in enumerate(t for _, t in kept if t))
    template = FINAL_USER if kept else FINAL_USER_NO_IMAGES
    text = template.format(
        task=task, key_points=key_points, last_actions=history, thoughts=thoughts
    )
    images = [image_part(jpeg, "image/jpeg", detail="high") for jpeg, _ in kept]
    return [
        {"role": "system", "content": FINAL_SYSTEM},
        {"role": "user", "content": [text_part(text), *images]},
    ]


def parse_status(text: str) -> tuple[bool, bool]:
    """(success, parse_ok) from the verdict reply."""
    lower = text.lower()
    if "status:" not in lower:
        return False, False
    return "success" in lower.split("status:")[1], True


def to_jpeg(png: bytes) -> bytes:
    """The screenshot as the reference sends it: RGB JPEG (PIL's default quality)."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as img:
        buf = io.BytesIO()
        img.convert("RGB").save(buf, format="JPEG")
    return buf.getvalue()


async def judge(
    inp: JudgeInput,
    client: JudgeClient,
    *,
    score_threshold: int = SCORE_THRESHOLD,
    max_images: int = MAX_IMAGES,
    max_tokens: int | None = None,
    **_: Any,
) -> JudgeOutcome:
    ids = {"episode_id": inp.episode_id, "task_id": inp.task_id, "protocol": PROTOCOL}
    limit = max_tokens or MAX_TOKENS

    reply = await client.ask(
        key_points_messages(inp.task),
        max_tokens=limit,
        valid=lambda text: bool(parse_key_points(text)[0].strip()),
    )
    key_points, ok = parse_key_points(reply.text)
    if not key_points.strip():  # nothing to judge against: no further calls
        client.record(reply, **ids, call="key_points", verdict=JUDGE_FAILED, parse_ok=False)
        return JudgeOutcome(PROTOCOL, success=False, parse_ok=False, reason=reply.text)
    client.record(reply, **ids, call="key_points", parse_ok=ok)

    jpegs = [to_jpeg(png) for png in inp.screenshots]
    replies = await asyncio.gather(
        *(
            client.ask(
                image_messages(inp.task, key_points, j),
                max_tokens=limit,
                valid=lambda text: parse_image_score(text)[0] > 0,
            )
            for j in jpegs
        )
    )
    kept: list[tuple[bytes, str]] = []
    scores = []
    for i, (jpeg, r) in enumerate(zip(jpegs, replies, strict=True)):
        score, thought = parse_image_score(r.text)
        scores.append(score)
        client.record(r, **ids, call="image_score", index=i, score=score, parse_ok=score > 0)
        if score >= score_threshold:
            kept.append((jpeg, thought))
    kept = kept[:max_images]

    reply = await client.ask(
        final_messages(inp.task, key_points, inp.actions, kept),
        max_tokens=limit,
        valid=lambda text: parse_status(text)[1],
    )
    success, ok = parse_status(reply.text)
    verdict = JUDGE_FAILED if not ok else "success" if success else "failure"
    client.record(reply, **ids, call="final", verdict=verdict, parse_ok=ok)
    return JudgeOutcome(
        PROTOCOL,
        success=success,
        parse_ok=ok,
        reason=reply.text,
        details={"key_points": key_points, "scores": scores, "kept": len(kept)},
    )
