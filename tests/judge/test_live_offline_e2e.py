"""A live suite end to end, offline, through the real `rmsweb eval` stage.

A local multi-page shop on 127.0.0.1 stands in for a live site: two WebVoyager-shaped
tasks, one in the val split and one in test (split by task-id hash). The policy is an
OpenAI-compatible endpoint scripted here (it first tries a private address the safety
policy refuses, then browses to the price and answers). Each episode is judged by
WebVoyager's protocol through a real OpenAI-compatible server (`transformers serve`
with a tiny random Qwen3-VL) before it is stored. Then: a rerun skips everything, a
second eval gets every usable verdict from the judge cache (a random model's unreadable
reply is a judge failure: asked three times, never cached, asked again), the report has
the live section, and the run goes out in the Online-Mind2Web layout and comes back
through `rmsweb judge-om2w` with the same verdicts.

A reasoning-model judge and the authors' scoring of the exported run:
test_live_reasoning_e2e.py.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from rmsweb.cli import app
from rmsweb.env.server import StaticServer
from rmsweb.judge.client import JUDGE_RETRIES
from rmsweb.judge.webvoyager import parse_verdict
from rmsweb.report.build import build_report
from rmsweb.report.document import to_markdown
from rmsweb.store.reader import read_records, read_rows
from rmsweb.suites.live import split_of

pytestmark = pytest.mark.browser
SITE = Path(__file__).parent / "site"
EXP, POLICY = "live-e2e", "shop-agent"
TEST_FRACTION, VAL_FRACTION = 0.5, 0.3
TOKENS_IN, TOKENS_OUT = 120, 12  # what the scripted policy endpoint reports per call


def shop_action(prompt: str, forbidden: str) -> str:
    """The scripted policy: a refused detour first, then Products -> the product -> answer."""
    product = re.search(r"Task: Find the price of the (.+?)\.", prompt).group(1)
    page = prompt.split("Page:\n", 1)[1]
    if "Previous actions:" not in prompt:
        return f'Thought: an admin page may list prices\nAction: goto("{forbidden}")'
    if price := re.search(r"Price: (\$[\d.]+)", page):
        return f'Thought: the price is on the page\nAction: answer("{price.group(1)}")'
    for name in (product, "Products"):
        if link := re.search(rf'\[(\d+)\] link "{name}"', page):
            return f"Thought: open {name}\nAction: click({link.group(1)})"
    return "Action: stop()"


@pytest.fixture
def policy_endpoint() -> Iterator[dict[str, Any]]:
    """An OpenAI-compatible chat endpoint that plays `shop_action` (set state["forbidden"])."""
    state: dict[str, Any] = {"forbidden": "", "prompts": []}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            prompt = body["messages"][-1]["content"]
            state["prompts"].append(prompt)
            text = shop_action(prompt, state["forbidden"])
            usage = {"prompt_tokens": TOKENS_IN, "completion_tokens": TOKENS_OUT}
            reply = {"choices": [{"message": {"role": "assistant", "content": text}}]}
            payload = json.dumps({**reply, "usage": usage}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    state["base_url"] = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def task_ids() -> dict[str, str]:
    """One task id per eval split (ids are hashed into splits; pick the first that land)."""
    found: dict[str, str] = {}
    for i in range(100):
        task_id = f"Local Shop--{i}"
        found.setdefault(split_of(task_id, TEST_FRACTION, VAL_FRACTION), task_id)
    return found


def write_params(tmp_path: Path, shop: StaticServer, policy_url: str, judge: Any) -> Path:
    ids = task_ids()
    products = {"val": "Red Widget", "test": "Blue Widget"}
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(
            json.dumps(
                {
                    "web_name": "Local Shop",
                    "id": ids[split],
                    "ques": f"Find the price of the {product}.",
                    "web": shop.url("index.html"),
                }
            )
            + "\n"
            for split, product in products.items()
        )
    )
    endpoint = {"base_url": policy_url, "model": POLICY, "concurrency": 1}
    spec = {
        "name": EXP,
        "suite": {
            "kind": "webvoyager",
            "tasks_file": str(tasks),
            "test_fraction": TEST_FRACTION,
            "val_fraction": VAL_FRACTION,
            "max_steps": 6,
            "max_wall_s": 60,
            "private_origins": [shop.origin],  # the shop; any other private address: refused
            "browser": {
                "contexts": 1,
                "max_env_retries": 0,
                "episode_timeout_s": 120,
                # small screenshots: ~75 image tokens each for the tiny judge
                "viewport_width": 320,
                "viewport_height": 240,
            },
            "judge": {
                "base_url": judge.base_url,
                "model": judge.model,
                "max_tokens": 8,  # a random tiny model: its words do not matter, the plumbing does
                "concurrency": 1,
                "prices": {"input_usd_per_mtok": 1.0, "output_usd_per_mtok": 4.0},
            },
        },
        "collect": {"teacher": {"kind": "openai", **endpoint}},
        "mine": {"mode": "judge"},
        "eval": {
            "splits": ["val", "test"],
            "policies": [
                {
                    "kind": "openai",
                    "name": POLICY,
                    **endpoint,
                    "prices": {"input_usd_per_mtok": 2.0, "output_usd_per_mtok": 8.0},
                }
            ],
        },
    }
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({EXP: spec}, sort_keys=False))
    return params


def run_eval(params: Path, out: Path, metrics: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["eval", "--exp", EXP, "--policy", POLICY, "--params", str(params), "--out", str(out),
         "--metrics", str(metrics)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output + repr(result.exception)


def test_live_eval_stage_judges_reports_exports_and_imports(
    tmp_path, monkeypatch, policy_endpoint, vl_server
) -> None:
    cache = tmp_path / "judge-cache"  # outside the stage's output, as .rmsweb-cache is
    monkeypatch.setenv("RMSWEB_JUDGE_CACHE", str(cache))
    runs = tmp_path / "runs"
    out, metrics = runs / "eval" / EXP / POLICY, tmp_path / "metrics" / "eval" / f"{EXP}.json"
    with StaticServer(SITE) as shop, StaticServer(SITE) as other:
        policy_endpoint["forbidden"] = other.url("admin.html")
        params = write_params(tmp_path, shop, policy_endpoint["base_url"], vl_server)
        run_eval(params, out, metrics)
        prompts = list(policy_endpoint["prompts"])
        # 2 episodes x 4 steps (a loaded machine may resend a request that timed out)
        assert len(set(prompts)) == 8
        run_eval(params, out, metrics)  # a rerun: every episode is stored, nothing runs
        assert policy_endpoint["prompts"] == prompts
        out2 = runs / "eval" / f"{EXP}-again" / POLICY
        run_eval(params, out2, tmp_path / "metrics" / "again.json")

    # ---- the episodes: one per split, each judged before it was stored
    ids = task_ids()
    records = {r.episode.split: r for r in read_records(out)}
    assert sorted(records) == ["test", "val"]
    answers = {"val": "$9.99", "test": "$12.50"}
    for split, rec in records.items():
        ep = rec.episode
        assert (ep.task_id, ep.seed, ep.error, ep.n_steps) == (ids[split], 0, None, 4)
        assert ep.answer == answers[split] and ep.category == "Local Shop"
        assert (ep.tokens_in, ep.tokens_out) == (4 * TOKENS_IN, 4 * TOKENS_OUT)
        assert ep.cost_usd == pytest.approx((4 * TOKENS_IN * 2.0 + 4 * TOKENS_OUT * 8.0) / 1e6)
        # the safety policy: the private address is refused, the shop's origin is not
        assert rec.steps[0].env_error == (
            f"navigation to {other.url('admin.html')} is blocked (a private address (127.0.0.1))"
        )
        assert all(s.screenshot is not None for s in rec.steps)  # kept for the judge
        # the verdict is the success; its calls are stored with the episode: one, or
        # three when the tiny model's words are no verdict (a judge failure, asked again)
        j = rec.judgments[-1]
        verdict = parse_verdict(j.output_text)
        assert len(rec.judgments) == (1 if verdict is not None else 1 + JUDGE_RETRIES)
        assert len({r.inputs_hash for r in rec.judgments}) == 1  # the same request
        assert ep.success == bool(verdict) and ep.reward == float(bool(verdict))
        assert (j.protocol, j.model, j.cached) == ("webvoyager", vl_server.model, False)
        expected = "judge_failed" if verdict is None else "success" if verdict else "failure"
        assert (j.parse_ok, j.verdict) == (verdict is not None, expected)
        # three distinct screenshots reached the judge: 320x240 / 16^2 / 4 = 75 tokens each
        assert j.tokens_in > 3 * 75 and 0 < j.tokens_out <= 8
        assert j.cost_usd == pytest.approx((j.tokens_in * 1.0 + j.tokens_out * 4.0) / 1e6)

    # ---- metrics per split, and the evals table
    m = json.loads(metrics.read_text())
    assert (m["split"], m["n"], m["val"]["n"]) == ("test", 1, 1)
    assert m["success"] == float(records["test"].episode.success)
    assert m["per_category"] == {"Local Shop": m["success"]} and "per_task" not in m

    # ---- a second eval asks the same questions: the cache answers what was usable for
    # free; a judge failure was not cached and is asked again
    again = {r.episode.split: r for r in read_records(out2)}
    usable = {s: r.judgments[-1].parse_ok for s, r in records.items()}
    for split, rec in again.items():
        assert [j.cached for j in rec.judgments] == (
            [True] if usable[split] else [False] * (1 + JUDGE_RETRIES)
        )
        assert all(j.cost_usd == 0.0 for j in rec.judgments) == usable[split]
        assert rec.judgments[-1].output_text == records[split].judgments[-1].output_text
    assert len(list(cache.rglob("*.json"))) == sum(usable.values())

    # ---- the report: judged accuracy per benchmark and category, and the cost per task
    rep = build_report({f"eval-{POLICY}": out}, title="live")
    md = to_markdown(rep.document)
    assert "## Live benchmarks: judged accuracy and cost" in md
    assert f"| {EXP}/{POLICY} | webvoyager | test | Local Shop | 1 |" in md
    key = f"live/{EXP}/{POLICY}/webvoyager/test"
    assert rep.metrics[f"{key}/success"] == float(records["test"].episode.success)
    assert rep.metrics[f"{key}/policy_usd_per_task"] == pytest.approx(
        records["test"].episode.cost_usd
    )
    assert rep.metrics[f"{key}/judge_usd_per_task"] == pytest.approx(
        sum(j.cost_usd for j in records["test"].judgments)
    )
    assert rep.metrics[f"{key}/category/Local Shop"] == rep.metrics[f"{key}/success"]

    # ---- out in the Online-Mind2Web layout, back in through judge-om2w: same verdicts
    layout = tmp_path / "om2w"
    result = CliRunner().invoke(app, ["export-om2w", str(out), str(layout)])
    assert result.exit_code == 0 and "wrote 2 task folder(s)" in result.output
    folder = layout / ids["test"].replace(" ", "_")
    exported = json.loads((folder / "result.json").read_text())
    assert exported["final_result_response"] == "$12.50"
    assert exported["action_history"][0] == f"-> GOTO: {other.url('admin.html')}"
    assert len(list((folder / "trajectory").iterdir())) == 4
    imported = runs / "import" / "shop-agent"
    result = CliRunner().invoke(
        app,
        ["judge-om2w", str(layout), "--out", str(imported), "--suite", "webvoyager",
         "--base-url", vl_server.base_url, "--model", vl_server.model, "--max-tokens", "8",
         "--concurrency", "1", "--agent", POLICY],
    )  # fmt: skip
    assert result.exit_code == 0, result.output + repr(result.exception)
    hits = sum(usable.values())
    calls = hits + (1 + JUDGE_RETRIES) * (len(usable) - hits)
    assert f"{calls} judge calls ({hits} from the cache)" in result.output
    back = {e.task_id: e for e in read_rows(imported, "episodes")}
    for rec in records.values():
        ep = rec.episode
        assert back[ep.task_id].success == ep.success and back[ep.task_id].answer == ep.answer
    assert sum(j.cached for j in read_rows(imported, "judgments")) == hits
