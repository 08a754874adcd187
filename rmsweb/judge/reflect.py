"""Reflectors: a short plain-language reflection on an attempt that was not clean.

- `rule_reflector` diffs the trajectory against the oracle's labels in plain language
  (offline suites);
- `llm_reflector` asks the teacher model itself (openai teachers).
"""

from __future__ import annotations

from collections.abc import Sequence

from rmsweb.env.actions import Action, format_action, parse_action
from rmsweb.env.types import Observation
from rmsweb.judge.oracle import OracleLabels
from rmsweb.judge.types import ChatModel, ReflectFn, Reflection, Verdict
from rmsweb.store.rows import EpisodeRecord


def describe(obs: Observation, target: str | None) -> str:
    el = obs.elements.get(target or "")
    return f'{el.role} "{el.name}"' if el else "an element"


def rule_reflector(labels: OracleLabels) -> ReflectFn:
    """Plain-language diff of the trajectory against the expert's labels."""

    async def reflect(rec: EpisodeRecord, verdict: Verdict, earlier: Sequence[str]) -> Reflection:
        ep = rec.episode
        notes: list[str] = []
        for st in rec.steps:
            if st.step not in verdict.redundant_steps:
                continue
            label = labels.get(ep.task_id, ep.seed, ep.attempt, st.step)
            if label is None:
                continue
            obs = label.observation
            did = (
                format_action(Action.from_row(st.action)) if st.action else "an unparseable output"
            )
            acted = describe(obs, st.action.target if st.action else None)
            if label.acceptable:
                right = label.acceptable[0]
                should = f"{format_action(right)} ({describe(obs, right.target)})"
                if st.action and st.action.type in ("stop", "answer"):
                    what = f"stopped with {did} although the task was not done"
                elif st.action and st.action.target:
                    what = f"did {did} on {acted}"
                else:
                    what = f"did {did}"
                notes.append(f"Step {st.step + 1}: {what}; the right action was {should}.")
            else:
                notes.append(f"Step {st.step + 1}: {did} was not needed.")
        if not ep.success:
            outcome = "The attempt failed"
            if ep.error:
                outcome += f" (environment error: {ep.error})"
        else:
            outcome = f"The attempt succeeded in {ep.n_steps} steps but took detours"
        text = outcome + ". " + (" ".join(notes) if notes else "Follow the task more directly.")
        return Reflection(ep.attempt, text, "rule")

    return reflect


REFLECTION_PROMPT = """\
You attempted a web task and did not solve it cleanly. Write 1-3 short sentences:
name the first wrong or unnecessary step (by its number, as "Step N") and what to do
instead. Be concrete (element ids and names).

Task: {instruction}
Steps:
{steps}
Outcome: {outcome}
Earlier lessons: {earlier}"""


def llm_reflector(client: ChatModel, model_name: str) -> ReflectFn:
    """The teacher model reflects on its own attempt (openai teachers)."""

    async def reflect(rec: EpisodeRecord, verdict: Verdict, earlier: Sequence[str]) -> Reflection:
        ep = rec.episode
        lines = []
        for st in rec.steps:
            parsed = parse_action(st.output_text)
            shown = format_action(parsed) if isinstance(parsed, Action) else st.output_text[:80]
            err = f" -> error: {st.env_error}" if st.env_error else ""
            lines.append(f"Step {st.step + 1}: {shown}{err}")
        outcome = "success with detours" if ep.success else "failure"
        prompt = REFLECTION_PROMPT.format(
            instruction=ep.instruction,
            steps="\n".join(lines) or "(none)",
            outcome=outcome,
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
