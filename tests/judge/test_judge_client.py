"""The judge client: answers cached by a hash of the whole request, every call accounted
for (tokens, dollars at the judge's prices), cache hits free; over rmsweb's HTTP client."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rmsweb.agents.model_family import (
    REASONING_MIN_COMPLETION_TOKENS,
    is_reasoning_model,
    sampling_params,
)
from rmsweb.judge import webvoyager
from rmsweb.judge.client import (
    JUDGE_FAILED,
    JUDGE_RETRIES,
    JudgeClient,
    ResponseCache,
    request_hash,
)
from rmsweb.judge.episode import JudgeInput
from rmsweb.judge.protocols import build_judge_client, judge_episode, protocol_for
from rmsweb.spec.suite import JudgeSpec


def inp(answer: str | None = "42", shots: int = 2, task: str = "Find it.") -> JudgeInput:
    return JudgeInput(
        "ep-1", "Site--1", task, answer, screenshots=[b"s%d" % i for i in range(shots)]
    )


def test_cache_answers_repeats_from_disk_for_free(tmp_path: Path, scripted) -> None:
    backend = scripted(lambda m: "Looks right. SUCCESS")

    def client() -> JudgeClient:
        return JudgeClient(
            backend,
            seed=42,
            input_usd_per_mtok=2.5,
            output_usd_per_mtok=10.0,
            cache=ResponseCache(tmp_path / "cache"),
        )

    first = client()
    out1 = asyncio.run(webvoyager.judge(inp(), first))
    second = client()  # a new process: only the folder is shared
    out2 = asyncio.run(webvoyager.judge(inp(), second))
    assert out1.success and out2.success and len(backend.requests) == 1
    (a,), (b,) = first.rows, second.rows
    assert (a.cached, b.cached) == (False, True)
    assert a.inputs_hash == b.inputs_hash and len(list((tmp_path / "cache").rglob("*.json"))) == 1
    # the call's size is kept on both rows; only the first one cost anything
    assert (a.tokens_in, a.tokens_out) == (b.tokens_in, b.tokens_out) and a.tokens_in > 200
    assert a.cost_usd == (a.tokens_in * 2.5 + a.tokens_out * 10.0) / 1e6 and b.cost_usd == 0.0
    assert first.totals().tokens_in == a.tokens_in and second.totals().tokens_in == 0
    assert (second.totals().calls, second.totals().cached) == (1, 1)
    assert backend.requests[0]["seed"] == 42 and backend.requests[0]["max_tokens"] == 1000


def test_cache_key_covers_every_input() -> None:
    def key(**change) -> str:
        args = {"model": "m", "messages": webvoyager.build_messages(inp()), "max_tokens": 1000,
                "temperature": 0.0, "seed": 42} | change  # fmt: skip
        return request_hash(**args)

    base = key()
    assert key() == base
    others = [
        key(model="m2"),
        key(messages=webvoyager.build_messages(inp(answer="43"))),
        key(messages=webvoyager.build_messages(inp(shots=3))),  # one more screenshot
        key(messages=webvoyager.build_messages(JudgeInput("ep-1", "Site--1", "Find it.", "42",
                                                          screenshots=[b"s0", b"sX"]))),
        key(max_tokens=999),
        key(temperature=0.5),
        key(seed=None),
    ]  # fmt: skip
    assert base not in others and len(set(others)) == len(others)


def test_no_answer_is_a_failure_without_a_call(scripted) -> None:
    backend = scripted(lambda m: "SUCCESS")
    client = JudgeClient(backend)
    out = asyncio.run(webvoyager.judge(inp(answer=None), client))
    assert not out.success and out.parse_ok and backend.requests == []
    (row,) = client.rows
    assert (row.verdict, row.call, row.inputs_hash, row.cost_usd) == ("failure", "verdict", "", 0.0)
    assert row.note == "no answer: NOT SUCCESS, no call"
    assert client.totals().calls == 0


def test_unparsable_verdict_is_asked_again_then_a_judge_failure(scripted) -> None:
    backend = scripted(lambda m: "Hard to say.")
    client = JudgeClient(backend, input_usd_per_mtok=1.0)
    out = asyncio.run(webvoyager.judge(inp(), client))
    assert (out.success, out.parse_ok) == (False, False)
    assert len(backend.requests) == 1 + JUDGE_RETRIES  # asked three times in all
    # the two rejected asks: judge failures without a verdict, their cost counted
    assert [(r.verdict, r.parse_ok) for r in client.rows] == [
        (None, False), (None, False), (JUDGE_FAILED, False),
    ]  # fmt: skip
    assert [r.note for r in client.rows[:2]] == [
        "judge failure (unreadable reply): asked again"
    ] * 2
    assert all(r.cost_usd > 0 for r in client.rows) and client.totals().calls == 3


def test_an_empty_reply_is_retried_and_only_usable_answers_are_cached(
    tmp_path: Path, scripted
) -> None:
    """An empty reply (a reasoning model out of tokens) is not a NOT SUCCESS: ask again."""
    answers = iter(["", "NOT SUCCESS"])
    backend = scripted(lambda m: next(answers))
    cache = ResponseCache(tmp_path / "cache")
    client = JudgeClient(backend, cache=cache)
    out = asyncio.run(webvoyager.judge(inp(), client))
    assert (out.success, out.parse_ok) == (False, True)
    assert [(r.verdict, r.note) for r in client.rows] == [
        (None, "judge failure (empty reply): asked again"), ("failure", None),
    ]  # fmt: skip
    # the cache holds the usable answer; a second judge asks nothing
    again = JudgeClient(scripted(lambda m: "SUCCESS"), cache=cache)
    assert not asyncio.run(webvoyager.judge(inp(), again)).success
    assert [r.cached for r in again.rows] == [True]


def test_an_unusable_cached_answer_is_asked_again(tmp_path: Path, scripted) -> None:
    """A cache written before judge failures were retried may hold an empty answer."""
    client = JudgeClient(scripted(lambda m: "SUCCESS"), cache=ResponseCache(tmp_path))
    messages = webvoyager.build_messages(inp())
    key = request_hash(client.model, messages, 1000, 0.0, None)
    client.cache.put(key, {"text": "", "tokens_in": 1, "tokens_out": 0})
    assert asyncio.run(webvoyager.judge(inp(), client)).success
    assert [r.cached for r in client.rows] == [False]


def test_spec_builds_a_retrying_http_client(stub, reply_body) -> None:
    """Through rmsweb's ChatClient: a 503 is retried, the answer parsed, the row kept."""
    spec = JudgeSpec(
        base_url=stub.base_url, model="judge-m", max_http_retries=2, cache=False, seed=None,
        prices={"input_usd_per_mtok": 1.0, "output_usd_per_mtok": 2.0},
    )  # fmt: skip
    stub.push(status=503)
    stub.push(body=reply_body("NOT SUCCESS", prompt_tokens=1000, completion_tokens=10))
    client = build_judge_client(spec)
    client.backend.backoff_s = 0.01  # the retry itself is what is tested, not its pace

    async def go():
        try:
            return await judge_episode(protocol_for("webvoyager"), inp(), client, last_k=15)
        finally:
            await client.close()

    out = asyncio.run(go())
    assert not out.success and out.parse_ok
    assert len(stub.requests) == 2 and stub.requests[1]["body"]["model"] == "judge-m"
    assert "seed" not in stub.requests[1]["body"]
    (row,) = client.rows
    assert (row.tokens_in, row.tokens_out, row.cost_usd) == (1000, 10, 0.00102)
    assert protocol_for("online_mind2web") == "webjudge"
    assert protocol_for("webvoyager", "webtailbench") == "webtailbench"


