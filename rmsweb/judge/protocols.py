"""The live-benchmark judges by protocol, and a judge client from a judge spec.

client = build_judge_client(suite_spec.judge, cache_dir=Path(".cache/judge"))
outcome = await judge_episode(protocol_for(suite_spec.kind, suite_spec.judge.protocol),
                              from_record(record), client, **judge_options(suite_spec.judge))
rows = client.take_rows()     # -> the judgments table
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from rmsweb.judge import webjudge, webtailbench, webvoyager
from rmsweb.judge.client import JudgeClient, ResponseCache
from rmsweb.judge.episode import JudgeInput
from rmsweb.judge.types import JudgeOutcome

JudgeFn = Callable[..., Awaitable[JudgeOutcome]]

PROTOCOLS: dict[str, JudgeFn] = {
    webvoyager.PROTOCOL: webvoyager.judge,
    webjudge.PROTOCOL: webjudge.judge,
    webtailbench.PROTOCOL: webtailbench.judge,
}
# Each benchmark's own judge protocol (JudgeSpec.protocol "suite").
SUITE_PROTOCOL = {
    "webvoyager": webvoyager.PROTOCOL,
    "online_mind2web": webjudge.PROTOCOL,
    "webtailbench": webtailbench.PROTOCOL,
}


def protocol_for(suite_kind: str, protocol: str = "suite") -> str:
    """The protocol a judge spec means for a suite kind."""
    name = SUITE_PROTOCOL[suite_kind] if protocol == "suite" else protocol
    if name not in PROTOCOLS:
        raise ValueError(f"unknown judge protocol {name!r}; known: {', '.join(PROTOCOLS)}")
    return name


async def judge_episode(
    protocol: str, inp: JudgeInput, client: JudgeClient, **options: Any
) -> JudgeOutcome:
    """Judge one trajectory; every call lands in `client.rows`."""
    return await PROTOCOLS[protocol](inp, client, **options)


def judge_options(spec: Any) -> dict[str, Any]:
    """Keyword options of the protocol functions from a JudgeSpec (null: protocol default)."""
    return {
        "last_k": spec.last_k_screenshots,
        "max_tokens": spec.max_tokens,
        "score_threshold": spec.score_threshold,
        "max_images": spec.max_images,
    }


def build_judge_client(spec: Any, *, cache_dir: Path | None = None) -> JudgeClient:
    """A JudgeClient over rmsweb's OpenAI-compatible ChatClient, from a JudgeSpec."""
    from rmsweb.agents.openai_client import ChatClient

    backend = ChatClient(
        spec.base_url,
        spec.model,
        api_key_env=spec.api_key_env,
        temperature=spec.temperature,
        concurrency=spec.concurrency,
        timeout_s=spec.timeout_s,
        max_http_retries=spec.max_http_retries,
    )
    return JudgeClient(
        backend,
        temperature=spec.temperature,
        seed=spec.seed,
        input_usd_per_mtok=spec.prices.input_usd_per_mtok,
        output_usd_per_mtok=spec.prices.output_usd_per_mtok,
        cache=ResponseCache(cache_dir) if spec.cache else None,
    )
