"""Judging live episodes without a browser: verdict -> success, judgments on the record, the
collect stage's JudgeFn (detours, retries on judged failures), the eval job and split plan."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from rmsweb.collect.retry import RetryLoop
from rmsweb.collect.teacher import build_teacher
from rmsweb.errors import UserError
from rmsweb.evaluate.job import eval_job, split_plan
from rmsweb.evaluate.metrics import category_rates
from rmsweb.judge.client import JudgeClient
from rmsweb.judge.live import LiveJudge, build_live_judge, judge_cache_dir, page_actions
from rmsweb.judge.types import Reflection, Verdict
from rmsweb.spec import ExperimentSpec
from rmsweb.store.rows import EpisodeRecord
from rmsweb.store.synthetic import make_episode
from rmsweb.suites.factory import build_suite
from rmsweb.suites.live import LiveSuite, LiveTaskInfo


def answered(task: str, attempt: int = 0, n_steps: int = 3, error: str | None = None):
    """A live episode: clicks and fills, then answer("42") as its last step."""
    rec = make_episode(
        run="eval/x", task=task, seed=0, policy="p", success=False, n_steps=n_steps,
        attempt=attempt, env_error=error,
    )  # fmt: skip
    if error is None:
        last = rec.steps[-1]
        last.action.type, last.action.target, last.action.text = "answer", None, "42"
        rec.episode.answer = "42"
    return rec


def live_judge(scripted, replies: dict[str, str], **kw) -> LiveJudge:
    """A WebVoyager judge whose model answers per task id (the id is in the goal text)."""

    def reply(messages) -> str:
        text = messages[1]["content"][0]["text"]
        return next(v for k, v in replies.items() if f"TASK: goal of {k}" in text)

    client = JudgeClient(scripted(reply), input_usd_per_mtok=1.0, output_usd_per_mtok=2.0)
    return LiveJudge(client, "webvoyager", **kw)


def test_the_verdict_becomes_the_success_and_the_calls_ride_with_the_episode(scripted) -> None:
    judge = live_judge(
        scripted,
        {"a": "It is there. SUCCESS", "b": "NOT SUCCESS", "c": "unsure"},
        categories={"a": "Amazon", "b": "Amazon", "c": "Apple"},
    )
    recs = {t: answered(t) for t in "abc"}
    for t, rec in recs.items():
        rec.episode.instruction = f"goal of {t}"
    crashed = answered("d", error="browser crashed")

    async def go():
        return [await judge.judge(r) for r in (*recs.values(), crashed)]

    outcomes = asyncio.run(go())
    assert [o.success if o else None for o in outcomes] == [True, False, False, None]
    assert [(r.episode.success, r.episode.reward) for r in recs.values()] == [
        (True, 1.0), (False, 0.0), (False, 0.0),
    ]  # fmt: skip
    assert [r.episode.category for r in recs.values()] == ["Amazon", "Amazon", "Apple"]
    for t, rec in recs.items():
        row = rec.judgments[-1]
        assert row.episode_id == rec.episode.episode_id and row.task_id == t
        assert row.cost_usd == pytest.approx((row.tokens_in + 2 * row.tokens_out) / 1e6)
    assert [len(recs[t].judgments) for t in "ab"] == [1, 1]
    # unparsable: asked three times, then a judge failure (a failure, marked apart)
    assert [(j.verdict, j.parse_ok) for j in recs["c"].judgments] == [
        (None, False), (None, False), ("judge_failed", False),
    ]  # fmt: skip
    # an environment error is a failure without a judge call
    assert (crashed.episode.success, crashed.judgments) == (False, [])
    assert judge.client.rows == []  # every row went to its episode


def test_collect_judgefn_finds_detours_against_the_reference_length(scripted) -> None:
    judge = live_judge(
        scripted, {"short": "SUCCESS", "long": "SUCCESS", "bad": "NOT SUCCESS"},
        reference_lengths={"short": 4, "long": 4, "bad": 4}, detour_slack=0.25,
    )  # fmt: skip
    # page actions exclude the final answer: 6 steps = 5 actions = 4 * 1.25, no detour
    short, long, bad = answered("short", n_steps=6), answered("long", n_steps=7), answered("bad")
    for rec, t in ((short, "short"), (long, "long"), (bad, "bad")):
        rec.episode.instruction = f"goal of {t}"
    assert (page_actions(short), page_actions(long)) == (5, 6)
    verdicts = asyncio.run(_all(judge.verdict, [short, long, bad]))
    assert verdicts == [Verdict(True, False, 4), Verdict(True, True, 4), Verdict(False, False, 4)]


async def _all(fn, items):
    return [await fn(x) for x in items]


def test_an_llm_judged_failure_is_retried_with_a_reflection(scripted) -> None:
    # attempt 0 answers wrongly, attempt 1 rightly: the judge tells them apart
    answers = {0: "41", 1: "42"}

    def reply(messages) -> str:
        text = messages[1]["content"][0]["text"]
        return "SUCCESS" if "Result Response: 42" in text else "NOT SUCCESS"

    judge = LiveJudge(JudgeClient(scripted(reply)), "webvoyager")

    async def attempt(k: int, reflections: Sequence[str]) -> EpisodeRecord:
        rec = answered("t", attempt=k)
        rec.episode.answer = answers[k]
        return rec

    async def reflect(rec, verdict, earlier) -> Reflection:
        return Reflection(rec.episode.attempt, "check the number", "teacher")

    out = asyncio.run(RetryLoop("reflect", 2).run(attempt, judge.verdict, reflect))
    assert [r.episode.success for r in out.attempts] == [False, True]
    assert out.kept == 1 and [len(r.judgments) for r in out.attempts] == [1, 1]


def live_spec(tmp_path, **suite) -> ExperimentSpec:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(
            f'{{"web_name": "Shop", "id": "Shop--{i}", "ques": "q{i}", "web": "https://x.test/"}}\n'
            for i in range(40)
        )
    )
    return ExperimentSpec.model_validate(
        {
            "name": "live",
            "suite": {"kind": "webvoyager", "tasks_file": str(tasks), **suite},
            "collect": {"teacher": {"kind": "openai", "model": "m"}},
            "mine": {"mode": "judge"},
            "eval": {"policies": [{"kind": "openai", "name": "m", "model": "m"}]},
        }
    )


def test_collect_teacher_on_a_live_suite_is_judged_by_the_llm_judge(tmp_path) -> None:
    spec = live_spec(tmp_path)
    suite = build_suite(spec.suite)
    teacher = build_teacher(spec, suite)
    assert teacher.labels is None and isinstance(teacher.live_judge, LiveJudge)
    assert teacher.judge == teacher.live_judge.verdict
    assert teacher.live_judge.protocol == "webvoyager"
    assert set(teacher.live_judge.categories.values()) == {"Shop"}
    asyncio.run(teacher.close())


def test_eval_job_prices_and_judges_and_split_plan_checks_every_split(tmp_path, scripted) -> None:
    spec = live_spec(tmp_path, test_fraction=0.5, val_fraction=0.2)
    suite = build_suite(spec.suite)
    plan = split_plan(suite, ["val", "test"])
    assert plan["val"][1] == plan["test"][1] == [0]  # a live task runs once
    assert set(plan["val"][0]) == set(suite.task_ids("val")) and plan["test"][0]
    with pytest.raises(UserError, match="no tasks in the val split"):
        split_plan(build_suite(live_spec(tmp_path, val_fraction=0.0).suite), ["val"])

    class Runner:
        async def run_episode(self, policy, task_id, seed, *, split):
            rec = answered(task_id)
            rec.episode.instruction = f"goal of {task_id}"
            rec.episode.tokens_in, rec.episode.tokens_out = 1000, 100
            return rec

    judge = live_judge(scripted, {"Shop--1": "SUCCESS"}, categories={"Shop--1": "Shop"})
    job = eval_job("test", judge=judge, cost_usd=lambda i, o: i * 2e-6 + o * 8e-6)
    (rec,) = asyncio.run(job(Runner(), None, "Shop--1", 0))
    assert rec.episode.success and rec.episode.category == "Shop"
    assert rec.episode.cost_usd == pytest.approx(0.0028) and len(rec.judgments) == 1
    (plain,) = asyncio.run(eval_job("test")(Runner(), None, "Shop--1", 0))
    assert (plain.episode.success, plain.episode.cost_usd, plain.judgments) == (False, None, [])
    crashed = answered("Shop--2", error="browser crashed")
    crashed.episode.category, crashed.episode.success = "Shop", True
    # the eval metrics of live suites go by category; an env error is a failure there too
    assert category_rates([rec, plain, crashed]) == {"?": 0.0, "Shop": 0.5}


def test_judge_cache_lives_outside_the_stage_outputs(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("RMSWEB_JUDGE_CACHE", raising=False)
    assert judge_cache_dir().as_posix() == ".rmsweb-cache/judge"
    monkeypatch.setenv("RMSWEB_JUDGE_CACHE", str(tmp_path / "c"))
    assert judge_cache_dir() == tmp_path / "c"
    spec = live_spec(tmp_path)
    judge = build_live_judge(spec.suite, build_suite(spec.suite))
    assert judge.client.cache.folder == tmp_path / "c"
    asyncio.run(judge.close())


def test_live_suite_splits_tasks_three_ways_stably() -> None:
    infos = [LiveTaskInfo(f"T--{i}", "g", "https://x.test/", "T", "T") for i in range(400)]
    suite = LiveSuite("webvoyager", infos, test_fraction=0.4, val_fraction=0.2)
    parts = {s: set(suite.task_ids(s)) for s in ("train", "val", "test")}
    assert sum(map(len, parts.values())) == 400 and set().union(*parts.values()) == {
        t.id for t in infos
    }
    assert 0.3 < len(parts["test"]) / 400 < 0.5 and 0.12 < len(parts["val"]) / 400 < 0.28
    # adding a val share takes tasks from train only: test is the same as without it
    no_val = LiveSuite("webvoyager", infos, test_fraction=0.4)
    assert set(no_val.task_ids("test")) == parts["test"] and not no_val.task_ids("val")
    with pytest.raises(UserError, match="belongs to the val split"):
        suite.task(next(iter(parts["val"])), 0, "train")