@pytest.mark.parametrize(
    ("model", "reasoning"),
    [
        ("o4-mini", True),
        ("o4-mini-2025-04-16", True),
        ("o3", True),
        ("o1-preview", True),
        ("gpt-5", True),
        ("gpt-5-mini", True),
        ("gpt-5.1", True),
        ("openai/o4-mini", True),  # a router's provider prefix
        ("gpt-4o", False),
        ("gpt-4.1-mini", False),
        ("Qwen/Qwen3-VL-32B-Instruct", False),
        ("/models/omni-7b", False),  # a local path is not an o-series name
        ("ollama", False),
    ],
)
def test_model_family_from_the_name(model: str, reasoning: bool) -> None:
    assert is_reasoning_model(model) is reasoning
    params = sampling_params(model, 512, 0.0)
    if reasoning:
        assert params == {"max_completion_tokens": REASONING_MIN_COMPLETION_TOKENS}
    else:
        assert params == {"max_tokens": 512, "temperature": 0.0}


def test_a_reasoning_judge_gets_max_completion_tokens_and_no_temperature(stub, reply_body) -> None:
    """Through rmsweb's ChatClient, as sent on the wire: the parameters OpenAI refuses for
    o4-mini are not sent, and the cap leaves room for its hidden reasoning."""
    bodies = {}
    for model in ("o4-mini", "gpt-4o"):
        spec = JudgeSpec(base_url=stub.base_url, model=model, cache=False, temperature=0.0)
        stub.push(body=reply_body("SUCCESS"))
        client = build_judge_client(spec)

        async def go(client=client):
            try:
                return await judge_episode("webvoyager", inp(), client)
            finally:
                await client.close()

        assert asyncio.run(go()).success
        bodies[model] = stub.requests[-1]["body"]
    o4, gpt4o = bodies["o4-mini"], bodies["gpt-4o"]
    assert "max_tokens" not in o4 and "temperature" not in o4
    assert o4["max_completion_tokens"] == REASONING_MIN_COMPLETION_TOKENS  # > WebVoyager's 1000
    assert (gpt4o["max_tokens"], gpt4o["temperature"]) == (1000, 0.0)
    assert "max_completion_tokens" not in gpt4o
    assert o4["seed"] == gpt4o["seed"] == 42
