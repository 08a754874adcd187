"""Mode judge: an LLM names a failed rollout's first wrong step and the right action there.

Used where no oracle labels states and no reference trajectory exists (live suites).
The judge sees what a real one could: the goal, each step's page text (cut to
`max_obs_chars`), the action taken and its error, and that the episode failed. It
answers in two lines, `Step: N` (1-based, or `none`) and `Action: <action>`.

Its verdict becomes step labels like the oracle's: the steps before the named one
were acceptable as taken, the named one accepts only the judge's action. A verdict
without a step or without a parsable action labels nothing (the rollout is counted
as unlabelled): a critical state without a reference action gives RL nothing to
reward.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rmsweb.env.actions import Action, ParseError, format_action, parse_action
from rmsweb.judge.types import ChatModel
from rmsweb.store.rows import EpisodeRecord, StepLabelRow

FIRST_ERROR_PROMPT = """\
A web agent failed this task. Find the FIRST step whose action was wrong (the
earliest step after which the task could no longer be solved directly), and the
action the agent should have taken at that step instead.

Task: {instruction}

{steps}

Reply with exactly two lines:
Step: <number of the first wrong step, or none>
Action: <the right action at that step, e.g. click(3) or fill(3, "text")>"""

_STEP = re.compile(r"\bstep\s*(?:number\s*)?[:#=]?\s*(\d+|none)\b", re.IGNORECASE)


@dataclass(frozen=True)
class FirstError:
    step: int | None  # 0-based; None: the judge named no (valid) step
    action: Action | None  # the right action there; None: none given or unparsable
    raw: str = ""
    tokens_in: int = 0
    tokens_out: int = 0


def render_steps(rec: EpisodeRecord, max_obs_chars: int) -> str:
    blocks = []
    for st in rec.steps:
        page = st.obs_text if len(st.obs_text) <= max_obs_chars else st.obs_text[:max_obs_chars]
        did = format_action(Action.from_row(st.action)) if st.action else "(unparseable output)"
        err = f" -> error: {st.env_error}" if st.env_error else ""
        blocks.append(f"Step {st.step + 1}\nPage:\n{page}\nAction taken: {did}{err}")
    return "\n\n".join(blocks) or "(no steps)"


def parse_first_error(text: str, n_steps: int) -> FirstError:
    """Read `Step: N` and `Action: ...` from a judge's reply (tolerant of extra text)."""
    m = _STEP.search(text)
    step: int | None = None
    if m and m.group(1).lower() != "none":
        n = int(m.group(1))
        step = n - 1 if 1 <= n <= n_steps else None
    action: Action | None = None
    if step is not None and re.search(r"\baction\s*:", text, re.IGNORECASE):
        parsed = parse_action(text)  # reads the text after the last "Action:"
        action = None if isinstance(parsed, ParseError) else parsed
    return FirstError(step, action, text)


async def judge_first_error(
    client: ChatModel, rec: EpisodeRecord, max_obs_chars: int = 2000
) -> FirstError:
    prompt = FIRST_ERROR_PROMPT.format(
        instruction=rec.episode.instruction, steps=render_steps(rec, max_obs_chars)
    )
    text, usage = await client.chat([{"role": "user", "content": prompt}])
    verdict = parse_first_error(text, len(rec.steps))
    return FirstError(
        verdict.step,
        verdict.action,
        text,
        int(usage.get("prompt_tokens", 0)),
        int(usage.get("completion_tokens", 0)),
    )


def first_error_labels(rec: EpisodeRecord, verdict: FirstError) -> list[StepLabelRow]:
    """Step labels from a verdict: earlier steps as taken, the named step the judge's action."""
    if verdict.step is None or verdict.action is None:
        return []
    rows = []
    for st in rec.steps[: verdict.step]:
        taken = [format_action(Action.from_row(st.action))] if st.action else []
        rows.append(StepLabelRow(rec.episode.episode_id, st.step, "judge", taken))
    rows.append(
        StepLabelRow(rec.episode.episode_id, verdict.step, "judge", [format_action(verdict.action)])
    )
    return rows
