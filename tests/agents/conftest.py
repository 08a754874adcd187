"""Local OpenAI-compatible servers for the policy tests, all on 127.0.0.1.

- `served_model`: a real `transformers serve` process (one per test session)
  with a tiny Qwen3 built here and taught to answer `Action: click(2)`, so the
  tests can check the exact text and token counts that come back.
- `stub`: a scripted http.server for what a real server cannot be made to do
  on demand (429 with Retry-After, 5xx, slow answers, counting concurrency).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

ANSWER = "Action: click(2)"
READY_S = 180  # how long a server may take to answer /health
CORPUS = [
    f'Task: click the "{w}" button\n[{i}] button "{w}"\n[{i + 1}] textbox "name"\n{ANSWER}'
    for i, w in enumerate(["submit", "cancel", "ok", "next", "login", "search"] * 10)
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def completion_body(
    text: str = ANSWER, prompt_tokens: int = 11, completion_tokens: int = 5
) -> dict:
    return {
        "id": "stub",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def teach_answer(model: Any, tokenizer: Any, prompts: list[list[dict]], answer: str) -> None:
    """Overfit the tiny model so greedy decoding answers `answer` to chat prompts."""
    import torch

    rows = []
    for messages in prompts:
        prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tokenizer(prompt + answer + "<|im_end|>", add_special_tokens=False)["input_ids"]
        n_prompt = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
        labels = [-100] * n_prompt + ids[n_prompt:]
        rows.append((torch.tensor([ids]), torch.tensor([labels])))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(100):
        losses = []
        for ids, labels in rows:
            loss = model(input_ids=ids, labels=labels).loss
            loss.backward()
            losses.append(loss.item())
        optimizer.step()
        optimizer.zero_grad()
        if max(losses) < 0.02:  # greedy decoding gives the answer well before this
            break
    model.eval()


@pytest.fixture(scope="session")
def served_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rmsweb.agents.prompt import PromptConfig, build_messages
    from rmsweb.models.config import TinySize
    from rmsweb.models.tiny import save_tiny_model

    torch.set_num_threads(2)
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("served_tiny_qwen3")
    save_tiny_model(out, "qwen3", CORPUS, 400, TinySize(), seed=0)
    tokenizer = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    # Two prompts suffice: the model learns to give the answer to any chat (~0.3 s).
    prompts = [
        build_messages('Click the "submit" button.', '[2] button "submit"', [], PromptConfig()),
        [{"role": "user", "content": "Say the action."}],
    ]
    teach_answer(model, tokenizer, prompts, ANSWER)
    model.save_pretrained(out)
    return out


@dataclass
class ServerInfo:
    base_url: str
    model: str  # `transformers serve` wants the folder path as the model name
    start_s: float
    log_path: Path
    answer: str = ANSWER


def _serve_command() -> list[str]:
    exe = Path(sys.executable).parent / "transformers"
    if not exe.exists():
        found = shutil.which("transformers")
        if found is None:
            pytest.skip("the `transformers` CLI is not installed")
        exe = Path(found)
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        pytest.skip("`transformers serve` needs transformers[serving] (fastapi, uvicorn)")
    return [str(exe), "serve"]


@contextlib.contextmanager
def running_server(command: list[str], model: Path, log_path: Path) -> Iterator[ServerInfo]:
    """Start an OpenAI-compatible server process, wait for /health, kill it on exit."""
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    args = [*command, str(model), "--device", "cpu", "--host", "127.0.0.1", "--port", str(port)]
    start = time.perf_counter()
    with log_path.open("w") as log_file:
        proc = subprocess.Popen(args, env=env, stdout=log_file, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        while True:
            if proc.poll() is not None:
                pytest.fail(f"{command} exited {proc.returncode}:\n{log_path.read_text()}")
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            # ~5 s on a quiet machine; importing transformers alone took 40 s on a loaded one
            if time.perf_counter() > start + READY_S:
                pytest.fail(f"{command} not ready in {READY_S} s:\n{log_path.read_text()}")
            time.sleep(0.1)
        yield ServerInfo(f"{base}/v1", str(model), time.perf_counter() - start, log_path)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="session")
def transformers_server(
    served_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerInfo]:
    """`transformers serve` on 127.0.0.1, started once, killed at the end of the session."""
    log_path = tmp_path_factory.mktemp("serve_log") / "serve.log"
    with running_server(_serve_command(), served_model, log_path) as info:
        yield info


@pytest.fixture(scope="session")
def vl_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    """A tiny Qwen3-VL behind `python -m rmsweb.models.processor serve` (images kept)."""
    from rmsweb.models.config import TinySize
    from rmsweb.models.tiny import save_tiny_model

    _serve_command()  # same requirements
    model = tmp_path_factory.mktemp("served_tiny_vl")
    save_tiny_model(model, "qwen3_vl", CORPUS, 400, TinySize(), seed=0)
    log_path = tmp_path_factory.mktemp("serve_vl_log") / "serve.log"
    command = [sys.executable, "-m", "rmsweb.models.processor", "serve"]
    with running_server(command, model, log_path) as info:
        yield info


# --------------------------------------------------------------------------- stub


@dataclass
class Reply:
    status: int = 200
    body: Any = field(default_factory=completion_body)
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass
class Stub:
    """A scripted chat endpoint: replies in order, then the default completion."""

    base_url: str = ""
    script: list[Reply] = field(default_factory=list)
    default: Reply = field(default_factory=Reply)
    requests: list[dict] = field(default_factory=list)  # {"headers", "body", "t"}
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    # hold(n): the first n requests wait for each other (or for `hold_timeout_s`), so "n
    # requests were in flight at once" is an event the test can rely on, not a race
    barrier: threading.Barrier | None = None
    held: int = 0

    def hold(self, n: int, hold_timeout_s: float = 5.0) -> None:
        self.barrier, self.held = threading.Barrier(n, timeout=hold_timeout_s), n

    def wait_held(self, index: int) -> None:
        if self.barrier is not None and index < self.held:
            with contextlib.suppress(threading.BrokenBarrierError):
                self.barrier.wait()  # broken after the timeout: fewer came at once

    def push(
        self,
        status: int = 200,
        body: Any = None,
        headers: dict[str, str] | None = None,
        delay_s: float = 0.0,
        times: int = 1,
    ) -> None:
        """Queue `times` replies (the default completion body unless `body` is given)."""
        body = completion_body() if body is None else body
        self.script.extend(Reply(status, body, headers or {}, delay_s) for _ in range(times))

    def next_reply(self, headers: dict[str, str], body: Any) -> tuple[int, Reply]:
        with self.lock:
            self.requests.append({"headers": headers, "body": body, "t": time.perf_counter()})
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            reply = self.script.pop(0) if self.script else self.default
            return len(self.requests) - 1, reply

    def done(self) -> None:
        with self.lock:
            self.in_flight -= 1


def _handler(stub: Stub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers do

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length", 0)))
            index, reply = stub.next_reply(dict(self.headers), json.loads(raw or b"null"))
            try:
                stub.wait_held(index)
                time.sleep(reply.delay_s)
                data = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
                payload = data.encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client timed out and left
            finally:
                stub.done()

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return Handler


@pytest.fixture
def stub() -> Iterator[Stub]:
    state = Stub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    # A short poll interval: shutdown() waits for one poll (0.5 s by default).
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
