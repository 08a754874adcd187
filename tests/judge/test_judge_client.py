"""The judge client: answers cached by a hash of the whole request, every call accounted
for (tokens, dollars at the judge's prices), cache hits free; over rmsweb's HTTP client."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rmsweb.judge import webvoyager
from rmsweb.judge.client import JudgeClient, ResponseCache, request_hash
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


def test_unparsable_verdict_is_a_failure_with_parse_ok_false(scripted) -> None:
    client = JudgeClient(scripted(lambda m: "Hard to say."))
    out = asyncio.run(webvoyager.judge(inp(), client))
    assert (out.success, out.parse_ok) == (False, False)
    assert (client.rows[0].verdict, client.rows[0].parse_ok) == ("failure", False)


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
