"""Collect config: the teacher and the reflection-conditioned retry loop (recipe part R)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import Field, SerializationInfo, field_validator, model_serializer, model_validator

from .common import SpecFieldError, SpecModel, default_kind, omit_null
from .serve import VLLMServer, local_port

ErrorKind = Literal[
    "distractor_click",
    "wrong_field",
    "wrong_option",
    "premature_stop",
    "literal_value",
    "one_field_short",
    "wrong_label",
]
DetourKind = Literal["irrelevant_click", "scroll", "back_and_forth"]
HabitKind = Literal["inspect", "retype", "detour_open", "scroll_first"]


class OpenAIEndpoint(SpecModel):
    """An OpenAI-compatible chat endpoint (`vllm serve`, a hosted API, `transformers serve`)."""

    base_url: str = Field("http://127.0.0.1:8000/v1", description="Endpoint root, ending in /v1.")
    model: str = Field(..., min_length=1, description="Model name sent with each request.")
    api_key_env: str = Field(
        "OPENAI_API_KEY",
        pattern=r"^[A-Z_][A-Z0-9_]*$",
        description="Environment variable that holds the key; the key is never written anywhere.",
    )
    temperature: float = Field(0.0, ge=0, le=2, description="Sampling temperature.")
    max_tokens: int = Field(256, ge=1, description="Completion token limit per call.")
    concurrency: int = Field(8, ge=1, le=256, description="Requests in flight at once.")
    timeout_s: float = Field(60.0, gt=0, description="Per-request timeout.")
    max_http_retries: int = Field(
        4, ge=0, le=20, description="Retries with backoff on 429/5xx and connection errors."
    )
    serve: VLLMServer | None = Field(
        None,
        description="Start `vllm serve` for this endpoint on the node (SkyPilot task) around the "
        "stages that call it; null: the endpoint is already running somewhere.",
    )

    @model_validator(mode="after")
    def _served_locally(self) -> OpenAIEndpoint:
        if self.serve is not None:
            try:
                local_port(self.base_url)
            except ValueError as exc:
                raise SpecFieldError("base_url", str(exc)) from None
        return self


class HabitsSpec(SpecModel):
    """The teacher's habits: wasted steps it takes in the same states every time."""

    rate: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Share of the state kinds (task, step of the task, action and role of its "
        "element) in which each habit fires; where it fires it fires in every episode and "
        "attempt (a habit, not a draw). 0: no habits. Nested: the state kinds at a lower "
        "rate are among those at a higher one.",
    )
    kinds: list[HabitKind] = Field(
        default_factory=lambda: list(get_args(HabitKind)),
        min_length=1,
        description="inspect: click a field before filling or selecting it; retype: fill a "
        "field again with the same value; detour_open: click a plain-text element it does not "
        "need (a label, a heading) before acting; scroll_first: scroll down before acting "
        "(rmsweb.agents.mistaken_expert).",
    )

    @field_validator("kinds")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("a habit kind is listed twice; list each kind once.")
        return v


class ExpertTeacher(SpecModel):
    """The suite's scripted expert with a mistake model (offline suites only)."""

    kind: Literal["expert"] = "expert"
    error_rate: float = Field(
        0.0, ge=0, le=1, description="Chance per attempt of one task-breaking mistake."
    )
    detour_rate: float = Field(
        0.0, ge=0, le=1, description="Chance per attempt of redundant steps that still succeed."
    )
    persistence: float = Field(
        0.8,
        ge=0,
        le=1,
        description="Chance that a retry repeats the previous attempt's mistakes (a teacher "
        "tends to repeat itself); otherwise it draws afresh at the base rates.",
    )
    adherence: float = Field(
        0.9,
        ge=0,
        le=1,
        description="Chance that the teacher follows a reflection's note: it avoids exactly "
        "the action the note calls wrong, at the step it names. A note naming the wrong step "
        "or action does not help. 0: reflections are ignored (reflect behaves as blind).",
    )
    error_kinds: dict[ErrorKind, float] = Field(
        default_factory=lambda: dict.fromkeys(get_args(ErrorKind), 1.0),  # every kind
        min_length=1,
        description="Mistakes the teacher may make, each with its rate: its share of "
        "error_rate (weights, normalised over the kinds; 0 turns a kind off; a list gives "
        "equal shares). literal_value, one_field_short and wrong_label do not heal "
        "themselves (rmsweb.agents.mistaken_expert).",
    )

    @field_validator("error_kinds", mode="before")
    @classmethod
    def _kinds_list(cls, v: Any) -> Any:
        return dict.fromkeys(v, 1.0) if isinstance(v, list) else v

    @field_validator("error_kinds")
    @classmethod
    def _kinds_rates(cls, v: dict[str, float]) -> dict[str, float]:
        if any(w < 0 for w in v.values()) or not any(w > 0 for w in v.values()):
            raise ValueError("rates must be >= 0 with at least one above 0")
        return v

    detour_kinds: list[DetourKind] = Field(
        default_factory=lambda: ["irrelevant_click", "scroll", "back_and_forth"],
        min_length=1,
        description="Detours the teacher may take.",
    )
    habits: HabitsSpec | None = Field(
        None,
        description="Habits: wasted steps the teacher takes in the same states every time, "
        "as an LLM teacher does (the per-attempt detours of detour_rate beside them). A "
        "reflection that names a habit's step lets the teacher drop it on the retry (with "
        "probability adherence). null (the default): none.",
    )

    @model_serializer(mode="wrap")
    def _omit_unset_habits(self, handler: Any, info: SerializationInfo) -> Any:
        return omit_null(handler(self), "habits")  # specs without it dump as before


