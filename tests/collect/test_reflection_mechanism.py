"""The reflection mechanism end to end on in-memory tasks, no browser:
the teacher hears a reflection's content, not a step number; the oracle only grades.

- wrong advice that names the right step does not fix the attempt;
- correct advice without a step number does (when it can be parsed);
- advice that calls the right action wrong leads the teacher astray;
- adherence 0 makes reflect collect exactly what blind collects;
- the collect job stores the oracle's grade of each reflection;
- detour_slack changes the verdict: the reference length is task-level.

The tasks, in memory (so the whole mechanism, teacher, judge, critic, loop and oracle
grade, runs in milliseconds without a browser):

- `click`: 'Click on the "ok" button.'  page: [1] button "ok", [2] button "cancel",
  [3] text "Some words". Gold: click(1). Another button ends the episode as a failure.
- `login`: 'Enter the username "u<seed>" and the password "p<seed>" into the text fields
  and press login.'  page: [1] textbox "Username", [2] textbox "Password",
  [3] button "Login", [4] button "Cancel", [5] text "Welcome back". Gold: fill both,
  click Login (3 steps). Login with a wrong or empty field, or Cancel, fails.
Scrolling fails ("cannot scroll down any further"), as on MiniWoB's small pages;
clicking plain text changes nothing; stop() ends the episode as a failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from rmsweb.agents.base import Policy
from rmsweb.agents.mistaken_expert import MistakenExpert
from rmsweb.collect.job import collect_job
from rmsweb.collect.metrics import collection_metrics
from rmsweb.collect.retry import RetryLoop
from rmsweb.collect.teacher import build_teacher
from rmsweb.env.actions import Action, ParseError, click, fill, format_action, parse_action
from rmsweb.env.observe import render_text
from rmsweb.env.types import ActRequest, Element, HistoryItem, Observation
from rmsweb.judge.outcome import attempt_judge
from rmsweb.judge.reference import ReferenceLengths
from rmsweb.spec import ExperimentSpec
from rmsweb.store.rows import EpisodeRecord, EpisodeRow, StepRow, episode_key

TASKS = ("click", "login")
MAX_STEPS = 8


class Page:
    def __init__(self, task: str, seed: int) -> None:
        self.task, self.seed = task, seed
        self.values: dict[str, str] = {}
        self.focused: str | None = None
        self.done = self.success = False
        self.reward = 0.0
        if task == "click":
            self.instruction = 'Click on the "ok" button.'
            self.elements = [
                ("1", "button", "ok"),
                ("2", "button", "cancel"),
                ("3", "text", "Some words"),
            ]
        else:
            self.instruction = (
                f'Enter the username "u{seed}" and the password "p{seed}" into the text '
                "fields and press login."
            )
            self.elements = [
                ("1", "textbox", "Username"),
                ("2", "textbox", "Password"),
                ("3", "button", "Login"),
                ("4", "button", "Cancel"),
                ("5", "text", "Welcome back"),
            ]

    def observation(self) -> Observation:
        els = {
            i: Element(
                i,
                role,
                name,
                value=self.values.get(i),
                states=("focused",) if self.focused == i else (),
            )
            for i, role, name in self.elements
        }
        return Observation("about:blank", self.task, render_text(list(els.values())), els)

    def _end(self, success: bool) -> None:
        self.done, self.success, self.reward = True, success, 1.0 if success else -1.0

    def execute(self, a: Action) -> str | None:
        if a.type == "scroll":
            return f"cannot scroll {a.text} any further"
        if a.type in ("stop", "answer"):
            self.done, self.reward = True, 0.0
            return None
        if a.type == "fill":
            self.values[a.target or ""] = a.text or ""
            self.focused = a.target
            return None
        if a.type != "click":
            return f"{a.type} is not supported here"
        role = {i: r for i, r, _ in self.elements}.get(a.target or "")
        if role is None:
            return f"no element {a.target}"
        self.focused = a.target
        if role != "button":
            return None
        if self.task == "click":
            self._end(a.target == "1")
        elif a.target == "3":
            ok = self.values.get("1") == f"u{self.seed}" and self.values.get("2") == f"p{self.seed}"
            self._end(ok)
        else:
            self._end(False)
        return None


class FakeExpert:
    """The scripted expert of both tasks: acceptable actions of any state."""

    def __init__(self, task: str) -> None:
        self.task = task

    def acceptable_actions(
        self, instruction: str, observation: Observation, history: Sequence[HistoryItem]
    ) -> list[Action]:
        if self.task == "click":
            return [click("1")]
        user, pw = (q for q in instruction.split('"')[1::2])
        els = observation.elements
        todo = [fill(i, v) for i, v in (("1", user), ("2", pw)) if (els[i].value or "") != v]
        return todo or [click("3")]


EXPERTS = {t: FakeExpert(t) for t in TASKS}


async def play(
    policy: Policy, task: str, seed: int, attempt: int = 0, reflections: Sequence[str] = ()
) -> EpisodeRecord:
    """One episode of `policy`, as the runner would record it."""
    page = Page(task, seed)
    row = EpisodeRow(
        episode_key(task, seed, policy.name, attempt),
        "collect/fake",
        "collect",
        "fake",
        task,
        seed,
        "train",
        policy.name,
        attempt,
    )
    row.instruction = page.instruction
    steps: list[StepRow] = []
    history: list[HistoryItem] = []
    for step in range(MAX_STEPS):
        obs = page.observation()
        request = ActRequest(
            task, page.instruction, obs, list(history), list(reflections), seed, step, attempt
        )
        out = (await policy.act(request)).text
        action = parse_action(out)
        error = None if isinstance(action, ParseError) else page.execute(action)
        parsed = None if isinstance(action, ParseError) else action
        steps.append(
            StepRow(
                row.episode_id,
                step,
                obs.url,
                obs.text,
                None,
                out,
                parsed.to_row() if parsed else None,
                parsed is not None,
                error,
                page.reward,
                page.done,
                0.0,
            )
        )
        history.append(HistoryItem(out, format_action(parsed) if parsed else None, error))
        if page.done:
            break
    row.success, row.reward, row.n_steps = page.success, page.reward, len(steps)
    return EpisodeRecord(row, steps)


# --------------------------------------------------------------------------- the teacher


def teacher(error_rate: float = 1.0, adherence: float = 1.0, **kw) -> MistakenExpert:
    """A teacher that always makes a distractor click at step 0 and repeats itself."""
    kw = {"persistence": 1.0, "max_mistake_step": 1, **kw}
    return MistakenExpert(
        EXPERTS, error_rate, 0.0, ["distractor_click"], ["scroll"], adherence=adherence, **kw
    )


def attempt(policy, reflections: Sequence[str], task: str = "click", seed: int = 0):
    return asyncio.run(play(policy, task, seed, attempt=1, reflections=reflections))


def test_the_teacher_repeats_its_mistake_without_advice() -> None:
    t = teacher()
    first = asyncio.run(play(t, "click", 0))
    assert not first.episode.success and first.steps[0].output_text == "click(2)"
    assert not attempt(t, []).episode.success


def test_wrong_advice_naming_the_right_step_does_not_fix_the_attempt() -> None:
    t = teacher()
    wrong_action = 'The attempt failed. Step 1: clicked [3] text "Some words"; it did nothing.'
    wrong_fix = "The attempt failed. Step 1: scrolled down; the page did not change."
    for advice in (wrong_action, wrong_fix):
        rec = attempt(t, [advice])
        assert not rec.episode.success, advice
        assert rec.steps[0].output_text == "click(2)"


def test_correct_advice_without_a_step_number_fixes_the_attempt() -> None:
    t = teacher()
    for advice in (
        'Clicked [2] button "cancel"; the goal asks for "ok".',
        "You clicked cancel instead of ok.",  # free text, as an LLM might write it
        "Do not do click(2) again.",
    ):
        assert attempt(t, [advice]).episode.success, advice
    # and the same advice with the right step number
    assert attempt(t, ['Step 1: clicked [2] button "cancel"; wrong button.']).episode.success


def test_advice_at_another_step_does_not_help() -> None:
    t = teacher()
    assert not attempt(t, ['Step 2: clicked [2] button "cancel"; wrong.']).episode.success


def test_advice_calling_the_right_action_wrong_leads_astray() -> None:
    t = teacher(error_rate=0.0)  # a perfect teacher
    assert attempt(t, []).episode.success
    rec = attempt(t, ['Step 1: clicked [1] button "ok"; the goal asks for "cancel".'])
    assert not rec.episode.success and rec.steps[0].output_text == "click(2)"


def test_adherence_is_the_chance_a_note_is_followed() -> None:
    advice = ['Step 1: clicked [2] button "cancel"; wrong button.']
    never = teacher(adherence=0.0)
    assert not any(attempt(never, advice, seed=s).episode.success for s in range(50))
    half = teacher(adherence=0.5)
    fixed = sum(attempt(half, advice, seed=s).episode.success for s in range(400)) / 400
    assert 0.42 < fixed < 0.58


# --------------------------------------------------------------------------- the whole loop


class FakeSuite:
    def task_ids(self, split: str | None = None) -> list[str]:
        return list(TASKS)

    def seeds(self, split: str) -> list[int]:
        return list(range(60))

    def expert(self, task: str):
        return EXPERTS[task]


class FakeRunner:
    async def run_episode(self, policy, task_id, seed, *, split="train", attempt=0, reflections=()):
        return await play(policy, task_id, seed, attempt, reflections)


def spec(
    retry: str, adherence: float = 0.9, slack: float = 0.2, kinds: list[str] | None = None
) -> ExperimentSpec:
    return ExperimentSpec.model_validate(
        {
            "name": "fake",
            "collect": {
                "teacher": {
                    "kind": "expert",
                    "error_rate": 0.4,
                    "detour_rate": 0.4,
                    "adherence": adherence,
                    "error_kinds": kinds or ["distractor_click", "wrong_field", "premature_stop"],
                },
                "retry": retry,
                "max_retries": 0 if retry == "none" else 2,
                "detour_slack": slack,
            },
        }
    )


def collect(s: ExperimentSpec, seeds: int = 60) -> list[EpisodeRecord]:
    async def go() -> list[EpisodeRecord]:
        runner = FakeRunner()

        async def gold(policy, task, seed):
            return await play(policy, task, seed)

        t = build_teacher(s, FakeSuite(), play=gold)
        c = s.collect
        job = collect_job(
            RetryLoop(c.retry, c.max_retries),
            t.judge,
            t.reflector,
            forget=t.forget,
            labels=t.labels,
            mistake_of=t.mistake_of,
        )
        out = []
        for seed in range(seeds):
            for task in TASKS:
                out += await job(runner, t.policy, task, seed)
        return out

    return asyncio.run(go())


def rows(records: list[EpisodeRecord]) -> list:
    return [
        (r.episode.episode_id, r.episode.success, [st.output_text for st in r.steps])
        for r in records
    ]


def test_adherence_zero_makes_reflect_collect_what_blind_collects() -> None:
    blind = collect(spec("blind"))
    deaf = collect(spec("reflect", adherence=0.0))
    assert rows(deaf) == rows(blind)
    assert sum(len(r.reflections) for r in deaf) > 20  # reflections were written, and ignored
    # With a teacher that follows them, the same mistakes get fixed more often.
    heard = collect(spec("reflect", adherence=0.9))
    yields = [collection_metrics(x, 3)[0]["yield"] for x in (blind, heard)]
    assert yields[1] > yields[0]


def test_collect_job_stores_the_oracle_grade_of_each_reflection() -> None:
    records = collect(spec("reflect"), seeds=30)
    graded = [x for r in records for x in r.reflections]
    assert graded and all(x.oracle_bad_steps is not None for x in graded)
    failed = [(x, r) for r in records for x in r.reflections if not r.episode.success]
    assert failed and all(x.oracle_bad_steps for x, _ in failed), "a failure has a bad step"
    for x, _ in failed:
        assert x.named_steps, x.text
    metrics, _ = collection_metrics(records, 3)
    assert metrics["critic_graded"] == len(graded)
    assert 0 < metrics["critic_first_error_precision"] <= 1
    # kept steps are judged against the task-level gold length (3 for login, 1 for click)
    gold = {r.episode.task_id: r.episode.reference_steps for r in records if r.episode.success}
    assert gold == {"click": 1, "login": 3}


def test_none_makes_one_attempt_and_costs_count_reflections() -> None:
    none = collection_metrics(collect(spec("none"), seeds=20), 1)[0]
    assert none["attempts_per_task_seed"] == 1 and none["reflections"] == 0
    records = collect(spec("reflect"), seeds=20)
    m = collection_metrics(records, 3)[0]
    steps = sum(len(r.steps) for r in records)
    assert m["teacher_calls_per_task_seed"] == round((steps + m["reflections"]) / 40, 3)


def test_detour_slack_decides_whether_a_long_success_is_retried() -> None:
    """A 4-step success against a gold length of 3, with no wasted step in sight."""

    async def verdict(slack: float, gold: int | None):
        async def gold_fn(rec):
            return gold

        judge = attempt_judge(ReferenceLengths(gold_fn), slack)
        rec = await play(teacher(error_rate=0.0), "login", 0)
        rec.episode.n_steps = 4  # as if one more (invisible) step had been taken
        return await judge(rec)

    assert asyncio.run(verdict(0.2, 3)).detour  # 4 > 3 * 1.2
    assert not asyncio.run(verdict(0.5, 3)).detour  # 4 <= 3 * 1.5
    assert asyncio.run(verdict(0.2, 3)).reference_length == 3


def test_reference_without_gold_is_the_shortest_success_seen() -> None:
    async def go():
        ref = ReferenceLengths()
        rec = await play(teacher(error_rate=0.0), "login", 0)
        assert await ref.reference(rec) is None  # nothing seen yet
        ref.observe(rec)
        assert await ref.reference(rec) == 3  # the same unit, a later attempt
        other = await play(teacher(error_rate=0.0), "login", 1)
        assert await ref.reference(other) == 3  # another seed of the task
        ref.forget("login", 0)
        assert await ref.reference(rec) == 3  # the task-level length stays

    asyncio.run(go())


# --------------------------------------------------------------------------- the critic


class Script:
    """Plays fixed outputs, one per step (a planted trajectory)."""

    name = "script"

    def __init__(self, outputs: list[str]) -> None:
        self.outputs = outputs

    async def act(self, request: ActRequest):
        from rmsweb.agents.base import ActResult

        return ActResult(self.outputs[request.step])

    async def close(self) -> None:
        pass


F = 'fill({}, "{}")'
# (task, outputs, what the critic gets right). Seed 0: username "u0", password "p0".
PLANTED = [
    ("click", ["click(2)"], "wrong button"),
    ("click", ["stop()"], "premature stop"),
    ("click", ['scroll("down")', "click(1)"], "failed scroll"),
    ("click", ["click(3)", "click(1)"], "click on plain text"),
    ("click", ['scroll("down")', 'scroll("up")', "click(1)"], "back and forth"),
    ("login", [F.format(1, "u0"), "click(3)"], "premature login"),
    ("login", [F.format(1, "u0"), "click(4)"], "cancel"),
    ("login", [F.format(1, "u0"), F.format(2, "u0"), "click(3)"], "value in the wrong field"),
    ("login", [F.format(1, "u0"), F.format(2, "x"), "click(3)"], "value not in the goal"),
    ("login", [F.format(1, "p0"), F.format(2, "p0"), F.format(1, "u0"), "click(3)"], "fixed"),
    ("login", ["click(1)", F.format(1, "u0"), F.format(2, "p0"), "click(3)"], "focus click"),
    # Planted to fool it: the last fill of a field is taken as the one that counts, so a
    # correct early fill is blamed when a later one spoils it.
    ("login", [F.format(1, "u0"), F.format(2, "p0"), F.format(1, "p0"), "click(3)"], "fooled"),
    # A repeated fill: the second changed nothing.
    ("login", [F.format(1, "u0"), F.format(1, "u0"), F.format(2, "p0"), "click(3)"], "repeat"),
    # Planted to fool it: a wrong fill undone by the next step reads as back and forth
    # over both steps, though the second (restoring "u0") was needed.
    (
        "login",
        [F.format(1, "u0"), F.format(1, "zz"), F.format(1, "u0"), F.format(2, "p0"), "click(3)"],
        "undone",
    ),
]


def test_critic_precision_on_a_planted_trajectory_set() -> None:
    from rmsweb.judge.critic import critique
    from rmsweb.judge.grade import critic_scores, grade
    from rmsweb.judge.oracle import LabelingPolicy, OracleLabels, bad_steps
    from rmsweb.judge.types import Verdict

    labels = OracleLabels(EXPERTS)
    grades, texts = [], {}
    for task, outputs, what in PLANTED:
        rec = asyncio.run(play(LabelingPolicy(Script(outputs), labels), task, 0))
        gold = {"click": 1, "login": 3}[task]
        assert bad_steps(rec, labels), what  # every planted trajectory has a fault
        text = critique(rec, Verdict(rec.episode.success, rec.episode.success, gold))
        texts[what] = text
        grades.append(grade(text, rec, labels))
    assert texts["wrong button"].endswith(
        'Step 1: clicked [2] button "cancel"; the goal asks for "ok".'
    )
    assert 'Step 2: clicked [3] button "Login" before "p0" was filled.' in texts["premature login"]
    assert 'the goal gives "u0" for the username' in texts["value in the wrong field"]
    scores = critic_scores(grades)
    # Failed attempts: 7 planted; the first bad step is named first in all but "fooled"
    # (it names step 1; the oracle's first bad step is 3).
    assert scores["first_error_precision"] == round(6 / 7, 4)
    assert scores["first_error_recall"] == round(6 / 7, 4)
    # Detoured successes: 7 planted with 8 bad steps; the critic names 9 steps: every bad
    # one, plus the needed restoring fill of "undone".
    assert scores["detour_precision"] == round(8 / 9, 4)
    assert scores["detour_recall"] == 1.0


def test_critic_scores_per_mistake_kind_with_untargeted_kinds_apart() -> None:
    kinds = ["distractor_click", "premature_stop", "one_field_short", "wrong_label"]
    records = collect(spec("reflect", kinds=kinds), seeds=40)
    stored = {x.mistake_kind for r in records for x in r.reflections if not r.episode.success}
    assert {"distractor_click", "premature_stop", "wrong_label"} <= stored
    for r in records:  # a stored kind was made in the attempt reflected on, at its step
        for x in r.reflections:
            if x.mistake_kind is not None:
                assert x.mistake_step is not None and x.mistake_step < r.episode.n_steps
    m, _ = collection_metrics(records, 3)
    for kind in stored - {None}:
        assert m[f"critic_kind_{kind}_graded"] > 0
        assert 0 <= m[f"critic_kind_{kind}_first_error_recall"] <= 1
    # wrong_label is one no critic rule targets: reported apart from the targeted kinds
    assert m["critic_untargeted_graded"] == m["critic_kind_wrong_label_graded"]
    targeted = [k for k in stored if k in ("distractor_click", "premature_stop", "one_field_short")]
    assert m["critic_targeted_graded"] == sum(m[f"critic_kind_{k}_graded"] for k in targeted)
