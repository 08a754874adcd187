"""The report's live section: a judge failure is a failure, counted apart from a judged
failure and from an environment error; and every result says which leaderboard it is
comparable with (rmsweb.report.live)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rmsweb.judge.client import JudgeClient
from rmsweb.judge.live import LiveJudge
from rmsweb.report.build import build_report
from rmsweb.report.document import to_markdown
from rmsweb.report.live import comparable_with
from rmsweb.store.synthetic import make_episode
from rmsweb.store.writer import ShardWriter


def om2w_reply(messages) -> str:
    """WebJudge, scripted: t1 done, t2 not, t3 the verdict never readable."""
    system, text = messages[0]["content"], messages[1]["content"][0]["text"]
    if "key points explicitly stated" in system:
        return "**Key Points**:\n1. Do it"
    if "determining whether an image contains" in system:
        return "**Reasoning**: the page.\n**Score**: 4"
    if "goal of t1" in text:
        return "Thoughts: done.\nStatus: success"
    if "goal of t2" in text:
        return "Thoughts: not done.\nStatus: failure"
    return ""  # t3: a reasoning model that spent its cap, every time


def judged_run(root: Path, scripted, model: str) -> Path:
    run = root / "eval" / "om2w" / model.replace("/", "_")
    name = f"eval/om2w/{model.replace('/', '_')}"
    backend = scripted(om2w_reply)
    backend.model = model
    judge = LiveJudge(JudgeClient(backend), "webjudge", categories=dict.fromkeys("t", "easy"))
    records = []
    for task in ("t1", "t2", "t3", "t4"):
        error = "browser crashed" if task == "t4" else None
        rec = make_episode(
            run=name, task=task, seed=0, policy="p", success=False, n_steps=2, env_error=error
        )
        rec.episode.stage, rec.episode.suite, rec.episode.split = "eval", "online_mind2web", "test"
        rec.episode.instruction, rec.episode.category = f"goal of {task}", "easy"
        records.append(rec)

    async def go() -> None:
        for rec in records:
            await judge.judge(rec)

    asyncio.run(go())
    with ShardWriter(run) as sink:
        for rec in records:
            sink.write(rec)
    return run


def test_judge_failures_are_counted_apart_and_comparability_is_stated(tmp_path, scripted) -> None:
    hosted = judged_run(tmp_path / "runs", scripted, "o4-mini")
    local = judged_run(tmp_path / "runs", scripted, "Qwen/Qwen3-VL-32B-Instruct")
    rep = build_report({"a": hosted, "b": local}, title="live")
    md = to_markdown(rep.document)
    key = "live/om2w/o4-mini/online_mind2web/test"
    assert rep.metrics[f"{key}/success"] == 0.25 and rep.metrics[f"{key}/n"] == 4
    assert rep.metrics[f"{key}/judged_failed"] == 1  # t2
    assert rep.metrics[f"{key}/judge_failures"] == 1  # t3: no usable verdict
    # Tasks, Success, CI, Judged failed, Judge failures, Env errors, Judge retries (t3's two)
    assert "| om2w/o4-mini | online_mind2web | test | 4 | 25.0% |" in md
    head = "| om2w/o4-mini | online_mind2web | test | 4 |"
    # the live table's row (15 columns; the results table starts alike)
    row = next(r for r in md.splitlines() if r.startswith(head) and r.count("|") == 16)
    assert row.split(" | ")[6:10] == ["1", "1", "1", "2"]
    assert "| Judge (protocol / model) | Comparable with |" in md
    assert (
        "| om2w/o4-mini | online_mind2web | webjudge / o4-mini | the Online-Mind2Web "
        "leaderboard (osunlp/Online_Mind2Web_Leaderboard)"
    ) in md
    assert "only results judged by WebJudge with Qwen/Qwen3-VL-32B-Instruct" in md


def test_what_each_benchmark_is_comparable_with() -> None:
    assert "NOT Microsoft's WebTailBench numbers" in comparable_with(
        "webtailbench", "webtailbench / o4-mini"
    )
    assert "unpublished" in comparable_with("webtailbench", "webtailbench / gpt-4o")
    assert comparable_with("online_mind2web", "webjudge / o4-mini-2025-04-16").startswith(
        "the Online-Mind2Web leaderboard"
    )
    assert comparable_with("online_mind2web", "webjudge / gpt-4o").startswith("only results")
    assert "with gpt-4o as the judge" in comparable_with("webvoyager", "webvoyager / gpt-4o")
    assert comparable_with("webvoyager", "webjudge / o4-mini").startswith("no leaderboard")
