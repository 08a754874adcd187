"""Online-Mind2Web end to end, offline, with a reasoning-model judge; and the exported run
scored by the benchmark authors' own logic equals rmsweb's success on the same run.

The site is the local shop (tests/judge/site) on 127.0.0.1; the policy a scripted
OpenAI-compatible endpoint. The judge is a stub of o4-mini on 127.0.0.1 that behaves as
OpenAI does for reasoning models: HTTP 400 for `max_tokens` or any `temperature`, and an
empty reply (finish_reason "length") when its reasoning spends the cap, here the first
key-point request of each task, and every verdict request of one task. Five tasks:
  red     the policy finds the price: success;
  blue    it opens the wrong product and answers: the judge says failure;
  slow    it wanders About/Home until max_steps: failure, and the page after its last
          click is the N+1th screenshot;
  again   it finds the price, but the judge never answers the verdict: a judge failure;
  mirror  its site is down: an environment error, never judged.
rmsweb's eval stage judges each episode with WebJudge before storing it; then the run
goes out with `rmsweb export-om2w`, and `authors_success_rate` (the authors' run.py and
WebJudge, reimplemented below from their published scripts) scores the folders with the
same judge. It never calls rmsweb's metric code: the prompts are rmsweb's constants,
which tests/judge/test_judge_prompts.py pins to the published text.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from PIL import Image
from typer.testing import CliRunner

from rmsweb.agents.model_family import REASONING_MIN_COMPLETION_TOKENS
from rmsweb.cli import app
from rmsweb.env.server import StaticServer
from rmsweb.judge import webjudge
from rmsweb.report.build import build_report
from rmsweb.report.document import to_markdown
from rmsweb.store.reader import read_records
from rmsweb.suites.live import split_of

pytestmark = pytest.mark.browser
SITE = Path(__file__).parent / "site"
EXP, POLICY, JUDGE = "om2w-e2e", "shop-agent", "o4-mini"
TEST_FRACTION = 0.9
MAX_STEPS = 4
GOALS = {
    "red": "Find the price of the Red Widget.",
    "blue": "Find the price of the Blue Widget.",
    "slow": "Find the price of the Green Gadget, slowly.",
    "again": "Find the price of the Blue Widget, again.",
    "mirror": "Find the price of the Red Widget on the mirror.",
}


# --------------------------------------------------------------------------- the policy


def shop_policy(prompt: str) -> str:
    goal = re.search(r"^Task: (.+)$", prompt, re.M).group(1)
    page = prompt.split("Page:\n", 1)[1]

    def click(name: str) -> str | None:
        link = re.search(rf'\[(\d+)\] link "{name}"', page)
        return f"Action: click({link.group(1)})" if link else None

    if goal == GOALS["slow"]:  # never answers
        return click("About us") or click("Home") or "Action: stop()"
    if price := re.search(r"Price: (\$[\d.]+)", page):
        return f'Thought: the price is on the page\nAction: answer("{price.group(1)}")'
    product = re.search(r"price of the (Red Widget|Blue Widget|Green Gadget)", goal).group(1)
    if goal == GOALS["blue"]:
        product = "Green Gadget"  # the wrong product
    return click(product) or click("Products") or "Action: stop()"


# --------------------------------------------------------------------------- the endpoints


def serve(handle: Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]) -> Iterator[str]:
    """An OpenAI-compatible chat endpoint on 127.0.0.1 answering with `handle(body)`."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            status, reply = handle(body)
            payload = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def completion(text: str, completion_tokens: int = 40) -> dict[str, Any]:
    finish = "length" if not text else "stop"
    message = {"role": "assistant", "content": text}
    usage = {"prompt_tokens": 1000, "completion_tokens": completion_tokens}
    return {"choices": [{"index": 0, "finish_reason": finish, "message": message}], "usage": usage}


@pytest.fixture
def policy_endpoint() -> Iterator[str]:
    yield from serve(lambda body: (200, completion(shop_policy(body["messages"][-1]["content"]))))


