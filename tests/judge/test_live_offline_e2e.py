"""A live-suite episode end to end, offline: a local multi-page shop on 127.0.0.1 stands
in for a live site, with a WebVoyager-shaped task. The episode runs under the safety
policy (the shop's origin named as the one private origin allowed), is exported in the
Online-Mind2Web layout, read back, and judged by WebVoyager's protocol through a real
OpenAI-compatible server (`transformers serve` with a tiny random Qwen3-VL).

Phase-1 note: the episode runner does not hand live suites' safety policy to its browser
pool yet; `guarded_pool` does it here, as the runner will.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from rmsweb.agents.base import ActResult
from rmsweb.env import pool as pool_module
from rmsweb.env.server import StaticServer
from rmsweb.env.types import ActRequest
from rmsweb.judge.episode import from_record
from rmsweb.judge.om2w_layout import export_run, read_trajectory
from rmsweb.judge.protocols import build_judge_client, judge_episode, judge_options
from rmsweb.judge.webvoyager import parse_verdict
from rmsweb.rollout.runner import EpisodeRunner
from rmsweb.spec.suite import JudgeSpec
from rmsweb.store.rows import MemorySink
from rmsweb.store.views import connect
from rmsweb.store.writer import ShardWriter, TableWriter
from rmsweb.suites.live import LiveSuite
from rmsweb.suites.webvoyager import load_webvoyager

pytestmark = pytest.mark.browser
SITE = Path(__file__).parent / "site"


class ShopAgent:
    """Tries a private address first (refused), then Products -> Blue Widget -> answer."""

    name = "shop-agent"

    def __init__(self, forbidden: str) -> None:
        self.forbidden = forbidden
        self.requests: list[ActRequest] = []

    async def act(self, request: ActRequest) -> ActResult:
        self.requests.append(request)
        obs = request.observation
        ids = {e.name: e.id for e in obs.elements.values()}
        if request.step == 0:
            text = f'Thought: the admin page may list prices\nAction: goto("{self.forbidden}")'
        elif price := re.search(r"Price: (\$[\d.]+)", obs.text):
            text = f'Thought: the price is on the page\nAction: answer("{price.group(1)}")'
        elif "Blue Widget" in ids:
            text = f"Thought: open the blue widget\nAction: click({ids['Blue Widget']})"
        elif "Products" in ids:
            text = f"Thought: find the catalogue\nAction: click({ids['Products']})"
        else:
            text = "Action: stop()"
        return ActResult(text=text, tokens_in=120, tokens_out=12)

    async def close(self) -> None:
        pass


@pytest.fixture
def guarded_pool(monkeypatch):
    """Make the runner's pool carry the suite's navigation policy (phase 2 wires this)."""

    def install(suite: LiveSuite) -> None:
        class GuardedPool(pool_module.BrowserPool):
            def __init__(self, contexts: int, *, allowed_origins=None, **kw) -> None:
                assert allowed_origins is None  # a live suite names no origins
                super().__init__(contexts, policy=suite.navigation_policy, **kw)

        monkeypatch.setattr(pool_module, "BrowserPool", GuardedPool)

    return install


def test_live_episode_export_and_judge_offline(tmp_path, guarded_pool, vl_server) -> None:
    with StaticServer(SITE) as shop, StaticServer(SITE) as other:
        tasks_file = tmp_path / "tasks.jsonl"
        tasks_file.write_text(
            json.dumps(
                {
                    "web_name": "Local Shop",
                    "id": "Local Shop--0",
                    "ques": "Find the price of the Blue Widget.",
                    "web": shop.url("index.html"),
                }
            )
            + "\n"
        )
        tasks = load_webvoyager(tasks_file)
        suite = LiveSuite(
            "webvoyager", tasks, max_steps=6, max_wall_s=60, private_origins=[shop.origin]
        )
        split = suite.split("Local Shop--0")
        guarded_pool(suite)
        agent = ShopAgent(other.url("admin.html"))

        async def run():
            runner = EpisodeRunner(
                suite, contexts=1, screenshots=True, progress=False, max_env_retries=0,
                viewport=(320, 240),  # small screenshots: ~75 image tokens each for the tiny judge
                run="eval/live-e2e", stage="eval",
            )  # fmt: skip
            async with runner:
                sink = MemorySink()
                await runner.run(agent, ["Local Shop--0"], suite.seeds(split), sink, split=split)
            return sink.records

        (record,) = asyncio.run(run())

    # ---- the episode: a refused navigation is a step error, the rest goes through
    ep = record.episode
    assert ep.error is None and ep.env_retries == 0
    assert ep.instruction == "Find the price of the Blue Widget."
    assert ep.answer == "$12.50" and ep.n_steps == 4
    assert (ep.tokens_in, ep.tokens_out) == (4 * 120, 4 * 12)  # the policy's cost
    steps = record.steps
    assert steps[0].env_error == (
        f"navigation to {other.url('admin.html')} is blocked (a private address (127.0.0.1))"
    )
    assert agent.requests[1].observation.last_error == steps[0].env_error
    assert [s.url.rsplit("/", 1)[-1] for s in steps] == [
        "index.html", "index.html", "products.html", "blue-widget.html",
    ]  # fmt: skip
    assert all(s.screenshot is not None for s in steps)  # kept for the judge
    # stored once per distinct image: the refused goto left the first page as it was
    assert steps[0].screenshot == steps[1].screenshot and len(record.screenshots) == 3

    # ---- stored like any run, exported in the Online-Mind2Web layout, read back
    run_dir = tmp_path / "runs" / "eval" / "live-e2e"
    with ShardWriter(run_dir) as writer:
        writer.write(record)
    (folder,) = export_run([record], tmp_path / "om2w")
    result = json.loads((folder / "result.json").read_text())
    history = result["action_history"]
    assert history[0] == f"-> GOTO: {other.url('admin.html')}" and len(history) == 3
    assert re.fullmatch(r'\[\d+\] link "Products" -> CLICK', history[1])
    assert re.fullmatch(r'\[\d+\] link "Blue Widget" -> CLICK', history[2])
    assert result["final_result_response"] == "$12.50"
    assert len(list((folder / "trajectory").iterdir())) == 4
    inp = read_trajectory(folder)
    assert inp.screenshots == from_record(record).screenshots

    # ---- judged through a real OpenAI-compatible server, then again from the cache
    spec = JudgeSpec(
        base_url=vl_server.base_url,
        model=vl_server.model,
        max_tokens=8,  # a random tiny model: its words do not matter, only the plumbing
        concurrency=1,
    )

    async def judge_twice():
        client = build_judge_client(spec, cache_dir=tmp_path / "judge-cache")
        try:
            first = await judge_episode("webvoyager", inp, client, **judge_options(spec))
            again = await judge_episode("webvoyager", inp, client, **judge_options(spec))
        finally:
            await client.close()
        return first, again, client

    first, again, client = asyncio.run(judge_twice())
    row, cached = client.rows
    assert not row.cached and cached.cached and row.inputs_hash == cached.inputs_hash
    verdict = parse_verdict(row.output_text)
    assert first.success == again.success == bool(verdict)
    assert (row.parse_ok, row.verdict) == (verdict is not None, "success" if verdict else "failure")
    # the four screenshots reached the model: each costs image tokens (320x240 / 16^2 / 4 = 75)
    assert row.tokens_in > 4 * 75 and 0 < row.tokens_out <= 8
    assert client.totals().calls == 2 and client.totals().cached == 1

    # ---- the judgments table joins the episodes table
    with TableWriter(run_dir, "judgments") as writer:
        writer.write_many(client.take_rows())
    con = connect({"eval/live-e2e": run_dir})
    joined = con.execute(
        "SELECT e.task_id, e.answer, count(*), sum(CASE WHEN j.cached THEN 0 ELSE j.tokens_in END) "
        "FROM episodes e JOIN judgments j ON j.task_id = e.task_id GROUP BY ALL"
    ).fetchall()
    assert joined == [("Local Shop--0", "$12.50", 2, row.tokens_in)]
