"""The `hf` policy backend: transformers `generate`, batched across running episodes.

Episodes call `act()` one request at a time; requests that arrive while a
batch is being generated are coalesced into the next batch (up to
`batch_size`), so N browser contexts share one forward pass. Generation runs
in a worker thread so the browser event loop keeps going meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import time
from dataclasses import dataclass
from typing import Any

from rmsweb.agents.base import ActResult
from rmsweb.agents.prompt import PromptConfig, build_messages
from rmsweb.env.types import ActRequest


@dataclass
class _Pending:
    request: ActRequest
    future: asyncio.Future[ActResult]


class HFPolicy:
    def __init__(
        self,
        loaded: Any,  # rmsweb.models.load.LoadedModel
        prompt: PromptConfig,
        name: str = "hf",
        batch_size: int = 16,
        max_new_tokens: int = 48,
        temperature: float = 0.0,
        seed: int = 0,
    ) -> None:
        self.name = name
        self.loaded = loaded
        self.prompt = prompt
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.seed = seed
        self._queue: list[_Pending] = []
        self._wakeup: asyncio.Event | None = None
        self._worker: asyncio.Task[None] | None = None
        self._batches = 0

    # ------------------------------------------------------------------ prompts

    def count_tokens(self, text: str) -> int:
        return len(self.loaded.tokenizer(text, add_special_tokens=False)["input_ids"])

    def render(self, request: ActRequest) -> tuple[str, Any]:
        """Prompt text (chat template applied) and the image, if the prompt shows one."""
        image = None
        with_image = self.prompt.screenshot and request.observation.screenshot_png is not None
        if with_image:
            from PIL import Image

            image = Image.open(io.BytesIO(request.observation.screenshot_png)).convert("RGB")
        messages = build_messages(
            request.instruction,
            request.observation.text,
            request.history,
            self.prompt,
            self.count_tokens,
            request.reflections,
            with_image=with_image,
        )
        text = self.loaded.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )
        return text, image

    # ------------------------------------------------------------------ generation

    def generate(self, prompts: list[str], images: list[Any]) -> list[ActResult]:
        """Batched generation (synchronous; also used directly by mining and RL)."""
        import torch

        model = self.loaded.model
        tok = self.loaded.tokenizer
        tok.padding_side = "left"
        if self.loaded.is_vl and any(img is not None for img in images):
            enc = self.loaded.processor(
                text=prompts,
                images=[img for img in images if img is not None] or None,
                return_tensors="pt",
                padding=True,
            )
        else:
            enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        enc = {k: v.to(model.device) for k, v in enc.items()}
        do_sample = self.temperature > 0
        gen_kwargs: dict[str, Any] = {
            "max_new_tokens": self.max_new_tokens,
            "do_sample": do_sample,
            "pad_token_id": tok.pad_token_id,
            "eos_token_id": tok.eos_token_id,
            "return_dict_in_generate": True,
            "output_scores": True,
        }
        if do_sample:
            gen_kwargs.update(temperature=self.temperature, top_k=0, top_p=1.0)
            torch.manual_seed(self.seed * 1_000_003 + self._batches)
        self._batches += 1
        with torch.inference_mode():
            out = model.generate(**enc, **gen_kwargs)
        prompt_len = enc["input_ids"].shape[1]
        new_tokens = out.sequences[:, prompt_len:]
        scores = model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
        results = []
        for row in range(new_tokens.shape[0]):
            ids = new_tokens[row].tolist()
            n = len(ids)
            for i, t in enumerate(ids):
                if t in (tok.eos_token_id, tok.pad_token_id):
                    n = i
                    break
            text = tok.decode(ids[:n], skip_special_tokens=True)
            results.append(
                ActResult(
                    text=text.strip(),
                    tokens_in=int(enc["attention_mask"][row].sum()),
                    tokens_out=n,
                    token_logprobs=[float(x) for x in scores[row, :n]],
                )
            )
        return results

    # ------------------------------------------------------------------ Policy API

    async def act(self, request: ActRequest) -> ActResult:
        loop = asyncio.get_running_loop()
        if self._worker is None:
            self._wakeup = asyncio.Event()
            self._worker = loop.create_task(self._serve())
        future: asyncio.Future[ActResult] = loop.create_future()
        self._queue.append(_Pending(request, future))
        assert self._wakeup is not None
        self._wakeup.set()
        return await future

    async def _serve(self) -> None:
        assert self._wakeup is not None
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            # Let other episodes finish their current step and queue too.
            await asyncio.sleep(0.002)
            while self._queue:
                batch, self._queue = self._queue[: self.batch_size], self._queue[self.batch_size :]
                start = time.perf_counter()
                try:
                    rendered = [self.render(p.request) for p in batch]
                    results = await asyncio.to_thread(
                        self.generate, [r[0] for r in rendered], [r[1] for r in rendered]
                    )
                except Exception as exc:  # hand the error to every waiting episode
                    for p in batch:
                        if not p.future.done():
                            p.future.set_exception(exc)
                    continue
                latency = time.perf_counter() - start
                for p, r in zip(batch, results, strict=True):
                    r.latency_s = latency
                    if not p.future.done():
                        p.future.set_result(r)

    async def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None
