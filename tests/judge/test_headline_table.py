"""The paper's headline table (rmsweb/report/headline.py): rows the policies of several
experiments, columns the evaluation benchmarks, success with its interval and the
judge's failures apart, the accuracy-cost view and each benchmark's caveats."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rmsweb.judge.client import JudgeClient
from rmsweb.judge.live import LiveJudge
from rmsweb.report.build import build_report
from rmsweb.report.document import to_markdown
from rmsweb.report.headline import Row, placement
from rmsweb.store.synthetic import make_episode
from rmsweb.store.writer import ShardWriter

from .test_live_report import om2w_reply


def _run(root: Path, scripted, name: str, policy: str, kind: str, tasks: list[str]) -> Path:
    """An eval run judged by WebJudge on o4-mini: t1 done, t2 not, t3 no verdict."""
    backend = scripted(om2w_reply)
    backend.model = "o4-mini"
    judge = LiveJudge(JudgeClient(backend), "webjudge", categories=dict.fromkeys(tasks, "easy"))
    records = []
    for task in tasks:
        rec = make_episode(run=name, task=task, seed=0, policy=policy, success=False, n_steps=2)
        rec.episode.stage, rec.episode.suite, rec.episode.split = "eval", kind, "test"
        rec.episode.instruction, rec.episode.category = f"goal of {task}", "easy"
        rec.episode.tokens_in, rec.episode.tokens_out, rec.episode.cost_usd = 1000, 100, 0.01
        records.append(rec)

    async def go() -> None:
        for rec in records:
            await judge.judge(rec)

    asyncio.run(go())
    folder = root / name
    with ShardWriter(folder) as sink:
        for rec in records:
            sink.write(rec)
    return folder


def test_placement_reads_the_benchmark_from_the_run() -> None:
    assert placement("eval/paper-8b/om2w-sft/s0", "sft", "online_mind2web") == Row(
        "paper-8b", "sft", "s0", "om2w"
    )
    # without eval.suites the variant is the policy: the column is the suite kind
    assert placement("eval/x/sft-big/s1", "sft-big", "webvoyager") == Row(
        "x", "sft-big", "s1", "webvoyager"
    )
    assert placement("eval/x/teacher", "teacher", "webvoyager") == Row(
        "x", "teacher", "", "webvoyager"
    )
    assert placement("mine/x/s0", "sft", "webvoyager") is None


def test_two_experiments_join_in_one_table(tmp_path: Path, scripted) -> None:
    root = tmp_path / "runs"
    om2w = ["t1", "t2", "t3", "t4"]
    runs = {
        "eval-om2w-sft-s0": _run(root, scripted, "eval/paper-8b/om2w-sft/s0", "sft", "online_mind2web", om2w),
        "eval-om2w-rl-s0": _run(root, scripted, "eval/paper-8b/om2w-rl/s0", "rl", "online_mind2web", ["t1", "t2"]),
        "paper-32b.eval-om2w-rl-s0": _run(root, scripted, "eval/paper-32b/om2w-rl/s0", "rl", "online_mind2web", ["t1"]),
        "eval-wv-sft-s0": _run(root, scripted, "eval/paper-8b/wv-sft/s0", "sft", "webvoyager", ["t1", "t3"]),
    }  # fmt: skip
    rep = build_report(runs, title="paper")
    md = to_markdown(rep.document)
    assert "## Headline: success per benchmark" in md
    header = next(r for r in md.splitlines() if r.startswith("| Policy | wv: success"))
    # WebVoyager first (the paper's order), then Online-Mind2Web
    assert header.startswith("| Policy | wv: success [95% CI] | wv: judge failures | om2w:")
    lines = [r for r in md.splitlines() if r.startswith("| paper-")]
    table = [r for r in lines if r.count("|") == 6]
    # rows: 8B before 32B, SFT before RL; a benchmark a policy was not evaluated on: —
    assert [r.split(" | ")[0] for r in table] == [
        "| paper-8b / sft",
        "| paper-8b / rl",
        "| paper-32b / rl",
    ]
    assert table[0] == (
        "| paper-8b / sft | 50.0% [9.5, 90.5] | 1 / 2 | 25.0% [4.6, 69.9] | 2 / 4 |"
    )
    assert table[2] == "| paper-32b / rl | — | — | 100.0% [20.7, 100.0] | 0 / 1 |"
    key = "headline/paper-8b/sft/s0/om2w"
    assert (
        rep.metrics[f"{key}/success"] == 0.25 and rep.metrics[f"{key}/judge_failures"] == 2
    )  # t3, t4: no verdict
    assert rep.metrics[f"{key}/n"] == 4
    # accuracy-cost view: policy tokens and dollars per task beside success
    cost = next(r for r in md.splitlines() if r.startswith("| paper-8b / sft | om2w | 4 |"))
    cells = cost.strip("|").split(" | ")
    assert cells[3:6] == ["25.0%", "1100", "$0.0100"]
    # caveats: a subset of Online-Mind2Web's 300, its judge's leaderboard; a judge protocol
    # that is not WebVoyager's own has no leaderboard
    assert "om2w (Online-Mind2Web): 1/2/4 of the 300 tasks of its task file: a subset" in md
    assert "webjudge / o4-mini: the Online-Mind2Web leaderboard" in md
    assert "no leaderboard: webjudge is not webvoyager's own judge protocol." in md
