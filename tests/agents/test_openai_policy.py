"""The `openai` policy against a real `transformers serve` and a scripted local stub."""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import traceback
import uuid
from typing import Any

import pytest

from rmsweb.agents.openai_client import parse_retry_after
from rmsweb.agents.openai_policy import OpenAIPolicy, from_spec
from rmsweb.agents.prompt import PromptConfig, build_messages
from rmsweb.env.types import ActRequest, HistoryItem, Observation
from rmsweb.errors import UserError

PNG = base64.b64decode(  # a 1x1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def request(word: str = "submit", screenshot: bytes | None = None, **kw: Any) -> ActRequest:
    obs = Observation(
        url="http://x/", title="t", text=f'[2] button "{word}"', screenshot_png=screenshot
    )
    return ActRequest(
        task_id="click-button", instruction=f'Click the "{word}" button.', observation=obs, **kw
    )


def policy(base_url: str, model: str = "m", **kw: Any) -> OpenAIPolicy:
    kw.setdefault("backoff_s", 0.02)  # shrunk: tests wait tens of ms, not seconds
    kw.setdefault("timeout_s", 10.0)
    return OpenAIPolicy(
        base_url=base_url, model=model, prompt=kw.pop("prompt", PromptConfig()), **kw
    )


# --------------------------------------------------------------------------- real server


def test_completion_and_token_counts_from_transformers_serve(transformers_server: Any) -> None:
    from transformers import AutoTokenizer

    srv = transformers_server
    pol = policy(srv.base_url, srv.model, max_tokens=16)

    async def run() -> tuple[Any, Any]:
        try:
            return await pol.act(request("cancel")), await pol.chat(
                [{"role": "user", "content": "Say the action."}]
            )
        finally:
            await pol.close()

    result, (chat_text, usage) = asyncio.run(run())
    assert result.text == srv.answer  # the tiny model was taught this answer
    tokenizer = AutoTokenizer.from_pretrained(srv.model)
    sent = build_messages('Click the "cancel" button.', '[2] button "cancel"', [], PromptConfig())
    prompt = tokenizer.apply_chat_template(sent, add_generation_prompt=True, tokenize=False)
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    assert result.tokens_in == len(prompt_ids)  # the server's count of exactly our prompt
    answer_ids = tokenizer(srv.answer, add_special_tokens=False)["input_ids"]
    assert len(answer_ids) <= result.tokens_out <= len(answer_ids) + 1  # + <|im_end|>
    assert 0 < result.latency_s < 10
    assert chat_text == srv.answer and usage["completion_tokens"] > 0


def test_concurrent_requests_to_transformers_serve(transformers_server: Any) -> None:
    srv = transformers_server
    pol = policy(srv.base_url, srv.model, concurrency=3, max_tokens=16)
    requests = [request(w) for w in ("submit", "cancel", "ok", "submit", "cancel", "ok")]

    async def run() -> list[Any]:
        try:
            return await asyncio.gather(*(pol.act(r) for r in requests))
        finally:
            await pol.close()

    results = asyncio.run(run())
    assert [r.text for r in results] == [srv.answer] * len(requests)


# --------------------------------------------------------------------------- stub


def test_concurrency_bound_is_respected(stub: Any) -> None:
    stub.hold(3)  # the first 3 wait for each other (5 s at most, within timeout_s)
    stub.default.delay_s = 0.15  # long enough that requests overlap if allowed to
    pol = policy(stub.base_url, concurrency=3)

    async def run() -> None:
        try:
            await asyncio.gather(*(pol.act(request()) for _ in range(10)))
        finally:
            await pol.close()

    start = time.perf_counter()
    asyncio.run(run())
    elapsed = time.perf_counter() - start
    assert len(stub.requests) == 10
    # seen by the server: the bound, and reached (the first 3 were held until all came;
    # a client that let fewer out would leave the hold to time out with max 2)
    assert stub.max_in_flight == 3
    assert elapsed >= 4 * 0.15 * 0.9  # ceil(10 / 3) waves: a lower bound, load only adds


def test_unreachable_endpoint_retries_then_user_error(caplog: pytest.LogCaptureFixture) -> None:
    url = _closed_url()
    timeout_s = 20.0
    pol = policy(url, max_http_retries=3, timeout_s=timeout_s)
    caplog.set_level(logging.WARNING, logger="rmsweb.agents.openai_client")
    start = time.perf_counter()
    with pytest.raises(UserError) as info:
        asyncio.run(_act_and_close(pol))
    elapsed = time.perf_counter() - start
    message = str(info.value)
    assert url in message and "ConnectError" in message and "4 attempts" in message
    retries = [r for r in caplog.records if "retry" in r.getMessage()]
    assert len(retries) == 3
    # Back-offs 0.02 * (1, 2, 4) * [0.5, 1.5) = 0.2 s at most: a refused connection is
    # retried at once, not after a request timeout (4 attempts would take 4 x 20 s).
    assert elapsed < timeout_s


def test_429_with_retry_after_then_success(stub: Any) -> None:
    stub.push(429, {"error": "slow down"}, headers={"Retry-After": "0.3"}, times=2)
    pol = policy(stub.base_url, max_http_retries=4)

    async def run() -> Any:
        try:
            return await pol.act(request())
        finally:
            await pol.close()

    result = asyncio.run(run())
    assert result.text == "Action: click(2)" and (result.tokens_in, result.tokens_out) == (11, 5)
    times = [r["t"] for r in stub.requests]
    assert len(times) == 3
    # Retry-After (0.3 s) is honoured, not the 0.02 s back-off.
    assert times[1] - times[0] >= 0.28 and times[2] - times[1] >= 0.28


def test_5xx_is_retried_with_backoff(stub: Any) -> None:
    stub.push(500, {"error": "boom"})
    stub.push(502, "<html>bad gateway</html>")
    pol = policy(stub.base_url, max_http_retries=2)

    async def run() -> Any:
        try:
            return await pol.act(request())
        finally:
            await pol.close()

    assert asyncio.run(run()).text == "Action: click(2)"
    assert len(stub.requests) == 3


def test_persistent_503_becomes_user_error_naming_endpoint(stub: Any) -> None:
    stub.push(503, {"error": "overloaded"}, times=10)
    pol = policy(stub.base_url, max_http_retries=2)

    with pytest.raises(UserError) as info:
        asyncio.run(_act_and_close(pol))
    message = str(info.value)
    assert stub.base_url in message and "HTTP 503" in message and "3 attempts" in message
    assert len(stub.requests) == 3


def test_client_errors_are_not_retried(stub: Any) -> None:
    stub.push(400, {"error": "max_tokens too large"})
    with pytest.raises(UserError, match=r"HTTP 400.*max_tokens too large"):
        asyncio.run(_act_and_close(policy(stub.base_url)))
    stub.push(401, {"error": "bad key"})
    with pytest.raises(UserError, match=r"\$RMSWEB_TEST_UNSET_KEY \(it is unset\)"):
        asyncio.run(_act_and_close(policy(stub.base_url, api_key_env="RMSWEB_TEST_UNSET_KEY")))
    assert len(stub.requests) == 2


def test_per_request_timeout(stub: Any) -> None:
    stub.default.delay_s = 30.0  # the server would answer after 100 x the timeout
    pol = policy(stub.base_url, timeout_s=0.3, max_http_retries=1)
    start = time.perf_counter()
    with pytest.raises(UserError, match=r"no answer within timeout_s=0.3"):
        asyncio.run(_act_and_close(pol))
    # 2 x 0.3 s + back-off; waiting for the server would take 2 x 30 s. The bound is
    # the server's delay, so a loaded machine has 50 x the expected time.
    assert time.perf_counter() - start < stub.default.delay_s


def test_screenshot_goes_as_data_url_only_when_asked(stub: Any) -> None:
    history = [HistoryItem("Action: click(3)", "click(3)", None)]
    shown = policy(stub.base_url, prompt=PromptConfig(screenshot=True))
    hidden = policy(stub.base_url, prompt=PromptConfig(screenshot=False))
    asyncio.run(_act_and_close(shown, request(screenshot=PNG, history=history)))
    asyncio.run(_act_and_close(hidden, request(screenshot=PNG, history=history)))
    with_image, without = (r["body"] for r in stub.requests)
    parts = with_image["messages"][-1]["content"]
    assert parts[0]["type"] == "image_url"
    url = parts[0]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == PNG
    assert parts[1]["type"] == "text" and "click(3)" in parts[1]["text"]
    assert isinstance(without["messages"][-1]["content"], str)
    assert with_image["model"] == "m" and with_image["max_tokens"] == 256


def test_seed_is_sent_only_when_sampling(stub: Any) -> None:
    asyncio.run(_act_and_close(policy(stub.base_url, temperature=0.0), request(seed=5)))
    asyncio.run(_act_and_close(policy(stub.base_url, temperature=0.7), request(seed=5)))
    asyncio.run(_act_and_close(policy(stub.base_url, temperature=0.7), request(seed=5, attempt=1)))
    greedy, first, retry = (r["body"] for r in stub.requests)
    assert "seed" not in greedy and greedy["temperature"] == 0.0
    assert first["temperature"] == 0.7 and first["seed"] != retry["seed"]


def test_policy_survives_a_new_event_loop(stub: Any) -> None:
    pol = policy(stub.base_url)
    asyncio.run(pol.act(request()))  # first loop ends without close()
    asyncio.run(_act_and_close(pol))
    assert len(stub.requests) == 2


def test_api_key_never_leaks(
    stub: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = f"sk-rmsweb-{uuid.uuid4().hex}"
    monkeypatch.setenv("RMSWEB_TEST_KEY", key)
    caplog.set_level(logging.DEBUG)  # every logger, httpx and httpcore included
    pol = policy(stub.base_url, api_key_env="RMSWEB_TEST_KEY", max_http_retries=1)
    asyncio.run(pol.act(request()))
    assert stub.requests[-1]["headers"]["Authorization"] == f"Bearer {key}"  # it is used
    errors: list[BaseException] = []
    for status in (429, 401, 400):  # the body echoes the header, as some proxies do
        body = {"error": f"bad header: Bearer {key}"}
        stub.push(status, body, times=2 if status == 429 else 1)  # 1 + max_http_retries
        try:
            asyncio.run(pol.act(request()))
        except UserError as exc:
            errors.append(exc)
    with pytest.raises(UserError) as unreachable:
        asyncio.run(_act_and_close(policy(_closed_url(), api_key_env="RMSWEB_TEST_KEY")))
    errors.append(unreachable.value)
    assert len(errors) == 4 and not stub.script
    assert ["HTTP 429" in str(e) for e in errors[:3]] == [True, False, False]
    assert all("Bearer [redacted]" in str(e) for e in errors[:3])  # the echo is still shown
    texts = [record.getMessage() for record in caplog.records]
    texts += ["".join(traceback.format_exception(e)) for e in errors]
    texts += [repr(pol), repr(pol.client), repr(vars(pol.client)), repr(vars(pol))]
    assert any("retry" in t for t in texts)  # the retries were logged
    assert not [t for t in texts if key in t]
    assert all(e.__context__ is None and e.__cause__ is None for e in errors)


def test_from_spec_unpacks_the_endpoint() -> None:
    from rmsweb.spec.collect import OpenAIEndpoint

    spec = OpenAIEndpoint(
        model="qwen", base_url="http://h:1/v1/", concurrency=2, max_http_retries=1
    )
    pol = from_spec(spec, PromptConfig(), name="teacher")
    c = pol.client
    assert (pol.name, c.base_url, c.model, c.concurrency, c.max_http_retries) == (
        "teacher",
        "http://h:1/v1",
        "qwen",
        2,
        1,
    )
    assert c.api_key_env == "OPENAI_API_KEY" and c.timeout_s == 60.0


def test_retry_after_parsing() -> None:
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after("-1") == 0.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past


def test_no_heavy_imports() -> None:
    import subprocess
    import sys

    code = "import sys, rmsweb.agents.openai_policy; print(sorted({'torch', 'transformers'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


async def _act_and_close(pol: OpenAIPolicy, req: ActRequest | None = None) -> Any:
    try:
        return await pol.act(req or request())
    finally:
        await pol.close()


def _closed_url() -> str:
    """A port nothing listens on: bound, then released."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_screenshot_reaches_a_served_tiny_vl_model(vl_server: Any) -> None:
    """End to end: the image part is decoded server-side and costs image tokens."""
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (160, 120), (200, 30, 30)).save(buf, "PNG")
    results = []
    for screenshot in (False, True):
        pol = policy(
            vl_server.base_url, vl_server.model, prompt=PromptConfig(screenshot=screenshot)
        )
        results.append(asyncio.run(_act_and_close(pol, request(screenshot=buf.getvalue()))))
    # 160x120 px -> 8x10 patches of 16 -> 20 merged tokens, + <|vision_start|>/<|vision_end|>.
    assert results[1].tokens_in - results[0].tokens_in == 20 + 2
    assert results[1].tokens_out > 0
