"""Suite configs: which tasks, which seeds, and how the browser runs them."""

from __future__ import annotations

import difflib
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from .common import SeedRange, SpecFieldError, SpecModel
from .miniwob_tasks import MINIWOB_TASKS
from .serve import VLLMServer, local_port


class BrowserSpec(SpecModel):
    """How episodes drive Chromium. One browser, `contexts` isolated contexts."""

    contexts: int = Field(
        2, ge=1, le=64, description="Parallel browser contexts (episodes in flight)."
    )
    screenshots: bool = Field(
        False, description="Capture a PNG per step (needed by VL models and LLM judges)."
    )
    set_of_marks: bool = Field(
        False, description="Draw element-id boxes on screenshots (set-of-marks prompting)."
    )
    viewport_width: int = Field(1024, ge=160, le=4096, description="Viewport width in px.")
    viewport_height: int = Field(768, ge=160, le=4096, description="Viewport height in px.")
    action_timeout_s: float = Field(
        5.0, gt=0, description="Timeout of one browser action before it counts as an env error."
    )
    episode_timeout_s: float = Field(
        60.0, gt=0, description="Wall-clock limit of one episode before it is an env error."
    )
    max_env_retries: int = Field(
        2,
        ge=0,
        le=10,
        description="Reruns of an episode that hit an environment error (crash, hang).",
    )


class MiniWoBSuite(SpecModel):
    """The offline MiniWoB++ suite, served from the `miniwob` package on 127.0.0.1."""

    kind: Literal["miniwob"] = "miniwob"
    tasks: list[str] = Field(
        default_factory=lambda: ["click-button", "click-link", "enter-text"],
        min_length=1,
        description="MiniWoB task names (e.g. click-button); `rmsweb suite list miniwob` lists all.",
    )
    train: SeedRange = Field(
        default_factory=lambda: SeedRange(start=0, count=100),
        description="Seeds used by collect, mine and rl (per task).",
    )
    val: SeedRange = Field(
        default_factory=lambda: SeedRange(start=50_000, count=10),
        description="Validation seeds (per task): hyperparameters and checkpoint choice read "
        "these, never test. Disjoint from train and test.",
    )
    test: SeedRange = Field(
        default_factory=lambda: SeedRange(start=100_000, count=50),
        description="Held-out seeds used by eval (per task); disjoint from train and val. "
        "Read once per reported number.",
    )
    max_steps: int = Field(10, ge=1, le=200, description="Step limit of one episode.")
    browser: BrowserSpec = Field(default_factory=BrowserSpec, description="Browser settings.")

    @field_validator("tasks")
    @classmethod
    def _known_tasks(cls, tasks: list[str]) -> list[str]:
        unknown = [t for t in tasks if t not in MINIWOB_TASKS]
        if unknown:
            hints = []
            for t in unknown:
                close = difflib.get_close_matches(t, MINIWOB_TASKS, n=3, cutoff=0.6)
                hints.append(f"{t!r}" + (f" (did you mean {', '.join(close)}?)" if close else ""))
            raise ValueError(
                "unknown MiniWoB task " + "; ".join(hints) + ". `rmsweb suite list` lists them."
            )
        if len(set(tasks)) != len(tasks):
            raise ValueError("a task is listed twice; list each task once.")
        return tasks

    @model_validator(mode="after")
    def _disjoint_splits(self) -> MiniWoBSuite:
        pairs = (("train", "test"), ("train", "val"), ("val", "test"))
        for a, b in pairs:
            ra, rb = getattr(self, a), getattr(self, b)
            if ra.overlaps(rb):
                raise SpecFieldError(
                    b,
                    f"{a} seeds [{ra.start}, {ra.stop}) overlap {b} seeds [{rb.start}, "
                    f"{rb.stop}); tuning and held-out evaluation need disjoint seeds. Fix: move "
                    f"{b}.start past the {a} range.",
                )
        return self


class JudgeSpec(SpecModel):
    """An LLM judge behind an OpenAI-compatible endpoint (vLLM, hosted)."""

    base_url: str = Field(
        "http://127.0.0.1:8000/v1", description="OpenAI-compatible endpoint of the judge."
    )
    model: str = Field("Qwen/Qwen3-VL-32B-Instruct", description="Model name sent to the endpoint.")
    api_key_env: str = Field(
        "OPENAI_API_KEY",
        pattern=r"^[A-Z_][A-Z0-9_]*$",
        description="Name of the environment variable holding the key (the key itself is never stored).",
    )
    last_k_screenshots: int = Field(
        15, ge=0, description="Screenshots shown to the judge (WebVoyager's script uses 15)."
    )
    timeout_s: float = Field(120.0, gt=0, description="Per-request timeout.")
    serve: VLLMServer | None = Field(
        None,
        description="Start `vllm serve` for the judge on the node (SkyPilot task) around the "
        "stages that judge; null: the endpoint is already running somewhere.",
    )

    @model_validator(mode="after")
    def _served_locally(self) -> JudgeSpec:
        if self.serve is not None:
            try:
                local_port(self.base_url)
            except ValueError as exc:
                raise SpecFieldError("base_url", str(exc)) from None
        return self


class _LiveSuite(SpecModel):
    tasks_file: str | None = Field(
        None, description="Task file; null uses the copy bundled with rmsweb."
    )
    sites: list[str] = Field(
        default_factory=list, description="Only tasks on these sites (empty: all)."
    )
    limit: int | None = Field(None, ge=1, description="At most this many tasks (after filters).")
    test_fraction: float = Field(
        0.5, gt=0, lt=1, description="Share of tasks held out for eval (split by task-id hash)."
    )
    max_steps: int = Field(15, ge=1, le=200, description="Step limit of one episode.")
    judge: JudgeSpec = Field(default_factory=JudgeSpec, description="Success judge.")
    browser: BrowserSpec = Field(
        default_factory=lambda: BrowserSpec(screenshots=True, episode_timeout_s=600.0),
        description="Browser settings.",
    )


class WebVoyagerSuite(_LiveSuite):
    """WebVoyager (643 live tasks on 15 sites), judged by a multimodal LLM."""

    kind: Literal["webvoyager"] = "webvoyager"
    cleaned: bool = Field(
        True, description="Use the cleaned 595-task file (impossible tasks dropped)."
    )


class OnlineMind2WebSuite(_LiveSuite):
    """Online-Mind2Web (300 live tasks), judged WebJudge-style."""

    kind: Literal["online_mind2web"] = "online_mind2web"
    levels: list[Literal["easy", "medium", "hard"]] = Field(
        default_factory=lambda: ["easy", "medium", "hard"], description="Difficulty levels."
    )


class WebTailBenchSuite(_LiveSuite):
    """WebTailBench (609 live tasks in 11 segments), binary outcome."""

    kind: Literal["webtailbench"] = "webtailbench"
    categories: list[str] = Field(
        default_factory=list, description="Only these segments (empty: all)."
    )


SuiteSpec = Annotated[
    MiniWoBSuite | WebVoyagerSuite | OnlineMind2WebSuite | WebTailBenchSuite,
    Field(discriminator="kind"),
]