class ReasoningJudge:
    """o4-mini as OpenAI serves it, scripted (see the module docstring)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bodies: list[dict[str, Any]] = []
        self.refused: list[str] = []  # the parameter of each HTTP 400
        self.asked: set[tuple[str, str]] = set()  # (call, task) asked before

    def __call__(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.bodies.append(body)
            for param in ("max_tokens", "temperature"):
                if param in body:
                    self.refused.append(param)
                    return 400, refusal(param)
            system, text = body["messages"][0]["content"], user_text(body["messages"][1])
            task = re.search(r"Task\**: (.+)", text).group(1)
            call = kind(system)
            first = (call, task) not in self.asked
            self.asked.add((call, task))
        cap = body["max_completion_tokens"]
        if call == "key_points":
            if first:  # the reasoning spent the cap: nothing visible
                return 200, completion("", cap)
            return 200, completion("**Key Points**:\n1. Open the product's page\n2. Its price")
        if call == "image":
            return 200, completion("**Reasoning**: A page of the shop.\n**Score**: 4")
        if task == GOALS["again"]:
            return 200, completion("", cap)  # never a verdict for this one
        product = re.search(r"price of the (Red Widget|Blue Widget|Green Gadget)", task).group(1)
        done = f'link "{product}" -> CLICK' in text.split("Action History:", 1)[1]
        return 200, completion(f"Thoughts: checked.\nStatus: {'success' if done else 'failure'}")


def refusal(param: str) -> dict[str, Any]:
    """OpenAI's error bodies for o-series models."""
    message = {
        "max_tokens": "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
        "temperature": "Unsupported value: 'temperature' does not support 0 with this model. "
        "Only the default (1) value is supported.",
    }[param]
    code = "unsupported_parameter" if param == "max_tokens" else "unsupported_value"
    return {"error": {"message": message, "type": "invalid_request_error", "param": param,
                      "code": code}}  # fmt: skip


def kind(system: str) -> str:
    if system == webjudge.KEY_POINTS_SYSTEM:
        return "key_points"
    return "image" if system == webjudge.IMAGE_SYSTEM else "final"


def user_text(message: dict[str, Any]) -> str:
    content = message["content"]
    return content if isinstance(content, str) else content[0]["text"]


@pytest.fixture
def judge_endpoint() -> Iterator[tuple[str, ReasoningJudge]]:
    judge = ReasoningJudge()
    for url in serve(judge):
        yield url, judge


# --------------------------------------------------------------------------- the authors'


def authors_success_rate(trajectories_dir: Path, generate: Callable[[list], str]) -> float:
    """The Online-Mind2Web authors' scoring of a run folder, mode
    WebJudge_Online_Mind2Web_eval, reimplemented from OSU-NLP-Group/Online-Mind2Web at
    commit ccdeb0d6327c1bb48ae15f35afa2dfedb21bb60e: src/run.py (`parallel_eval`,
    `auto_eval`), src/methods/webjudge_online_mind2web.py and src/utils.py
    (`extract_predication`); identical in microsoft/fara
    webeval/src/webeval/benchmarks/om2w/impl/ at 3f3f1fd82cc2769a6630932d1670bac7349f4a42."""
    root = str(trajectories_dir)
    # run.py parallel_eval: every folder directly under the run is a task
    task_dirs = [d for d in sorted(os.listdir(root)) if os.path.isdir(os.path.join(root, d))]
    labels = []
    for task_id in task_dirs:  # run.py auto_eval
        images_dir = os.path.join(root, task_id, "trajectory")
        with open(os.path.join(root, task_id, "result.json")) as f:
            result = json.load(f)
        task, actions = result["task"], result.get("action_history")
        paths = [
            os.path.join(images_dir, image)
            for image in sorted(os.listdir(images_dir), key=lambda x: int(re.findall(r"\d+", x)[0]))
        ]
        messages = authors_webjudge(task, actions, paths, generate, score_threshold=3)
        labels.append(extract_predication(generate(messages)))
    return sum(labels) / len(task_dirs)  # "The success rate is ..."


