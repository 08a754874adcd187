"""A small async client for OpenAI-compatible chat endpoints (`vllm serve`, hosted APIs,
`transformers serve`).

Why httpx directly and not the openai SDK: the retry policy is part of rmsweb's
contract (which statuses, Retry-After, jitter, a UserError naming the endpoint
at the end), and the SDK keeps the key on its client object for its lifetime.
Here the key is read from its environment variable for each request, put in
that request's header and nowhere else: not on this object, not in logs, not in
the errors we raise (they are raised outside `except` blocks so no httpx
exception, whose request carries the header, rides along as __context__).

Retries: 408, 409, 429 and 5xx, and transport errors (refused connection,
no answer within timeout_s, dropped connection) are retried up to `max_http_retries` times with
exponential back-off and jitter, or after the server's Retry-After when it
sends one. 401/403 and other 4xx are the caller's to fix and fail at once.
Worst case a call takes (1 + max_http_retries) * timeout_s plus the back-offs;
timeout_s bounds each whole attempt (connect, wait, read).
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import os
import random
import time
from typing import Any

import httpx

from rmsweb.agents.model_family import sampling_params
from rmsweb.errors import UserError

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 409, 429})


def _retryable(status: int) -> bool:
    return status in RETRY_STATUSES or status >= 500


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class ChatClient:
    """Bounded-concurrency chat completions with retries; one per endpoint and model."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str = "OPENAI_API_KEY",
        temperature: float = 0.0,
        max_tokens: int = 256,
        concurrency: int = 8,
        timeout_s: float = 60.0,
        max_http_retries: int = 4,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        max_retry_after_s: float = 120.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env  # the variable's name only; its value is never kept
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_http_retries = max_http_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.max_retry_after_s = max_retry_after_s  # a server asking for longer is an outage
        self._rng = random.Random()
        # httpx clients and asyncio semaphores belong to one event loop: made on first
        # use in the running loop, remade if a later call runs in another one.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: httpx.AsyncClient | None = None
        self._semaphore: asyncio.Semaphore | None = None

    def __repr__(self) -> str:
        return (
            f"ChatClient(base_url={self.base_url!r}, model={self.model!r}, "
            f"api_key_env={self.api_key_env!r}, concurrency={self.concurrency})"
        )

    @property
    def endpoint(self) -> str:
        return f"{self.base_url}/chat/completions"

    def _ensure(self) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        if self._client is None or self._semaphore is None or self._loop is not loop:
            limits = httpx.Limits(
                max_connections=self.concurrency, max_keepalive_connections=self.concurrency
            )
            # No httpx timeouts (they are per phase: connect, each read); asyncio.timeout
            # in _post bounds each attempt as a whole instead.
            self._client = httpx.AsyncClient(timeout=None, limits=limits)
            self._semaphore = asyncio.Semaphore(self.concurrency)
            self._loop = loop
        return self._client, self._semaphore

    def _headers(self) -> dict[str, str]:
        key = os.environ.get(self.api_key_env, "")
        # Local servers (vllm serve without --api-key, transformers serve) need no key.
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _redact(self, text: str) -> str:
        """Error text from a server or proxy may echo the header: never pass the key on."""
        key = os.environ.get(self.api_key_env, "")
        return text.replace(key, "[redacted]") if key else text

    def _backoff(self, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_retry_after_s)
        # Exponential, capped, with jitter in [0.5, 1.5): clients that failed together
        # do not come back together.
        base = min(self.max_backoff_s, self.backoff_s * 2**retry)
        return base * (0.5 + self._rng.random())

    async def chat(
        self,
        messages: list[dict[str, Any]],
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
    ) -> tuple[str, dict[str, int]]:
        """The assistant's text and the `usage` dict (prompt_tokens, completion_tokens)."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            # reasoning models: max_completion_tokens and no temperature (model_family.py)
            **sampling_params(
                self.model,
                max_tokens if max_tokens is not None else self.max_tokens,
                temperature if temperature is not None else self.temperature,
            ),
        }
        if seed is not None:
            body["seed"] = seed
        data = await self._post(body)
        return _parse_completion(data, self.endpoint)

    async def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        client, semaphore = self._ensure()
        last = ""
        attempts = 1 + self.max_http_retries
        for attempt in range(attempts):
            retry_after: float | None = None
            # The slot is held for one attempt, not across back-off sleeps, so a failing
            # request does not idle a slot that others could use.
            async with semaphore:
                try:
                    async with asyncio.timeout(self.timeout_s):
                        response = await client.post(
                            self.endpoint, json=body, headers=self._headers()
                        )
                except TimeoutError:
                    response = None
                    last = f"no answer within timeout_s={self.timeout_s}"
                except httpx.TransportError as exc:  # refused, dropped, bad protocol
                    response = None
                    last = f"{type(exc).__name__}: {self._redact(str(exc))}".rstrip(": ")
            if response is not None:
                status = response.status_code
                if status == 200:
                    return _json(response, self.endpoint)
                last = f"HTTP {status}: {self._redact(_snippet(response))}"
                if status in (401, 403):
                    state = "set" if os.environ.get(self.api_key_env) else "unset"
                    raise UserError(
                        f"endpoint {self.endpoint} rejected the request ({last}). Check the key "
                        f"in ${self.api_key_env} (it is {state})."
                    )
                if not _retryable(status):
                    raise UserError(
                        f"endpoint {self.endpoint} (model {self.model!r}) refused the request: "
                        f"{last}. Check base_url, model and max_tokens in the spec."
                    )
                retry_after = parse_retry_after(response.headers.get("retry-after"))
            if attempt + 1 < attempts:
                delay = self._backoff(attempt, retry_after)
                log.warning(
                    "endpoint %s: %s; retry %d/%d in %.2f s",
                    self.endpoint,
                    last,
                    attempt + 1,
                    self.max_http_retries,
                    delay,
                )
                await asyncio.sleep(delay)
        raise UserError(
            f"endpoint {self.endpoint} (model {self.model!r}) failed after {attempts} attempts; "
            f"last error: {last}. Is the server running and reachable? (timeout_s="
            f"{self.timeout_s}, max_http_retries={self.max_http_retries})"
        )

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            # A client made in a loop that has since closed cannot be closed from another.
            if self._loop is asyncio.get_running_loop():
                await client.aclose()


def _snippet(response: httpx.Response, limit: int = 200) -> str:
    text = " ".join(response.text.split())
    return text[:limit] + ("..." if len(text) > limit else "")


def _json(response: httpx.Response, endpoint: str) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise UserError(
            f"endpoint {endpoint} answered 200 with a body that is not a JSON object: "
            f"{_snippet(response)}. Is base_url an OpenAI-compatible root ending in /v1?"
        )
    return data


def _parse_completion(data: dict[str, Any], endpoint: str) -> tuple[str, dict[str, int]]:
    choices = data.get("choices")
    if not choices or not isinstance(choices, list):
        raise UserError(
            f"endpoint {endpoint} returned no choices: {str(data)[:200]}. "
            "Is it an OpenAI-compatible chat endpoint?"
        )
    message = choices[0].get("message") or {}
    text = message.get("content") or ""  # None for refusals and tool calls
    usage_in = data.get("usage") or {}
    usage = {
        "prompt_tokens": int(usage_in.get("prompt_tokens") or 0),
        "completion_tokens": int(usage_in.get("completion_tokens") or 0),
    }
    return text, usage
