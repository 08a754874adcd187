"""Suite configs: which tasks, which seeds, and how the browser runs them."""

from __future__ import annotations

import difflib
import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from .common import SeedRange, SpecFieldError, SpecModel
from .miniwob_tasks import MINIWOB_TASKS
from .prices import TokenPrices
from .serve import VLLMServer, local_port

# Values of the bundled task files' `web_name` (WebVoyager) and `category` (WebTailBench),
# so `rmsweb validate` catches a misspelt filter before any compute is spent.
WEBVOYAGER_SITES = (
    "Allrecipes", "Amazon", "Apple", "ArXiv", "BBC News", "Booking", "Cambridge Dictionary",
    "Coursera", "ESPN", "GitHub", "Google Flights", "Google Map", "Google Search",
    "Huggingface", "Wolfram Alpha",
)  # fmt: skip
WEBTAILBENCH_CATEGORIES = (
    "shopping_head", "flights", "hotels_head", "restaurants_tail", "things_to_do", "ticketing",
    "realestate_complex", "jobs", "shopping_lists_tail", "price_comparison",
    "compositional_tasks_v2",
)  # fmt: skip


def _known(values: list[str], known: tuple[str, ...], what: str) -> list[str]:
    unknown = [v for v in values if v not in known]
    if unknown:
        hints = []
        for v in unknown:
            close = difflib.get_close_matches(v, known, n=3, cutoff=0.5)
            hints.append(f"{v!r}" + (f" (did you mean {', '.join(close)}?)" if close else ""))
        raise ValueError(f"unknown {what} " + "; ".join(hints) + f". Known: {', '.join(known)}.")
    return values


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
    navigation_timeout_s: float = Field(
        30.0,
        gt=0,
        description="How long a page may take to load before loading is stopped and the "
        "policy is told so (a slow site is the policy's problem, not an env error).",
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
    mine: SeedRange = Field(
        default_factory=lambda: SeedRange(start=200_000, count=200),
        description="Seeds the mine stage rolls the SFT policy out on (per task): its own "
        "range, disjoint from train (which SFT has memorised), val and test.",
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
        pairs = (
            ("train", "test"),
            ("train", "val"),
            ("val", "test"),
            ("train", "mine"),
            ("val", "mine"),
            ("test", "mine"),
        )
        for a, b in pairs:
            ra, rb = getattr(self, a), getattr(self, b)
            if ra.overlaps(rb):
                raise SpecFieldError(
                    b,
                    f"{a} seeds [{ra.start}, {ra.stop}) overlap {b} seeds [{rb.start}, "
                    f"{rb.stop}); each split needs seeds of its own (tuning and test stay held "
                    f"out, and mining must not replay the train seeds SFT has memorised). "
                    f"Fix: move {b}.start past the {a} range.",
                )
        return self


JudgeProtocol = Literal["suite", "webvoyager", "webjudge", "webtailbench"]


class JudgeSpec(SpecModel):
    """An LLM judge behind an OpenAI-compatible endpoint (vLLM, hosted).

    The protocol (prompts, screenshots shown, verdict parsing) is the benchmark's own:
    WebVoyager's auto-evaluation, Online-Mind2Web's WebJudge, WebTailBench's YES/NO
    evaluator. Fields left null take the protocol's published value.
    """

    protocol: JudgeProtocol = Field(
        "suite",
        description="Judge protocol; suite: the benchmark's own (webvoyager, webjudge for "
        "online_mind2web, webtailbench).",
    )
    base_url: str = Field(
        "http://127.0.0.1:8000/v1", description="OpenAI-compatible endpoint of the judge."
    )
    model: str = Field("Qwen/Qwen3-VL-32B-Instruct", description="Model name sent to the endpoint.")
    api_key_env: str = Field(
        "OPENAI_API_KEY",
        pattern=r"^[A-Z_][A-Z0-9_]*$",
        description="Name of the environment variable holding the key (the key itself is never stored).",
    )
    last_k_screenshots: int | None = Field(
        None,
        ge=1,
        description="Screenshots shown to the judge (null: the protocol's own: WebVoyager 15, "
        "WebTailBench 8, WebJudge every screenshot, scored one by one).",
    )
    score_threshold: int = Field(
        3, ge=1, le=5, description="WebJudge: keep screenshots scored at least this (1-5)."
    )
    max_images: int = Field(
        50, ge=1, description="WebJudge: at most this many kept screenshots in the verdict call."
    )
    max_tokens: int | None = Field(
        None,
        ge=1,
        description="Completion token limit per call (null: the protocol's own: WebVoyager "
        "1000, WebJudge 512, WebTailBench 1024).",
    )
    temperature: float = Field(0.0, ge=0, le=2, description="Sampling temperature (0: greedy).")
    seed: int | None = Field(
        42, description="Seed sent with each request (WebVoyager's script sends 42); null: none."
    )
    concurrency: int = Field(8, ge=1, le=256, description="Judge requests in flight at once.")
    timeout_s: float = Field(120.0, gt=0, description="Per-request timeout.")
    max_http_retries: int = Field(
        4, ge=0, le=20, description="Retries with backoff on 429/5xx and connection errors."
    )
    cache: bool = Field(
        True,
        description="Reuse a stored answer when the same inputs (model, prompt, images) come "
        "again, so a rerun costs nothing.",
    )
    prices: TokenPrices = Field(
        default_factory=TokenPrices, description="Judge token prices, for cost per task."
    )

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


LIVE_BROWSER_DEFAULTS: dict[str, Any] = {"screenshots": True, "episode_timeout_s": 600.0}


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
    val_fraction: float = Field(
        0.1,
        ge=0,
        lt=1,
        description="Share of tasks for validation (same hash, disjoint from test and train; "
        "0: no val split). The rest is train.",
    )
    max_steps: int = Field(15, ge=1, le=200, description="Step limit of one episode.")
    max_wall_s: float = Field(
        300.0,
        gt=0,
        description="Wall-time budget of one episode: past it the episode ends and is judged "
        "as it stands (a budget, not an environment error).",
    )
    allow_private_network: bool = Field(
        False,
        description="Let pages reach private, loopback and link-local addresses (off: the "
        "safety policy refuses them; file:, chrome:, data:, javascript: stay refused).",
    )
    private_origins: list[str] = Field(
        default_factory=list,
        description="Private origins pages may reach with allow_private_network off, e.g. "
        "http://127.0.0.1:8000 for a local site standing in for a live one.",
    )
    judge: JudgeSpec = Field(default_factory=JudgeSpec, description="Success judge.")
    browser: BrowserSpec = Field(
        default_factory=lambda: BrowserSpec(**LIVE_BROWSER_DEFAULTS),
        description="Browser settings (live defaults: screenshots on, episode_timeout_s 600).",
    )

    @model_validator(mode="before")
    @classmethod
    def _live_browser_defaults(cls, data: Any) -> Any:
        # A partial `browser:` section would otherwise fall back to BrowserSpec's offline
        # defaults (no screenshots, 60 s episodes) for the keys it does not set.
        if isinstance(data, dict) and isinstance(data.get("browser"), dict):
            data = {**data, "browser": {**LIVE_BROWSER_DEFAULTS, **data["browser"]}}
        return data

    @field_validator("private_origins")
    @classmethod
    def _origins(cls, origins: list[str]) -> list[str]:
        for origin in origins:
            if not re.fullmatch(r"https?://[^/\s?#]+", origin):
                raise ValueError(
                    f"{origin!r} is not an origin; write scheme://host[:port] with nothing "
                    "after it, e.g. http://127.0.0.1:8000."
                )
        return origins

    @model_validator(mode="after")
    def _budget_below_timeout(self) -> _LiveSuite:
        if self.test_fraction + self.val_fraction >= 1:
            raise SpecFieldError(
                "val_fraction",
                f"test_fraction ({self.test_fraction:g}) + val_fraction ({self.val_fraction:g}) "
                "leaves no tasks to train on. Fix: make their sum below 1.",
            )
        if self.max_wall_s >= self.browser.episode_timeout_s:
            raise SpecFieldError(
                "max_wall_s",
                f"max_wall_s ({self.max_wall_s:g}) must be below browser.episode_timeout_s "
                f"({self.browser.episode_timeout_s:g}): the budget ends an episode for the "
                "judge, the timeout treats it as a hung browser and reruns it. Fix: lower "
                "max_wall_s or raise browser.episode_timeout_s.",
            )
        if not self.browser.screenshots:
            raise SpecFieldError(
                "browser.screenshots",
                "live suites are judged from screenshots; browser.screenshots must be true.",
            )
        return self


class WebVoyagerSuite(_LiveSuite):
    """WebVoyager (643 live tasks on 15 sites; 595 cleaned), judged by a multimodal LLM."""

    kind: Literal["webvoyager"] = "webvoyager"
    cleaned: bool = Field(
        True, description="Use the cleaned 595-task file (impossible tasks dropped)."
    )

    @field_validator("sites")
    @classmethod
    def _known_sites(cls, sites: list[str]) -> list[str]:
        return _known(sites, WEBVOYAGER_SITES, "WebVoyager site")


class OnlineMind2WebSuite(_LiveSuite):
    """Online-Mind2Web (300 live tasks), judged WebJudge-style."""

    kind: Literal["online_mind2web"] = "online_mind2web"
    levels: list[Literal["easy", "medium", "hard"]] = Field(
        default_factory=lambda: ["easy", "medium", "hard"], description="Difficulty levels."
    )


class WebTailBenchSuite(_LiveSuite):
    """WebTailBench (609 live tasks in 11 categories), binary outcome."""

    kind: Literal["webtailbench"] = "webtailbench"
    categories: list[str] = Field(
        default_factory=list, description="Only these categories (empty: all)."
    )
    start_url: str = Field(
        "https://www.google.com/",
        description="Where episodes start: WebTailBench tasks name no site (stagehand's "
        "evals start from Google).",
    )

    @field_validator("categories")
    @classmethod
    def _known_categories(cls, categories: list[str]) -> list[str]:
        return _known(categories, WEBTAILBENCH_CATEGORIES, "WebTailBench category")

    @field_validator("sites")
    @classmethod
    def _no_sites(cls, sites: list[str]) -> list[str]:
        if sites:
            raise ValueError("WebTailBench tasks name no site; filter with `categories`.")
        return sites


class TaskPoolSuite(_LiveSuite):
    """A pool of live tasks a user writes or generates: one JSON object a line with
    `start_url`, `goal`, and optionally `id`, `reference_answer`, `site`, `category`
    (rmsweb/suites/task_pool.py; example: rmsweb/suites/data/task_pool/). Split by the
    same task-id hash as the benchmarks. A pool has no benchmark of its own, so no judge
    of its own: `judge.protocol` names one (default webvoyager, which reads the answer)."""

    kind: Literal["task_pool"] = "task_pool"
    tasks_file: str = Field(  # type: ignore[assignment]
        ..., description="The pool's task file (JSON lines), relative to the project root."
    )

    @model_validator(mode="before")
    @classmethod
    def _pool_judge(cls, data: Any) -> Any:
        if isinstance(data, dict):
            judge = data.get("judge")
            if judge is None:
                data = {**data, "judge": {"protocol": "webvoyager"}}
            elif isinstance(judge, dict) and "protocol" not in judge:
                data = {**data, "judge": {**judge, "protocol": "webvoyager"}}
        return data

    @model_validator(mode="after")
    def _named_protocol(self) -> TaskPoolSuite:
        if self.judge.protocol == "suite":
            raise SpecFieldError(
                "judge.protocol",
                "a task pool is no benchmark and has no judge of its own. Fix: name one "
                "(webvoyager, webjudge or webtailbench).",
            )
        return self


LiveSuiteSpec = Annotated[
    WebVoyagerSuite | OnlineMind2WebSuite | WebTailBenchSuite | TaskPoolSuite,
    Field(discriminator="kind"),
]

SuiteSpec = Annotated[
    MiniWoBSuite | WebVoyagerSuite | OnlineMind2WebSuite | WebTailBenchSuite | TaskPoolSuite,
    Field(discriminator="kind"),
]
