"""`make rehearsal`: paper-8b's pipeline on CPU in minutes (experiments/paper-8b-rehearsal.yaml).

    python scripts/rehearsal.py [--force] [--target report_paper-8b-rehearsal]

What it does, and why each piece stands where it does:
1. Renders the local shop (rmsweb/suites/rehearsal_site.py) into a temp folder and serves
   it on 127.0.0.1:18631, the origin its task file and the spec's private_origins name.
2. Serves one OpenAI-compatible endpoint on 127.0.0.1:18632 for every model call the
   paper's pipeline makes to a served model: the teacher's actions, its reflections,
   WebJudge's three kinds of calls and mine's first-error judge. Each request goes, as
   sent, to a tiny random Qwen3-VL behind `python -m rmsweb.models.processor serve`
   (`transformers serve`, on 127.0.0.1:18633): a request a real server refuses fails
   the run, and the reply's `usage` is that model's (screenshots included). The words
   are then the site oracle's (`gold_action`), not the random model's: collect needs
   successes to train on and failures to reflect on (a random model gives neither, and
   SFT refuses to run without a success), and mining needs first-error labels it can
   parse. `--no-model` answers without the served model (usage estimated).
3. Runs the preflight's CPU path first (`rmsweb preflight SPEC`, as a GPU spec's first
   stage runs on its GPUs): one SFT and one RL step (KL probe included) at the spec's
   micro-batch and longest prompt, the RL checkpoint written and read back, and the
   all-reduce, under torchrun with the same 2 gloo ranks; vLLM is GPU-only and skipped.
   A failed check stops the rehearsal before any stage runs (`--no-preflight`: skip it).
   Then the same preflight with compute.sharding fsdp (the path paper-32b takes on its
   GPUs): the SFT step through accelerate's FSDP2, the RL step, KL probe and checkpoint
   through rmsweb/train/sharding.py, on the same 2 gloo ranks.
4. Runs `dvc repro <target>` with RMSWEB_TORCHRUN set, so the sft and rl stages re-run
   themselves under torchrun with 2 CPU ranks (gloo), as the SkyPilot task does with GPUs.
5. Stops both servers; the exit code is the preflight's or dvc's. Nothing reaches past
   127.0.0.1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from rmsweb.env.actions import ParseError, format_action, parse_action
from rmsweb.env.server import StaticServer
from rmsweb.judge.reflect import REFLECTION_PROMPT
from rmsweb.judge.webjudge import FINAL_SYSTEM, IMAGE_SYSTEM, KEY_POINTS_SYSTEM
from rmsweb.mine.judge import FIRST_ERROR_PROMPT
from rmsweb.suites import rehearsal_site as site

ROOT = Path(__file__).resolve().parents[1]
ENDPOINT_PORT = 18632  # fixed: the spec's teacher and judge base_url name it
MODEL_PORT = 18633  # the tiny served model behind the endpoint
READY_S = 600  # `transformers serve` start-up: ~5 s quiet; > 240 s niced on a machine at load 14
TARGET = "report_paper-8b-rehearsal"
TORCHRUN = "--standalone --nproc_per_node=2"  # 2 CPU ranks on this node (gloo)
SPEC = "experiments/paper-8b-rehearsal.yaml"
PREFLIGHT_OUT = "runs/preflight/paper-8b-rehearsal"  # its metrics.json: the figures


def preflight_command(python: str = sys.executable, sharded: bool = False) -> list[str]:
    """The preflight's CPU path on the rehearsal spec (the GPU specs' first stage);
    `sharded`: with compute.sharding fsdp, its figures in PREFLIGHT_OUT-fsdp."""
    cmd = [python, "-m", "rmsweb", "preflight", SPEC]
    if sharded:
        return [*cmd, "--out", f"{PREFLIGHT_OUT}-fsdp", "-o", "compute.sharding=fsdp"]
    return [*cmd, "--out", PREFLIGHT_OUT]


# --------------------------------------------------------------------------- the endpoint


def _text(content: Any) -> str:
    """The text of a message's content (a string, or a list of parts)."""
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content if p.get("type") == "text")


def _images(messages: list[dict[str, Any]]) -> int:
    return sum(
        p.get("type") == "image_url"
        for m in messages
        if isinstance(m["content"], list)
        for p in m["content"]
    )


def _same(a: str, b: str) -> bool:
    pa, pb = parse_action(a), parse_action(b)
    if isinstance(pa, ParseError) or isinstance(pb, ParseError):
        return False
    return format_action(pa) == format_action(pb)


