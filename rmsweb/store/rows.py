"""Typed rows of the run tables (DESIGN.md §4); the same rows feed reports, mining and training.

Plain dataclasses, no heavy imports: the episode runner, the stages and the
store all speak these. `rmsweb.store.schemas` maps each to an Arrow schema.
Additions to DESIGN §4 are marked "(added)".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from rmsweb.env.actions import ActionRow
from rmsweb.env.types import HistoryItem


@dataclass(slots=True)
class EpisodeRow:
    episode_id: str
    run: str  # e.g. "collect/miniwob-cpu"
    stage: str  # collect, mine, eval, ...
    suite: str
    task_id: str
    seed: int
    split: str
    policy: str
    attempt: int = 0
    success: bool = False
    reward: float = 0.0
    n_steps: int = 0
    answer: str | None = None
    error: str | None = None  # environment error text; None for a clean episode
    started_at: float = 0.0  # unix seconds
    wall_s: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    instruction: str = ""  # (added) the task utterance the policy saw
    env_retries: int = 0  # (added) reruns after environment errors
    # (added) the judge's task-level reference length (collect): the median gold length
    # over the task's reference seeds, the judged seed left out, where the suite has
    # experts, else the shortest success seen (rmsweb.judge.reference)
    reference_steps: int | None = None
    category: str | None = None  # (added) live tasks: site, level or segment (reports group by it)
    cost_usd: float | None = None  # (added) the policy's tokens at its spec prices (eval)
    # (added) the exception that ended the episode, when the policy (or the job around it)
    # raised: "ValueError: ... (at file:line)"; None otherwise. The episode is a failure.
    policy_error: str | None = None
    # (added) sha256 of the page after the last action, when no step shows it (the episode
    # ended at max_steps, by the task or the policy, not by answer()/stop()): each step's
    # screenshot is the page before its action, so N actions need this N+1th (judges)
    final_screenshot: str | None = None


@dataclass(slots=True)
class StepRow:
    episode_id: str
    step: int
    url: str
    obs_text: str
    screenshot: str | None  # sha256 of the PNG in the screenshots table, or None
    output_text: str  # the raw model/expert output ("Thought: ...\nAction: click(3)")
    action: ActionRow | None  # None when the output did not parse
    parse_ok: bool
    env_error: str | None  # error of executing this action (shown in the next observation)
    reward: float
    done: bool
    latency_s: float
    parse_error: str | None = None  # (added) why the output did not parse


@dataclass(slots=True)
class ScreenshotRow:
    sha256: str
    png: bytes
    width: int
    height: int


@dataclass(slots=True)
class ReflectionRow:
    episode_id: str  # the attempt that was reflected on
    attempt: int
    text: str
    source: str  # "rule" or the LLM's model name
    tokens_in: int = 0  # (added) cost of writing it
    tokens_out: int = 0
    # (added) the oracle's grade, after the fact (rmsweb.judge.grade); never shown to
    # the reflector or the teacher.
    named_steps: list[int] = field(default_factory=list)  # steps the text names, 0-based
    oracle_bad_steps: list[int] | None = None  # steps the oracle rejects; None: ungraded
    # (added) the scripted teacher's task-breaking mistake in the attempt reflected on
    # (rmsweb.agents.mistaken_expert: its kind and step; None: none made, or not a
    # scripted teacher), for the critic's scores per kind. Never shown to the reflector.
    mistake_kind: str | None = None
    mistake_step: int | None = None


@dataclass(slots=True)
class ElementBoxRow:
    """(added) Where an element was on the page: its id in the observation and its box."""

    id: str
    x: float
    y: float
    width: float
    height: float


@dataclass(slots=True)
class StepLabelRow:
    """(added) What a labeller says about one visited state of a mining rollout.

    Table `step_labels`, stored with its episode (same shard, like steps), so a state's
    labels exist exactly when its episode does. A step without a row was not labelled
    (the reference was left behind, or the judge saw no need to look).
    """

    episode_id: str
    step: int
    source: str  # oracle | reference | judge: who labelled it
    # Acceptable actions in the action syntax, best first; empty: the labeller has
    # nothing to suggest (the task is over), so the state is not graded.
    acceptable: list[str]
    # Boxes of the elements the acceptable actions and the executed action name
    # (click_xy comparisons need them; the observation text has no coordinates).
    boxes: list[ElementBoxRow] = field(default_factory=list)
    # Fragile probes: the k raw outputs the policy sampled in this state (the first is
    # the one executed) and whether each was acceptable. Empty when probing is off.
    samples: list[str] = field(default_factory=list)
    samples_ok: list[bool] = field(default_factory=list)


@dataclass(slots=True)
class MinedStateRow:
    """One state for offline RL (recipe part M); the contract the RL stage reads.

    Rebuilding the prompt exactly as the policy saw it:
        build_messages(row.instruction, row.obs_text, row.history, prompt_cfg, count,
                       with_image=prompt_cfg.screenshot and row.screenshot is not None)
    with the PNG of `screenshot` from the same run's `screenshots` table (the mine run
    holds every screenshot its states name, routine ones included).

    - state_id: hash of the prompt's inputs (task, instruction, obs_text, screenshot,
      history actions and errors): identical states are stored once.
    - source: "critical" (the first unacceptable step of a failed or detoured rollout),
      "fragile" (k sampled actions disagree and some are unacceptable) or "routine"
      (a step of the SFT data, mixed in so RL does not forget; also every state of
      `mode: none`).
    - reference_actions: acceptable actions in the action syntax, best first (routine:
      the teacher's action). Never empty.
    - policy_action: critical: the action the policy executed here; fragile: one of its
      wrong samples (the most common failure mode's first); None when unparsable and
      for routine states. policy_output: the raw output behind it.
    - history: every earlier step as the runner showed it (HistoryItem: output_text,
      action_text or None if unparsable, error incl. "could not parse the action: ...");
      the prompt shows the last `model.prompt.history_steps`. (Retyped from list[str]:
      no shard was ever written with the old type.)
    - failure_mode: DESIGN §1 M taxonomy (None for routine states).
    - weight: mine.mode_weights[failure_mode] x criticality (1 for critical, the wrong
      fraction of the k samples for fragile); 1.0 for routine states.
    - boxes: element boxes for click_xy rewards (empty when unknown, e.g. routine).
    - seed, task_id: the episode's; episode_id + step locate the state in its run
      (the mine run's episodes/steps, or the collect run's for routine states).
    """

    state_id: str
    episode_id: str  # the rollout (mine run) or, for routine states, the collect episode
    step: int
    obs_text: str
    screenshot: str | None  # sha256 in this run's screenshots table
    history: list[HistoryItem]  # (retyped) every earlier step (the prompt shows the last k)
    reference_actions: list[str]  # acceptable actions in the action syntax
    policy_action: str | None
    failure_mode: str | None  # None for routine states
    weight: float
    task_id: str = ""  # (added) for per-task analysis
    instruction: str = ""  # (added) needed to rebuild the prompt
    seed: int = 0  # (added) the episode's seed
    source: str = "routine"  # (added) critical | fragile | routine
    policy_output: str | None = None  # (added) the raw output behind policy_action
    sampled_actions: list[str] = field(default_factory=list)  # (added) fragile: k probes
    wrong_fraction: float | None = None  # (added) fragile: share of probes not acceptable
    boxes: list[ElementBoxRow] = field(default_factory=list)  # (added) for click_xy rewards


@dataclass(slots=True)
class RLGroupRow:
    rl_step: int
    state_id: str
    rewards: list[float]
    mean: float
    std: float
    accepted: bool
    reason: str  # accepted, ungated, all_wrong, all_right, low_std, too_hard, too_easy
    pg_loss: float | None  # mean surrogate loss over the group's completion tokens (PG groups)
    anchor_loss: float | None  # mean NLL of the reference action's tokens (anchored groups)
    resample_round: int = 0  # (added) 0: the step's first draw; k: k-th resampling round
    frac_correct: float = 0.0  # (added) share of semantically correct samples (competence)
    expert_member: bool = False  # (added) its last member is the reference (salvage_ds_expert)


@dataclass(slots=True)
class EvalRow:
    run: str
    policy: str
    suite: str
    split: str
    n: int
    success_rate: float
    ci_low: float
    ci_high: float
    mean_steps_solved: float | None
    parse_error_rate: float
    wall_s: float
    task_id: str = "*"  # (added) "*" for the suite-level row, else one row per task
    env_errors: int = (
        0  # (added) episodes that still hit an env error after retries (in n, as failures)
    )
    policy_errors: int = 0  # (added) episodes ended by a policy exception (in n, as failures)


@dataclass(slots=True)
class JudgmentRow:
    """(added) One call of an LLM judge about one episode, or a verdict it reached
    without a call (`note` says why). Deciding calls carry the verdict; a WebJudge
    screenshot call carries its 1-5 score."""

    episode_id: str  # the judged episode (imported runs: "import/<task_id>")
    task_id: str
    protocol: str  # webvoyager, webjudge, webtailbench
    call: str  # verdict (one-call protocols), key_points, image_score, final
    index: int  # the screenshot of an image_score call; 0 otherwise
    inputs_hash: str  # sha256 of the request (model, messages with images, parameters)
    model: str
    output_text: str
    # "success" / "failure" on deciding calls; "judge_failed" where no usable reply came
    # (the episode counts as failed, apart from a judged failure); else None
    verdict: str | None
    score: float | None  # image_score: 1-5, 0 when unparsable; else None
    parse_ok: bool  # the output had the form the protocol expects
    tokens_in: int
    tokens_out: int
    cost_usd: float  # at the judge's prices; 0 for answers from the cache
    cached: bool  # answered from the response cache: nothing spent now
    latency_s: float
    created_at: float = 0.0  # unix seconds
    note: str | None = None  # e.g. "no answer: NOT SUCCESS without a call"


@dataclass(slots=True)
class EpisodeRecord:
    """One finished episode as the runner hands it to a sink."""

    episode: EpisodeRow
    steps: list[StepRow]
    screenshots: list[ScreenshotRow] = field(default_factory=list)
    # (added) reflections written about this attempt; stored in the same shard as
    # the episode, so a resumed collection never finds an attempt without them.
    reflections: list[ReflectionRow] = field(default_factory=list)
    # (added) the LLM judge's calls about this episode (live suites); stored in the same
    # shard as the episode, so a judged episode is never stored without its judgments.
    judgments: list[JudgmentRow] = field(default_factory=list)
    # (added) labels of the visited states (mining rollouts only), same shard as well.
    labels: list[StepLabelRow] = field(default_factory=list)


def episode_key(task_id: str, seed: int, policy: str, attempt: int = 0) -> str:
    """The id of an episode within a run; also the resume key of `completed_keys()`."""
    return f"{task_id}/{seed}/{policy}/{attempt}"


class EpisodeSink(Protocol):
    """Where the runner puts finished episodes (the Parquet store, or memory in tests)."""

    def write(self, record: EpisodeRecord) -> None: ...

    def write_unit(self, records: list[EpisodeRecord]) -> None:
        """Store the records of one unit of work (a job's attempts) all or none."""
        ...

    def completed_keys(self) -> set[str]: ...


class MemorySink:
    """An in-memory sink for tests and small runs."""

    def __init__(self) -> None:
        self.records: list[EpisodeRecord] = []

    def write(self, record: EpisodeRecord) -> None:
        self.records.append(record)

    def write_unit(self, records: list[EpisodeRecord]) -> None:
        self.records.extend(records)

    def completed_keys(self) -> set[str]:
        return {r.episode.episode_id for r in self.records}
