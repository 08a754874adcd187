"""The LLM reflector: the teacher model reflects on its own attempt (openai teachers).

It sees what the rule critic sees (rmsweb.judge.critic) and no more: the goal, each
step's observation (cut to `OBS_CHARS`), output, action and error, and the outcome
(reward, success, the judge's verdict). Its text goes into the next attempt's prompt.
"""

from __future__ import annotations

from collections.abc import Sequence

from rmsweb.env.actions import Action, format_action, parse_action
from rmsweb.judge.types import ChatModel, ReflectFn, Reflection, Verdict
from rmsweb.store.rows import EpisodeRecord

OBS_CHARS = 600  # per step: enough for the elements near the action, bounded prompt size

REFLECTION_PROMPT = """\
You attempted a web task and did not solve it cleanly. Write 1-3 short sentences:
name the first wrong or unnecessary step (by its number, as "Step N: <what you did>;
<why it was wrong>"), with the element id and text, e.g.
Step 2: clicked [7] button "Cancel"; the goal asks for "Submit".

Task: {instruction}
Steps:
{steps}
Outcome: {outcome}
Earlier lessons: {earlier}"""


def outcome_text(rec: EpisodeRecord, verdict: Verdict) -> str:
    ep = rec.episode
    if not ep.success:
        text = f"failure (reward {ep.reward:g})"
        return text + (f", environment error: {ep.error}" if ep.error else "")
    text = f"success in {ep.n_steps} steps, with detours"
    if verdict.reference_length and ep.n_steps > verdict.reference_length:
        # Not the number: a reflection quotes no privileged figure.
        text += " (more steps than the task usually takes)"
    if verdict.redundant_steps:
        text += "; steps that changed nothing: " + ", ".join(
            str(s + 1) for s in verdict.redundant_steps
        )
    return text


def llm_reflector(client: ChatModel, model_name: str) -> ReflectFn:
    """The teacher model reflects on its own attempt."""

    async def reflect(rec: EpisodeRecord, verdict: Verdict, earlier: Sequence[str]) -> Reflection:
        ep = rec.episode
        lines = []
        for st in rec.steps:
            parsed = parse_action(st.output_text)
            shown = format_action(parsed) if isinstance(parsed, Action) else st.output_text[:80]
            err = f" -> error: {st.env_error}" if st.env_error else ""
            page = st.obs_text[:OBS_CHARS].replace("\n", "\n    ")
            lines.append(f"Step {st.step + 1}: page:\n    {page}\n  action: {shown}{err}")
        prompt = REFLECTION_PROMPT.format(
            instruction=ep.instruction,
            steps="\n".join(lines) or "(none)",
            outcome=outcome_text(rec, verdict),
            earlier="; ".join(earlier) or "none",
        )
        text, usage = await client.chat([{"role": "user", "content": prompt}])
        return Reflection(
            ep.attempt,
            " ".join(text.split())[:600],
            model_name,
            int(usage.get("prompt_tokens", 0)),
            int(usage.get("completion_tokens", 0)),
        )

    return reflect