def makes_mistake(task: site.SiteTask) -> bool:
    """Attempt 0 goes wrong on about half of the product tasks (stable across runs)."""
    return task.path[0] == "Products" and zlib.crc32(task.id.encode()) % 2 == 0


def teacher_action(task: site.SiteTask, page: str, lessons: bool) -> str:
    """The teacher: the gold action, except that on a first attempt (no lessons yet) a
    mistaken task opens the wrong product and answers from that page."""
    if makes_mistake(task) and not lessons:
        heading = [name for _, role, name in site.elements(page) if role == "heading"]
        products = {name for name, _, _ in site.PRODUCTS}
        if heading and heading[0] != task.heading and heading[0] in products:
            return f'answer("{site.fact_on_page(page) or "unknown"}")'
        wrong = site.wrong_link(task, page)
        if wrong is not None:
            return wrong
    return site.gold_action(task, page)


def first_wrong_step(task: site.SiteTask, steps: list[tuple[str, str]]) -> tuple[int, str] | None:
    """(1-based step, right action) of the first step whose action is not the oracle's."""
    for i, (page, taken) in enumerate(steps, 1):
        gold = site.gold_action(task, page)
        if not _same(taken, gold):
            return i, gold
    return None


_FIRST_ERROR_STEP = re.compile(
    r"^Step (\d+)\nPage:\n(.*?)\nAction taken: (.*?)(?: -> error:.*)?$", re.S | re.M
)


def _first_error_steps(prompt: str) -> list[tuple[str, str]]:
    body = prompt.split("\n\n", 2)[-1].rsplit("\n\nReply with", 1)[0]
    steps = []
    for block in re.split(r"\n\n(?=Step \d+\n)", body):
        m = _FIRST_ERROR_STEP.match(block.strip("\n"))
        if m:
            steps.append((m.group(2), m.group(3).strip()))
    return steps


def _reflection_steps(prompt: str) -> list[tuple[str, str]]:
    steps = []
    for m in re.finditer(r"Step \d+: page:\n(.*?)\n  action: ([^\n]*)", prompt, re.S):
        page = "\n".join(line.removeprefix("    ") for line in m.group(1).splitlines())
        steps.append((page, re.sub(r" -> error:.*", "", m.group(2))))
    return steps


def _task(text: str, label: str) -> site.SiteTask | None:
    m = re.search(rf"^{label}\s*(.+)$", text, re.M)
    return site.task_by_question(m.group(1)) if m else None


def reply(messages: list[dict[str, Any]]) -> tuple[str, str]:
    """(role, reply text) for one chat request; role names which call it was."""
    system = _text(messages[0]["content"]) if messages[0]["role"] == "system" else ""
    user = _text(messages[-1]["content"])
    if system == KEY_POINTS_SYSTEM:
        task = _task(user, "Task:")
        return "key_points", "**Key Points**:\n1. " + (task.question if task else user)
    if system == IMAGE_SYSTEM:
        return "image_score", "**Reasoning**: a page of the shop.\n**Score**: 4"
    if system == FINAL_SYSTEM:
        task = _task(user, "User Task:")
        history = user.split("Action History:", 1)[-1]
        ok = task is not None and all(f'"{label}" -> CLICK' in history for label in task.path)
        verdict = "success" if ok else "failure"
        return "verdict", f'Thoughts: checked the pages the agent opened.\nStatus: "{verdict}"'
    if user.startswith(FIRST_ERROR_PROMPT.split("\n", 1)[0]):
        task = _task(user, "Task:")
        wrong = first_wrong_step(task, _first_error_steps(user)) if task else None
        if wrong is None:
            return "first_error", "Step: none\nAction: stop()"
        return "first_error", f"Step: {wrong[0]}\nAction: {wrong[1]}"
    if user.startswith(REFLECTION_PROMPT.split("\n", 1)[0]):
        task = _task(user, "Task:")
        wrong = first_wrong_step(task, _reflection_steps(user)) if task else None
        if task is None or wrong is None:
            return "reflection", "Step 1: the attempt did not reach the page the task asks about."
        return "reflection", (
            f"Step {wrong[0]}: the action went away from the page the task needs; "
            f"open {' then '.join(task.path)} and answer there."
        )
    task = _task(user, "Task:")
    if task is None or "Page:\n" not in user:
        return "unknown", "Action: stop()"
    page = user.split("Page:\n", 1)[1]
    lessons = "Lessons from earlier attempts:" in user
    return "teacher", f"Action: {teacher_action(task, page, lessons)}"


