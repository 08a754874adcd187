"""The judges' model client: rmsweb's OpenAI-compatible ChatClient (HTTP retries,
concurrency, key handling and the request parameters of each model family live there,
rmsweb.agents.model_family) plus judge failures, a response cache and token/cost accounting.

Model families. A reasoning model (o4-mini, o3, gpt-5*) is sent `max_completion_tokens`,
at least REASONING_MIN_COMPLETION_TOKENS since its hidden reasoning counts against it,
and no temperature (OpenAI refuses both `max_tokens` and a temperature for these models);
every other model gets the protocol's `max_tokens` and the spec's temperature.

Judge failures. An empty reply (a reasoning model that spent its cap before answering,
a refusal) or one the protocol cannot read (no verdict, no score) says nothing about the
task. `ask(..., valid=...)` asks again, up to `retries` more times; the rejected replies
ride on the answer (`Reply.rejected`) and `record` stores each as a JudgmentRow with
parse_ok false and a note, so what they cost is counted. If every ask fails, the protocol
records the episode's verdict as "judge_failed" (JUDGE_FAILED): a failure in the success
rate, counted apart from a judged "failure" in the report (rmsweb.report.live).

Cache. A judge call is a pure function of its request (model, messages with their
images, the length cap and temperature as sent, seed) as far as rmsweb is concerned, so
the answer is stored under sha256(canonical JSON of the request) and a repeated request (a rerun
of the eval stage, re-judging after a parser fix, an imported run judged twice) is
answered from disk: no call, no tokens, no dollars. Sampling judges (temperature > 0)
are cached too; delete the cache folder to draw again. Only usable replies are cached:
a judge failure is asked again next time. The folder is the caller's choice, outside any
DVC output so it survives stage reruns.

Accounting. Every call, cached or not, becomes a `JudgmentRow` (the judgments table)
with its inputs' hash, the output, the parsed verdict or score, tokens and dollars at
the judge's prices; `totals()` sums what was spent in this process.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from rmsweb.agents.model_family import sampling_params
from rmsweb.store.rows import JudgmentRow

JUDGE_RETRIES = 2  # asks after an empty or unreadable reply (3 in all)
JUDGE_FAILED = "judge_failed"  # the verdict of an episode the judge never answered usably


class ChatBackend(Protocol):
    """What the judge needs of a chat client (rmsweb.agents.openai_client.ChatClient)."""

    model: str

    async def chat(
        self,
        messages: list[dict[str, Any]],
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
    ) -> tuple[str, dict[str, int]]: ...

    async def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Reply:
    """The answer to one judge request."""

    text: str
    tokens_in: int
    tokens_out: int
    inputs_hash: str
    cached: bool
    latency_s: float
    # earlier replies to the same request that were empty or unreadable (asked again)
    rejected: tuple[Reply, ...] = ()


@dataclass(frozen=True, slots=True)
class Totals:
    calls: int  # requests answered (cached ones included)
    cached: int
    tokens_in: int  # spent now (cache hits spend nothing)
    tokens_out: int
    cost_usd: float


def image_part(png_or_jpeg: bytes, mime: str = "image/png", detail: str | None = None) -> dict:
    """An OpenAI `image_url` content part holding the image as a data URL."""
    url = f"data:{mime};base64,{base64.b64encode(png_or_jpeg).decode('ascii')}"
    image: dict[str, Any] = {"url": url}
    if detail is not None:
        image["detail"] = detail
    return {"type": "image_url", "image_url": image}


def text_part(text: str) -> dict:
    return {"type": "text", "text": text}


def request_hash(
    model: str,
    messages: Sequence[dict[str, Any]],
    max_tokens: int,
    temperature: float | None,
    seed: int | None,
) -> str:
    """sha256 of the request as sent (images included, base64 and all); for a reasoning
    model `max_tokens` is the completion cap sent and `temperature` None (none is sent)."""
    body = {
        "model": model,
        "messages": list(messages),
        "max_tokens": max_tokens,
        "temperature": temperature,
        "seed": seed,
    }
    canonical = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ResponseCache:
    """Answers on disk, one small JSON file per request hash (sharded by its first two
    hex digits); None keeps them in memory only."""

    def __init__(self, folder: str | Path | None = None) -> None:
        self.folder = Path(folder) if folder is not None else None
        self._memory: dict[str, dict[str, Any]] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        if key in self._memory:
            return self._memory[key]
        if self.folder is None:
            return None
        path = self._path(key)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # absent, or a torn write: ask again
        self._memory[key] = entry
        return entry

    def put(self, key: str, entry: dict[str, Any]) -> None:
        self._memory[key] = entry
        if self.folder is None:
            return
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(entry, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, path)  # readers never see half a file

    def _path(self, key: str) -> Path:
        assert self.folder is not None
        return self.folder / key[:2] / f"{key}.json"


class JudgeClient:
    """Ask a judge model; cache its answers; account for every call in JudgmentRows."""

    def __init__(
        self,
        backend: ChatBackend,
        *,
        temperature: float = 0.0,
        seed: int | None = None,
        input_usd_per_mtok: float = 0.0,
        output_usd_per_mtok: float = 0.0,
        cache: ResponseCache | None = None,
        retries: int = JUDGE_RETRIES,
    ) -> None:
        self.backend = backend
        self.model = backend.model
        self.temperature = temperature
        self.seed = seed
        self.input_usd_per_mtok = input_usd_per_mtok
        self.output_usd_per_mtok = output_usd_per_mtok
        self.cache = cache  # None: every request goes to the model
        self.retries = retries  # asks after an empty or unreadable reply
        self.rows: list[JudgmentRow] = []  # recorded and not yet taken by a writer
        self._totals = Totals(0, 0, 0, 0, 0.0)

    async def ask(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int,
        valid: Callable[[str], bool] | None = None,
    ) -> Reply:
        """The model's answer to `messages`. An empty reply, or one `valid` rejects, is
        asked again up to `retries` times; the last reply is returned either way, with
        the rejected ones in `Reply.rejected`."""
        sent = sampling_params(self.model, max_tokens, self.temperature)
        key = request_hash(
            self.model,
            messages,
            sent.get("max_tokens", sent.get("max_completion_tokens")),
            sent.get("temperature"),
            self.seed,
        )

        def usable(text: str) -> bool:
            return bool(text.strip()) and (valid is None or valid(text))

        hit = self.cache.get(key) if self.cache is not None else None
        if hit is not None and usable(hit["text"]):
            return Reply(hit["text"], hit["tokens_in"], hit["tokens_out"], key, True, 0.0)
        rejected: list[Reply] = []
        while True:
            reply = await self._call(messages, max_tokens, key)
            if usable(reply.text):
                if self.cache is not None:
                    entry = {"text": reply.text, "tokens_in": reply.tokens_in}
                    self.cache.put(key, {**entry, "tokens_out": reply.tokens_out})
                return replace(reply, rejected=tuple(rejected))
            if len(rejected) == self.retries:
                return replace(reply, rejected=tuple(rejected))
            rejected.append(reply)

    async def _call(self, messages: list[dict[str, Any]], max_tokens: int, key: str) -> Reply:
        t = time.perf_counter()
        text, usage = await self.backend.chat(
            messages, max_tokens=max_tokens, temperature=self.temperature, seed=self.seed
        )
        latency = time.perf_counter() - t
        tokens_in, tokens_out = usage["prompt_tokens"], usage["completion_tokens"]
        return Reply(text, tokens_in, tokens_out, key, False, latency)

    def cost_usd(self, tokens_in: int, tokens_out: int) -> float:
        return (tokens_in * self.input_usd_per_mtok + tokens_out * self.output_usd_per_mtok) / 1e6

    def record(
        self,
        reply: Reply | None,
        *,
        episode_id: str,
        task_id: str,
        protocol: str,
        call: str,
        index: int = 0,
        verdict: str | None = None,
        score: float | None = None,
        parse_ok: bool = True,
        note: str | None = None,
    ) -> JudgmentRow:
        """Store one call (or, with `reply` None, a verdict reached without one). The
        replies it rejected first are stored before it as judge failures (parse_ok false,
        no verdict), so their tokens and dollars are counted too."""
        ids = {"episode_id": episode_id, "task_id": task_id, "protocol": protocol}
        for bad in reply.rejected if reply is not None else ():
            why = "empty reply" if not bad.text.strip() else "unreadable reply"
            self._row(bad, **ids, call=call, index=index, verdict=None, score=None,
                      parse_ok=False, note=f"judge failure ({why}): asked again")  # fmt: skip
        return self._row(
            reply, **ids, call=call, index=index, verdict=verdict, score=score,
            parse_ok=parse_ok, note=note,
        )  # fmt: skip

    def _row(
        self,
        reply: Reply | None,
        *,
        episode_id: str,
        task_id: str,
        protocol: str,
        call: str,
        index: int,
        verdict: str | None,
        score: float | None,
        parse_ok: bool,
        note: str | None,
    ) -> JudgmentRow:
        spent = reply is not None and not reply.cached
        row = JudgmentRow(
            episode_id=episode_id,
            task_id=task_id,
            protocol=protocol,
            call=call,
            index=index,
            inputs_hash=reply.inputs_hash if reply else "",
            model=self.model,
            output_text=reply.text if reply else "",
            verdict=verdict,
            score=score,
            parse_ok=parse_ok,
            # the call's size even when cached (what judging this episode takes) ...
            tokens_in=reply.tokens_in if reply else 0,
            tokens_out=reply.tokens_out if reply else 0,
            # ... and what it cost now: nothing when the cache answered
            cost_usd=self.cost_usd(reply.tokens_in, reply.tokens_out) if spent else 0.0,
            cached=bool(reply and reply.cached),
            latency_s=reply.latency_s if reply else 0.0,
            created_at=time.time(),
            note=note,
        )
        self.rows.append(row)
        if reply is not None:
            t = self._totals
            self._totals = Totals(
                calls=t.calls + 1,
                cached=t.cached + int(reply.cached),
                tokens_in=t.tokens_in + (row.tokens_in if spent else 0),
                tokens_out=t.tokens_out + (row.tokens_out if spent else 0),
                cost_usd=t.cost_usd + row.cost_usd,
            )
        return row

    def totals(self) -> Totals:
        """What this client asked and spent so far (cache hits spend nothing)."""
        return self._totals

    def take_rows(self, episode_id: str | None = None) -> list[JudgmentRow]:
        """The rows recorded and not taken yet: all, or those of one episode (episodes
        are judged concurrently, so each takes its own)."""
        if episode_id is None:
            rows, self.rows = self.rows, []
            return rows
        mine = [r for r in self.rows if r.episode_id == episode_id]
        self.rows = [r for r in self.rows if r.episode_id != episode_id]
        return mine

    async def close(self) -> None:
        await self.backend.close()