def authors_webjudge(task, last_actions, images_path, generate, score_threshold):
    """WebJudge_Online_Mind2Web_eval: key points, a score per screenshot, the final prompt."""
    key_points = generate(
        [
            {"role": "system", "content": webjudge.KEY_POINTS_SYSTEM},
            {"role": "user", "content": [{"type": "text", "text": f"Task: {task}"}]},
        ]
    )
    key_points = key_points.replace("\n\n", "\n")
    try:
        key_points = key_points.split("**Key Points**:")[1]
        key_points = "\n".join(line.lstrip() for line in key_points.splitlines())
    except IndexError:
        key_points = key_points.split("Key Points:")[-1]
        key_points = "\n".join(line.lstrip() for line in key_points.splitlines())
    images, thoughts, thought = [], [], ""
    for path in images_path:  # judge_image, then the loop over its responses
        jpeg = encode_image(Image.open(path))
        text = webjudge.IMAGE_USER.format(task=task, key_points=key_points)
        url = {"url": f"data:image/jpeg;base64,{jpeg}", "detail": "high"}
        response = generate(
            [
                {"role": "system", "content": webjudge.IMAGE_SYSTEM},
                {"role": "user", "content": [{"type": "text", "text": text},
                                             {"type": "image_url", "image_url": url}]},
            ]
        )  # fmt: skip
        try:
            score_text = response.split("Score")[1]
            thought = response.split("**Reasoning**:")[-1].strip().lstrip("\n")
            thought = thought.split("\n\n")[0].replace("\n", " ")
            score = re.findall(r"[1-5]", score_text)[0]
        except IndexError:
            score = 0
        if int(score) >= score_threshold:
            url = {"url": f"data:image/png;base64,{jpeg}", "detail": "high"}
            images.append({"type": "image_url", "image_url": url})
            if thought != "":
                thoughts.append(thought)
    images, thoughts = images[:50], thoughts[:50]  # MAX_IMAGE
    prompt = webjudge.FINAL_USER if images else webjudge.FINAL_USER_NO_IMAGES
    history = "\n".join(f"{i + 1}. {a}" for i, a in enumerate(last_actions))
    reasons = "\n".join(f"{i + 1}. {t}" for i, t in enumerate(thoughts))
    text = prompt.format(task=task, last_actions=history, key_points=key_points, thoughts=reasons)
    return [
        {"role": "system", "content": webjudge.FINAL_SYSTEM},
        {"role": "user", "content": [{"type": "text", "text": text}, *images]},
    ]


def encode_image(image: Image.Image) -> str:
    """utils.encode_image: RGB JPEG, base64."""
    if image.mode == "RGBA":
        image = image.convert("RGB")
    buffered = io.BytesIO()
    image.save(buffered, format="JPEG")
    return base64.b64encode(buffered.getvalue()).decode("utf-8")


def extract_predication(response: str) -> int:
    """utils.extract_predication, mode WebJudge_Online_Mind2Web_eval."""
    try:
        return 1 if "success" in response.lower().split("status:")[1] else 0
    except IndexError:
        return 0


# --------------------------------------------------------------------------- the run


def task_ids() -> dict[str, str]:
    """One test-split task id per goal (ids are hashed into splits)."""
    ids = (f"shop-{i:02d}" for i in range(200))
    test = [t for t in ids if split_of(t, TEST_FRACTION, 0.0) == "test"]
    return dict(zip(GOALS, test, strict=False))


def write_params(tmp_path: Path, shop: StaticServer, policy_url: str, judge_url: str) -> Path:
    down = StaticServer(SITE)  # an origin with nothing listening: the mirror is down
    with down:
        mirror = down.origin
    ids = task_ids()
    start = {name: shop.url("index.html") for name in GOALS} | {"mirror": f"{mirror}/index.html"}
    tasks = [
        {"task_id": ids[name], "confirmed_task": goal, "website": start[name],
         "reference_length": 3, "level": "easy"}
        for name, goal in GOALS.items()
    ]  # fmt: skip
    (tmp_path / "tasks.json").write_text(json.dumps(tasks))
    endpoint = {"base_url": policy_url, "model": POLICY, "concurrency": 1}
    spec = {
        "name": EXP,
        "suite": {
            "kind": "online_mind2web",
            "tasks_file": str(tmp_path / "tasks.json"),
            "test_fraction": TEST_FRACTION,
            "val_fraction": 0.0,
            "max_steps": MAX_STEPS,
            "max_wall_s": 60,
            "private_origins": [shop.origin, mirror],
            "browser": {
                "contexts": 1,
                "max_env_retries": 0,
                "episode_timeout_s": 120,
                "viewport_width": 320,
                "viewport_height": 240,
            },
            "judge": {
                "base_url": judge_url,
                "model": JUDGE,  # a reasoning model: max_completion_tokens, no temperature
                "concurrency": 2,
                "prices": {"input_usd_per_mtok": 1.1, "output_usd_per_mtok": 4.4},
            },
        },
        "collect": {"teacher": {"kind": "openai", **endpoint}},
        "mine": {"mode": "judge"},
        "eval": {"splits": ["test"], "policies": [{"kind": "openai", "name": POLICY, **endpoint}]},
    }
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({EXP: spec}, sort_keys=False))
    return params