def estimated_usage(messages: list[dict[str, Any]], text: str) -> dict[str, int]:
    prompt = sum(len(_text(m["content"])) for m in messages) // 4
    # 320x240 screenshots: 75 image tokens each
    return {
        "prompt_tokens": prompt + 75 * _images(messages),
        "completion_tokens": len(text) // 4 + 1,
    }


class Endpoint:
    """The endpoint on 127.0.0.1:`port`, in a thread; `calls` counts by role.

    `model_url`: the served tiny model's chat completions URL, which gets every request
    (as sent, for one token) and whose `usage` the reply carries; None: estimated."""

    def __init__(
        self, port: int = ENDPOINT_PORT, model_url: str | None = None, model: str = ""
    ) -> None:
        import httpx

        self.calls: Counter[str] = Counter()
        lock = threading.Lock()
        calls = self.calls
        client = httpx.Client(timeout=120) if model_url else None

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # /health and /v1/models, as real servers have
                self._send(200, {"object": "list", "data": [{"id": "rehearsal"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                messages = body["messages"]
                role, text = reply(messages)
                with lock:
                    calls[role] += 1
                usage = estimated_usage(messages, text)
                if client is not None:
                    served = client.post(model_url, json={**body, "model": model, "max_tokens": 1})
                    if served.status_code != 200:  # refused by a real server: so is the call
                        self._send(served.status_code, {"error": served.text[:2000]})
                        return
                    usage["prompt_tokens"] = served.json()["usage"]["prompt_tokens"]
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
                choice = {"index": 0, "finish_reason": "stop",
                          "message": {"role": "assistant", "content": text}}  # fmt: skip
                self._send(200, {"id": "rehearsal", "object": "chat.completion",
                                 "model": body.get("model"), "choices": [choice], "usage": usage})  # fmt: skip

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and left (it asks again)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer((site.HOST, port), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.1,), daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


@contextlib.contextmanager
def served_tiny_model(folder: Path, log_path: Path) -> Iterator[str]:
    """A tiny random Qwen3-VL behind `transformers serve` on MODEL_PORT; yields its path
    (the model name the server wants). Killed on exit."""
    import httpx

    from rmsweb.models.config import TinySize
    from rmsweb.models.tiny import save_tiny_model

    corpus = [*site.pages().values(), *(t.question for t in site.site_tasks())]
    # 8k positions: WebJudge's verdict call carries every kept screenshot (2,287 tokens
    # for a 3-step episode at 320x240 refused the default 2,048)
    size = TinySize(max_position_embeddings=8192)
    save_tiny_model(folder, "qwen3_vl", corpus, 600, size, seed=0)
    args = [sys.executable, "-m", "rmsweb.models.processor", "serve", str(folder), "--device",
            "cpu", "--host", site.HOST, "--port", str(MODEL_PORT)]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    with log_path.open("w") as log:
        proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + READY_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"the served model exited {proc.returncode}:\n{log_path.read_text()[-3000:]}"
                )
            try:
                if (
                    httpx.get(f"http://{site.HOST}:{MODEL_PORT}/health", timeout=1).status_code
                    == 200
                ):
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the served model was not ready in {READY_S} s:\n{log_path.read_text()[-3000:]}"
                )
            time.sleep(0.2)
        yield str(folder)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


# --------------------------------------------------------------------------- the run


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((site.HOST, port))
        except OSError:
            return False
    return True


REPORT_MD = "runs/report/paper-8b-rehearsal/report.md"
REPORT_METRICS = "metrics/report/paper-8b-rehearsal.json"


def check_table(root: Path = ROOT) -> list[str]:
    """What is wrong with the report's headline table (empty: nothing): a row per evaluated
    policy, a column per evaluation suite of the spec, each cell a success with its
    interval and judge failures apart, and each column judged by its own judge."""
    from rmsweb.spec import load_experiment

    spec = load_experiment(root / SPEC)
    md_path, metrics_path = root / REPORT_MD, root / REPORT_METRICS
    if not md_path.is_file() or not metrics_path.is_file():
        return [f"no report: {md_path} / {metrics_path} missing"]
    md = md_path.read_text(encoding="utf-8")
    metrics = json.loads(metrics_path.read_text(encoding="utf-8"))
    problems = []
    if "## Headline: success per benchmark" not in md:
        return ["the report has no headline table"]
    table = md[md.index("## Headline") :].split("\n\n")[1].splitlines()
    suites = [ev.name for ev in spec.eval.suites or []]
    want = "| Policy | " + " | ".join(
        f"{b}: success [95% CI] | {b}: judge failures" for b in suites
    )
    if not table or not table[0].startswith(want):
        problems.append(f"headline header {table[:1]} is not {want!r}")
    rows = [r for r in table[2:] if r.startswith("| ")]
    if [r.split(" | ")[0][2:] for r in rows] != [p.name for p in spec.eval.policies]:
        problems.append(f"headline rows {rows} are not the policies")
    for row in rows:
        for cell in row.strip("| ").split(" | ")[1::2]:
            if not re.fullmatch(r"\d+\.\d% \[\d+\.\d, \d+\.\d\]", cell):
                problems.append(f"cell {cell!r} of {row!r} is not a success with its interval")
    for ev in spec.eval.suites or []:
        for p in spec.eval.policies:
            key = f"headline/{spec.name}/{p.name}/s0/{ev.name}"
            if metrics.get(f"{key}/n") is None:
                problems.append(f"no {key}/n in {metrics_path.name}")
        judge = f"{ev.suite.judge.protocol} / {ev.suite.judge.model}"
        if not re.search(rf"^{ev.name} \(task pool\): .*Judge: {re.escape(judge)}:", md, re.M):
            problems.append(f"{ev.name}'s caveat does not name its judge {judge}")
    if not problems:
        print("rehearsal: headline table\n" + "\n".join(table))
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--target", default=TARGET, help="DVC stage to reproduce (with its upstream).")
    ap.add_argument("--force", action="store_true", help="Rerun every stage (dvc repro -f).")
    ap.add_argument(
        "--no-model", action="store_true", help="No served tiny model behind the endpoint."
    )
    ap.add_argument("--no-preflight", action="store_true", help="Skip the preflight's CPU path.")
    args = ap.parse_args(argv)
    busy = [p for p in (site.PORT, ENDPOINT_PORT, MODEL_PORT) if not port_free(p)]
    if busy:
        print(f"rehearsal: port(s) {busy} on {site.HOST} are in use; the spec names them "
              "(experiments/paper-8b-rehearsal.yaml). Stop what holds them and rerun.",
              file=sys.stderr)  # fmt: skip
        return 2
    env = {
        **os.environ,
        "RMSWEB_TORCHRUN": TORCHRUN,
        "RMSWEB_REHEARSAL_KEY": "rehearsal-not-a-secret",
        "DVC_NO_ANALYTICS": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    cmd = ["dvc", "repro", *(["--force"] if args.force else []), args.target]
    start = time.perf_counter()
    if not args.no_preflight:  # the spec's path, then the sharded one (FSDP2)
        for sharded in (False, True):
            shown = " ".join(preflight_command("python", sharded))
            print(f"rehearsal: {shown} (2 gloo ranks)", flush=True)
            command = preflight_command(sharded=True) if sharded else preflight_command()
            code = subprocess.run(command, cwd=ROOT, env=env, check=False).returncode
            out = command[command.index("--out") + 1]
            print(f"rehearsal: preflight exit {code} in {time.perf_counter() - start:.0f} s; "
                  f"figures in {out}/metrics.json", flush=True)  # fmt: skip
            if code:
                return code
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rmsweb-rehearsal-")))
        model_url, model = None, ""
        if not args.no_model:
            model = stack.enter_context(served_tiny_model(tmp / "served-model", tmp / "serve.log"))
            model_url = f"http://{site.HOST}:{MODEL_PORT}/v1/chat/completions"
            print(
                f"rehearsal: tiny Qwen3-VL served in {time.perf_counter() - start:.0f} s",
                flush=True,
            )
        env["RMSWEB_JUDGE_CACHE"] = str(tmp / "judge-cache")  # every run asks its judges
        shop = StaticServer(site.render_site(tmp / "site"), host=site.HOST, port=site.PORT)
        endpoint = Endpoint(model_url=model_url, model=model)
        try:
            print(f"rehearsal: site {shop.origin}, endpoint http://{site.HOST}:{ENDPOINT_PORT}/v1; "
                  f"{' '.join(cmd)} (RMSWEB_TORCHRUN={TORCHRUN!r})", flush=True)  # fmt: skip
            code = subprocess.run(cmd, cwd=ROOT, env=env, check=False).returncode
        finally:
            endpoint.close()
            shop.close()
        calls = ", ".join(f"{k} {v}" for k, v in sorted(endpoint.calls.items())) or "none"
        print(f"rehearsal: exit {code} in {time.perf_counter() - start:.0f} s; "
              f"endpoint calls: {calls}")  # fmt: skip
    if code == 0 and args.target == TARGET:
        problems = check_table()
        for problem in problems:
            print(f"rehearsal: table: {problem}", file=sys.stderr)
        code = 1 if problems else 0
    return code


if __name__ == "__main__":
    sys.exit(main())
