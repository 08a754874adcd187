"""The `openai` policy backend: any OpenAI-compatible chat endpoint acts.

The prompt is rmsweb's usual chat (rmsweb.agents.prompt) with the
tokenizer-free token estimate, since the remote tokenizer is unknown; the
screenshot, when the prompt shows one, goes as a base64 PNG data-URL
`image_url` part. HTTP, retries and the API key are ChatClient's business
(rmsweb.agents.openai_client). No torch or transformers imports: teachers and
judges on a remote endpoint start fast.
"""

from __future__ import annotations

import base64
import time
from typing import TYPE_CHECKING, Any

from rmsweb.agents.base import ActResult
from rmsweb.agents.openai_client import ChatClient
from rmsweb.agents.prompt import PromptConfig, approx_tokens, build_messages
from rmsweb.env.types import ActRequest

if TYPE_CHECKING:
    from rmsweb.spec.collect import OpenAIEndpoint


def png_data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def to_openai_messages(messages: list[dict], png: bytes | None) -> list[dict]:
    """rmsweb's chat (`{"type": "image"}` placeholders) in the OpenAI wire format."""
    out = []
    for message in messages:
        content = message["content"]
        if isinstance(content, list):
            parts = []
            for part in content:
                if part["type"] == "image":
                    if png is None:
                        raise ValueError("the prompt has an image part but no screenshot")
                    parts.append({"type": "image_url", "image_url": {"url": png_data_url(png)}})
                else:
                    parts.append(part)
            content = parts
        out.append({"role": message["role"], "content": content})
    return out


def request_seed(request: ActRequest) -> int:
    """A per-call sampling seed: reproducible, and different for each step and attempt."""
    return (request.seed * 1_000_003 + request.step * 1_009 + request.attempt) % (2**31)


class OpenAIPolicy:
    def __init__(
        self,
        base_url: str,
        model: str,
        prompt: PromptConfig,
        api_key_env: str = "OPENAI_API_KEY",
        temperature: float = 0.0,
        max_tokens: int = 256,
        concurrency: int = 8,
        timeout_s: float = 60.0,
        max_http_retries: int = 4,
        name: str = "openai",
        backoff_s: float = 1.0,
    ) -> None:
        self.name = name
        self.prompt = prompt
        self.client = ChatClient(
            base_url=base_url,
            model=model,
            api_key_env=api_key_env,
            temperature=temperature,
            max_tokens=max_tokens,
            concurrency=concurrency,
            timeout_s=timeout_s,
            max_http_retries=max_http_retries,
            backoff_s=backoff_s,
        )

    def __repr__(self) -> str:
        return f"OpenAIPolicy(name={self.name!r}, client={self.client!r})"

    def messages(self, request: ActRequest) -> list[dict]:
        """The chat sent for one step, in the OpenAI wire format."""
        png = request.observation.screenshot_png if self.prompt.screenshot else None
        messages = build_messages(
            request.instruction,
            request.observation.text,
            request.history,
            self.prompt,
            approx_tokens,
            request.reflections,
            with_image=png is not None,
        )
        return to_openai_messages(messages, png)

    async def act(self, request: ActRequest) -> ActResult:
        start = time.perf_counter()
        # A seed only matters when sampling; vLLM and OpenAI honour it per request.
        seed = request_seed(request) if self.client.temperature > 0 else None
        text, usage = await self.client.chat(self.messages(request), seed=seed)
        return ActResult(
            text=text,
            tokens_in=usage["prompt_tokens"],
            tokens_out=usage["completion_tokens"],
            latency_s=time.perf_counter() - start,
        )

    async def chat(self, messages: list[dict[str, Any]]) -> tuple[str, dict[str, int]]:
        """Free-form chat on the same endpoint (reflector, judge): (text, usage)."""
        return await self.client.chat(messages)

    async def close(self) -> None:
        await self.client.close()


def from_spec(endpoint: OpenAIEndpoint, prompt: PromptConfig, name: str) -> OpenAIPolicy:
    """Unpack a spec's endpoint into plain arguments (config objects stay out of the class)."""
    return OpenAIPolicy(
        base_url=endpoint.base_url,
        model=endpoint.model,
        prompt=prompt,
        api_key_env=endpoint.api_key_env,
        temperature=endpoint.temperature,
        max_tokens=endpoint.max_tokens,
        concurrency=endpoint.concurrency,
        timeout_s=endpoint.timeout_s,
        max_http_retries=endpoint.max_http_retries,
        name=name,
    )
