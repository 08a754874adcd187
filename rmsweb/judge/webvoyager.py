"""WebVoyager's auto-evaluation (He et al., 2024): one multimodal call per episode.

Source: MinorJerry/WebVoyager, evaluation/auto_eval.py (commit 5a78967; Apache-2.0),
identical in microsoft/fara webeval/benchmarks/webvoyager/gpt_eval.py. The prompts below
are that file's SYSTEM_PROMPT and USER_PROMPT verbatim (tests/judge pins them). As there:
- the judge sees the task, the agent's final answer and the last k screenshots
  (k = 15 in the authors' run_eval.sh), PNG as stored, followed by "Your verdict:";
- the user prompt says "<k> screenshots at the end" with k the configured number, also
  when the episode has fewer screenshots (the authors' script does the same);
- an episode without a final answer is NOT SUCCESS without a call;
- max_tokens 1000, temperature 0, seed 42;
- verdict: "NOT SUCCESS" in the reply -> failure; else "SUCCESS" -> success; neither ->
  unparsable (the script returns None). rmsweb asks again (client.py, judge failures);
  still neither: verdict "judge_failed", a failure with parse_ok false, counted apart
  from a judged failure.
"""

from __future__ import annotations

from typing import Any

from rmsweb.judge.client import JUDGE_FAILED, JudgeClient, image_part, text_part
from rmsweb.judge.episode import JudgeInput
from rmsweb.judge.types import JudgeOutcome

PROTOCOL = "webvoyager"
LAST_K = 15
MAX_TOKENS = 1000

SYSTEM_PROMPT = """As an evaluator, you will be presented with three primary components to assist you in your role:

1. Web Task Instruction: This is a clear and specific directive provided in natural language, detailing the online activity to be carried out. These requirements may include conducting searches, verifying information, comparing prices, checking availability, or any other action relevant to the specified web service (such as Amazon, Apple, ArXiv, BBC News, Booking etc).

2. Result Screenshots: This is a visual representation of the screen showing the result or intermediate state of performing a web task. It serves as visual proof of the actions taken in response to the instruction.

3. Result Response: This is a textual response obtained after the execution of the web task. It serves as textual result in response to the instruction.

-- You DO NOT NEED to interact with web pages or perform actions such as booking flights or conducting searches on websites.
-- You SHOULD NOT make assumptions based on information not presented in the screenshot when comparing it to the instructions.
-- Your primary responsibility is to conduct a thorough assessment of the web task instruction against the outcome depicted in the screenshot and in the response, evaluating whether the actions taken align with the given instructions.
-- NOTE that the instruction may involve more than one task, for example, locating the garage and summarizing the review. Failing to complete either task, such as not providing a summary, should be considered unsuccessful.
-- NOTE that the screenshot is authentic, but the response provided by LLM is generated at the end of web browsing, and there may be discrepancies between the text and the screenshots.
-- Note the difference: 1) Result response may contradict the screenshot, then the content of the screenshot prevails, 2) The content in the Result response is not mentioned on the screenshot, choose to believe the content.

You should elaborate on how you arrived at your final evaluation and then provide a definitive verdict on whether the task has been successfully accomplished, either as 'SUCCESS' or 'NOT SUCCESS'."""
USER_PROMPT = """TASK: <task>
Result Response: <answer>
<num> screenshots at the end: """
VERDICT_PROMPT = "Your verdict:\n"


def build_messages(inp: JudgeInput, last_k: int = LAST_K) -> list[dict[str, Any]]:
    user = (
        USER_PROMPT.replace("<task>", inp.task)
        .replace("<answer>", inp.answer or "")
        .replace("<num>", str(last_k))
    )
    images = [image_part(png) for png in inp.screenshots[-last_k:]]
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": [text_part(user), *images, text_part(VERDICT_PROMPT)]},
    ]


def parse_verdict(text: str) -> bool | None:
    """True (SUCCESS), False (NOT SUCCESS) or None (neither word): the script's rule."""
    if "NOT SUCCESS" in text:
        return False
    if "SUCCESS" in text:
        return True
    return None


async def judge(
    inp: JudgeInput,
    client: JudgeClient,
    *,
    last_k: int | None = None,
    max_tokens: int | None = None,
    **_: Any,
) -> JudgeOutcome:
    ids = {"episode_id": inp.episode_id, "task_id": inp.task_id, "protocol": PROTOCOL}
    if inp.answer is None:
        client.record(
            None, **ids, call="verdict", verdict="failure", note="no answer: NOT SUCCESS, no call"
        )
        return JudgeOutcome(PROTOCOL, success=False, parse_ok=True, reason="no answer")
    reply = await client.ask(
        build_messages(inp, last_k or LAST_K),
        max_tokens=max_tokens or MAX_TOKENS,
        valid=lambda text: parse_verdict(text) is not None,
    )
    verdict = parse_verdict(reply.text)
    client.record(
        reply,
        **ids,
        call="verdict",
        verdict=JUDGE_FAILED if verdict is None else "success" if verdict else "failure",
        parse_ok=verdict is not None,
    )
    return JudgeOutcome(
        PROTOCOL, success=bool(verdict), parse_ok=verdict is not None, reason=reply.text
    )