class OpenAITeacher(OpenAIEndpoint):
    """An LLM teacher; it also writes the reflections in `retry: reflect`."""

    kind: Literal["openai"] = "openai"


TeacherSpec = Annotated[ExpertTeacher | OpenAITeacher, Field(discriminator="kind")]


class CollectSpec(SpecModel):
    teacher: TeacherSpec = Field(default_factory=ExpertTeacher, description="Who acts.")
    retry: Literal["none", "blind", "reflect"] = Field(
        "reflect",
        description="none: one attempt; blind: resample on failure; reflect: retry conditioned "
        "on reflections (RMSWeb).",
    )
    max_retries: int = Field(
        2, ge=0, le=20, description="Retries after attempt 0 (0 when retry is none)."
    )
    detour_slack: float = Field(
        0.2,
        ge=0,
        description="A success with more than reference_length * (1 + detour_slack) steps is a "
        "detour and is retried; the reference is task-level (the median gold length over "
        "reference_seeds where the suite has experts, else the shortest success seen for the "
        "task), never the judged seed's own gold.",
    )
    reference_seeds: int = Field(
        5,
        ge=0,
        description="Train seeds per task on which the gold expert is played once for the "
        "task-level reference length of detours: their median gold length, the judged seed "
        "left out (a figure a system with a few demonstrations per task could have, never "
        "the judged instance's own gold). 0, or a suite without experts: the shortest "
        "success seen for the task.",
    )
    teacher_budget: int | None = Field(
        None,
        ge=1,
        description="Hard cap on attempts per task and seed (for blind and reflect alike); "
        "null: 1 + max_retries. A cap, not a cost: attempts, calls and tokens are reported.",
    )
    episodes_per_task: int | None = Field(
        None, ge=1, description="Train seeds used per task (null: all of suite.train)."
    )
    processes: int = Field(
        1,
        ge=1,
        le=64,
        description="Local processes that play the train seeds at once, each with its own "
        "browser and suite.browser.contexts contexts (one browser keeps ~1.2 cores busy). "
        "The data do not depend on it, so it is not part of the stage's identity. Ignored "
        "across SkyPilot nodes, where every node plays its share.",
    )

    @model_validator(mode="before")
    @classmethod
    def _default_teacher(cls, data: Any) -> Any:
        return default_kind(data, "teacher", "expert")

    @model_validator(mode="after")
    def _retries(self) -> CollectSpec:
        if self.retry == "none" and self.max_retries:
            raise SpecFieldError(
                "max_retries",
                f"retry is none but max_retries is {self.max_retries}; plain collection makes "
                "exactly one attempt. Fix: set max_retries: 0, or retry: blind/reflect.",
            )
        if self.teacher_budget is not None and self.teacher_budget > 1 + self.max_retries:
            raise SpecFieldError(
                "teacher_budget",
                f"teacher_budget ({self.teacher_budget}) exceeds the attempts the retry loop can "
                f"make (1 + max_retries = {1 + self.max_retries}). Fix: raise max_retries or lower "
                "teacher_budget.",
            )
        return self
