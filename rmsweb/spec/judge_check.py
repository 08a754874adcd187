"""Warnings about a valid spec's live judge: a judge that grades its own work.

A live suite's success is the LLM judge's verdict. When the judge is the teacher's
model, it grades the trajectories it wrote itself in collect (and decides which of them
become SFT data); when it is the policy's model (the base the policy is trained from,
or an evaluated endpoint), it grades its own kind. Such a judge is known to favour its
own outputs, and the numbers are not what a leaderboard's independent judge would give.
It is a warning, not an error (`rmsweb validate` exits 0): a rehearsal with one tiny
local model for everything is legitimate. The fix for a real run is a different judge,
e.g. o4-mini, the model the Online-Mind2Web authors recommend for WebJudge.

Models are compared by name: case-insensitive, by the last path component, so
"Qwen/Qwen3-VL-32B-Instruct" and "/models/qwen3-vl-32b-instruct" are the same model.
"""

from __future__ import annotations

from .experiment import ExperimentSpec

FIX = (
    "Fix: judge with another model, e.g. o4-mini (base_url https://api.openai.com/v1), the "
    "model the Online-Mind2Web authors recommend for WebJudge."
)


def same_model(a: str, b: str) -> bool:
    """Two model names (hub ids or paths) naming the same model."""

    def bare(name: str) -> str:
        return name.strip().rstrip("/").rsplit("/", 1)[-1].lower()

    return bare(a) == bare(b)


def self_judging(spec: ExperimentSpec) -> list[str]:
    """`key: message` warnings for a suite judge (the training suite's, or an evaluation
    suite's) that is the teacher's or a policy's model."""
    judges = [("suite.judge", getattr(spec.suite, "judge", None))] + [
        (f"eval.suites.{j}.suite.judge", ev.suite.judge)
        for j, ev in enumerate(spec.eval.suites or [])
    ]
    graded: list[tuple[str, str, str]] = []  # (key, model, whose)
    teacher = spec.collect.teacher
    if teacher.kind == "openai":
        graded.append(("collect.teacher.model", teacher.model, "the teacher's model"))
    base = getattr(spec.model, "name_or_path", None)
    if base is not None:
        graded.append(("model.name_or_path", base, "the policy's model"))
    for i, policy in enumerate(spec.eval.policies):
        if policy.kind == "openai":
            graded.append(
                (f"eval.policies.{i}.model", policy.model, f"policy {policy.name}'s model")
            )
    return [
        f"{at}.model: the judge {judge.model!r} is {whose} ({key}): it would grade "
        f"trajectories of its own model. {FIX}"
        for at, judge in judges
        if judge is not None
        for key, model, whose in graded
        if same_model(judge.model, model)
    ]
