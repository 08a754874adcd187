"""`rmsweb judge-om2w`: judge another agent's run, read in the Online-Mind2Web layout.

Each trajectory folder (<task_id>/result.json + trajectory/<N>_full_screenshot.png, v1
or v2; rmsweb.judge.om2w_layout) is judged by the benchmark's LLM judge exactly as
rmsweb's own live episodes are, and stored as a run folder: one `episodes` row per
trajectory (success = the verdict, category from the bundled task file) with its
`judgments` rows, so `rmsweb query` and the report's SQL read it like any eval run.
Steps and screenshots stay in the source folders. Resumable: trajectories already in
`out` are skipped (and judge answers are cached).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmsweb.errors import UserError
from rmsweb.judge.episode import JudgeInput
from rmsweb.judge.live import LiveJudge
from rmsweb.store.rows import EpisodeRecord, EpisodeRow


@dataclass
class ImportSummary:
    judged: int  # judged now
    skipped: int  # already in the output run
    per_category: dict[str, tuple[int, int]]  # category -> (successes, trajectories), all runs
    calls: int
    cached: int
    tokens_in: int
    tokens_out: int
    cost_usd: float


def imported_record(
    inp: JudgeInput, *, run: str, suite: str, policy: str, split: str
) -> EpisodeRecord:
    """An episodes row for an imported trajectory (no steps: they stay in its folder)."""
    steps = len(inp.actions) + (inp.answer is not None)  # the final answer is a step here
    started = time.mktime(inp.date.timetuple()) if inp.date else 0.0
    row = EpisodeRow(
        episode_id=inp.episode_id,
        run=run,
        stage=run.split("/", 1)[0],
        suite=suite,
        task_id=inp.task_id,
        seed=0,
        split=split,
        policy=policy,
        n_steps=steps,
        answer=inp.answer,
        started_at=started,
        instruction=inp.task,
    )
    return EpisodeRecord(episode=row, steps=[])


async def judge_inputs(
    judge: LiveJudge,
    inputs: Sequence[JudgeInput],
    sink: Any,
    *,
    run: str,
    suite: str,
    policy: str,
    split: str,
) -> int:
    """Judge every input not in `sink` yet; write each as it is judged. Returns how many."""
    done = sink.completed_keys()
    todo = [inp for inp in inputs if inp.episode_id not in done]

    async def one(inp: JudgeInput) -> None:
        record = imported_record(inp, run=run, suite=suite, policy=policy, split=split)
        outcome = await judge.judge_input(inp)
        ep = record.episode
        ep.success, ep.reward = outcome.success, float(outcome.success)
        ep.category = judge.categories.get(ep.task_id)
        record.judgments.extend(judge.take_rows(ep.episode_id))
        sink.write(record)

    # The client bounds requests in flight (judge.concurrency); this bounds trajectories
    # held in memory (their screenshots) to a few per request slot.
    gate = asyncio.Semaphore(32)

    async def bounded(inp: JudgeInput) -> None:
        async with gate:
            await one(inp)

    await asyncio.gather(*(bounded(inp) for inp in todo))
    return len(todo)


def judge_om2w(
    dirs: Sequence[Path],
    out: Path,
    *,
    suite: str = "online_mind2web",
    policy: str = "imported",
    split: str = "test",
    judge_options: dict[str, Any] | None = None,
    cache_dir: Path | None = None,
) -> ImportSummary:
    """Read, judge and store; `judge_options` are JudgeSpec fields (protocol, base_url,
    model, prices, ...)."""
    from pydantic import ValidationError

    from rmsweb.judge.live import build_live_judge
    from rmsweb.judge.om2w_layout import read_run
    from rmsweb.spec.suite import (
        JudgeSpec,
        OnlineMind2WebSuite,
        WebTailBenchSuite,
        WebVoyagerSuite,
    )
    from rmsweb.store.layout import run_name
    from rmsweb.store.reader import read_rows
    from rmsweb.store.writer import ShardWriter
    from rmsweb.suites.benchmarks import build_live_suite

    classes = {
        "webvoyager": WebVoyagerSuite,
        "online_mind2web": OnlineMind2WebSuite,
        "webtailbench": WebTailBenchSuite,
    }
    if suite not in classes:
        raise UserError(f"--suite must be one of {', '.join(classes)}, not {suite!r}.")
    try:
        judge_spec = JudgeSpec(**(judge_options or {}))
    except ValidationError as exc:
        raise UserError(f"judge options: {exc}") from None
    # The bundled task file of the suite: its categories (and the judge protocol's default);
    # WebVoyager's original file, which holds every task id of the cleaned one.
    extra = {"cleaned": False} if suite == "webvoyager" else {}
    suite_spec = classes[suite](judge=judge_spec, **extra)
    inputs = [inp for d in dirs for inp in read_run(Path(d))]
    ids = Counter(inp.episode_id for inp in inputs)
    twice = [i for i, n in ids.items() if n > 1]
    if twice:
        raise UserError(f"a trajectory folder name appears twice among the inputs: {twice[0]}.")
    judge = build_live_judge(suite_spec, build_live_suite(suite_spec), cache_dir=cache_dir)
    run = run_name(out)
    out.mkdir(parents=True, exist_ok=True)

    async def go() -> int:
        try:
            with ShardWriter(out) as sink:
                return await judge_inputs(
                    judge, inputs, sink, run=run, suite=suite, policy=policy, split=split
                )
        finally:
            await judge.close()

    judged = asyncio.run(go())
    totals = judge.client.totals()
    per_category: dict[str, tuple[int, int]] = {}
    for ep in read_rows(out, "episodes"):
        wins, n = per_category.get(ep.category or "?", (0, 0))
        per_category[ep.category or "?"] = (wins + int(ep.success), n + 1)
    return ImportSummary(
        judged=judged,
        skipped=len(inputs) - judged,
        per_category=dict(sorted(per_category.items())),
        calls=totals.calls,
        cached=totals.cached,
        tokens_in=totals.tokens_in,
        tokens_out=totals.tokens_out,
        cost_usd=totals.cost_usd,
    )


def print_summary(summary: ImportSummary) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Judged trajectories")
    for col in ("category", "n", "success"):
        table.add_column(col, justify="left" if col == "category" else "right")
    wins = total = 0
    for category, (w, n) in summary.per_category.items():
        table.add_row(category, str(n), f"{w / n:.1%}")
        wins, total = wins + w, total + n
    table.add_row("all", str(total), f"{wins / total:.1%}" if total else "—")
    console = Console()
    console.print(table)
    console.print(
        f"judged {summary.judged} now, {summary.skipped} already stored; "
        f"{summary.calls} judge calls ({summary.cached} from the cache), "
        f"{summary.tokens_in} tokens in, {summary.tokens_out} out, ${summary.cost_usd:.4f} spent."
    )