def test_a_reasoning_judge_and_the_authors_scoring_agree_with_rmsweb(
    tmp_path, monkeypatch, policy_endpoint, judge_endpoint
) -> None:
    judge_url, judge = judge_endpoint
    monkeypatch.setenv("RMSWEB_JUDGE_CACHE", str(tmp_path / "judge-cache"))
    out = tmp_path / "runs" / "eval" / EXP / POLICY
    metrics = tmp_path / "metrics.json"
    with StaticServer(SITE) as shop:
        params = write_params(tmp_path, shop, policy_endpoint, judge_url)
        result = CliRunner().invoke(
            app,
            ["eval", "--exp", EXP, "--policy", POLICY, "--params", str(params),
             "--out", str(out), "--metrics", str(metrics)],
        )  # fmt: skip
        assert result.exit_code == 0, result.output + repr(result.exception)

    # ---- the judge was asked as a reasoning model is: never refused, room to think
    assert judge.refused == [] and judge.bodies
    assert {b["max_completion_tokens"] for b in judge.bodies} == {REASONING_MIN_COMPLETION_TOKENS}
    assert all(b["model"] == JUDGE for b in judge.bodies)

    # ---- the episodes: verdicts, judge failures apart, the final screenshot
    ids = task_ids()
    name_of = {v: k for k, v in ids.items()}
    recs = {name_of[r.episode.task_id]: r for r in read_records(out)}
    assert {k: r.episode.success for k, r in recs.items()} == {
        "red": True, "blue": False, "slow": False, "again": False, "mirror": False,
    }  # fmt: skip
    assert recs["mirror"].episode.error is not None and recs["mirror"].judgments == []
    finals = {k: r.judgments[-1].verdict for k, r in recs.items() if r.judgments}
    assert finals == {"red": "success", "blue": "failure", "slow": "failure",
                      "again": "judge_failed"}  # fmt: skip
    for name in ("red", "blue", "slow", "again"):  # the empty key points: asked again
        kp = [j for j in recs[name].judgments if j.call == "key_points"]
        assert [j.note for j in kp] == ["judge failure (empty reply): asked again", None]
    again = [j for j in recs["again"].judgments if j.call == "final"]
    assert [j.verdict for j in again] == [None, None, "judge_failed"]
    slow = recs["slow"]
    assert slow.episode.n_steps == MAX_STEPS and slow.episode.answer is None
    assert slow.episode.final_screenshot is not None  # the page after the 4th click
    assert len([j for j in slow.judgments if j.call == "image_score"]) == MAX_STEPS + 1

    # ---- rmsweb's success, and the report's counts
    rmsweb_success = json.loads(metrics.read_text())["success"]
    assert rmsweb_success == 0.2
    rep = build_report({"eval": out}, title="om2w")
    key = f"live/{EXP}/{POLICY}/online_mind2web/test"
    assert rep.metrics[f"{key}/success"] == rmsweb_success
    assert (rep.metrics[f"{key}/judged_failed"], rep.metrics[f"{key}/judge_failures"]) == (2, 1)
    md = to_markdown(rep.document)
    assert "| webjudge / o4-mini | the Online-Mind2Web leaderboard" in md

    # ---- out in the layout: every episode a folder, N+1 screenshots
    layout = tmp_path / "om2w"
    result = CliRunner().invoke(app, ["export-om2w", str(out), str(layout)])
    assert result.exit_code == 0 and "wrote 5 task folder(s)" in result.output, result.output
    assert sorted(p.name for p in layout.iterdir()) == sorted(ids.values())
    slow_dir = layout / ids["slow"]
    slow_result = json.loads((slow_dir / "result.json").read_text())
    assert len(slow_result["action_history"]) == MAX_STEPS
    assert len(list((slow_dir / "trajectory").iterdir())) == MAX_STEPS + 1
    mirror = json.loads((layout / ids["mirror"] / "result.json").read_text())
    assert mirror["action_history"] == [] and "rmsweb_error" in mirror
    assert mirror["task"] == GOALS["mirror"]  # never loaded, still named (LiveJudge)

    # ---- the authors' scoring of the exported folders, with the same judge
    def generate(messages: list) -> str:
        body = {"model": JUDGE, "messages": messages}
        # the authors' OpenaiEngine sends max_tokens=512 and temperature=0, which o4-mini
        # refuses; how the request reaches the model is transport, not scoring
        body["max_completion_tokens"] = REASONING_MIN_COMPLETION_TOKENS
        reply = httpx.post(f"{judge_url}/chat/completions", json=body, timeout=60).json()
        return reply["choices"][0]["message"]["content"]

    assert authors_success_rate(layout, generate) == rmsweb_success
    assert judge.refused == []

    # the stub refuses what OpenAI refuses (else the first assertion above proves nothing)
    plain = {"model": JUDGE, "messages": [], "max_tokens": 512, "temperature": 0}
    assert httpx.post(f"{judge_url}/chat/completions", json=plain, timeout=10).status_code == 400
    assert judge.refused == ["max_tokens"]
