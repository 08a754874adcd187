"""Mine mode judge against a real local OpenAI-compatible server (`transformers serve`).

The tiny served model's verdicts are junk; what is checked is the plumbing: the spec's
mine.judge endpoint becomes a client, the first-error prompt goes out, the reply and
its token usage come back, and the reply is parsed into step labels consistent with it.
The parsing of well-formed replies is tested on canned texts in tests/mine.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rmsweb.mine.judge import FIRST_ERROR_PROMPT, parse_first_error
from rmsweb.mine.stage import _judge_client, _judge_labels
from rmsweb.spec import ExperimentSpec
from rmsweb.store.synthetic import make_episode


def test_spec_refuses_judge_mode_without_an_endpoint_offline() -> None:
    with pytest.raises(ValueError, match=r"mine\.judge"):
        ExperimentSpec.model_validate({"name": "j", "mine": {"mode": "judge"}})


def test_first_error_judge_through_a_real_server(transformers_server: Any) -> None:
    spec = ExperimentSpec.model_validate(
        {
            "name": "j",
            "mine": {
                "mode": "judge",
                "judge": {
                    "base_url": transformers_server.base_url,
                    "model": transformers_server.model,
                    "max_tokens": 16,
                    "timeout_s": 60,
                },
            },
        }
    )
    rec = make_episode(
        run="mine/j", task="login-user", seed=0, policy="sft", success=False, n_steps=3
    )
    seen: list[tuple[str, Any]] = []

    async def go() -> list:
        client = _judge_client(spec)
        chat = client.chat

        async def spy(messages: list[dict]) -> tuple[str, dict]:
            text, usage = await chat(messages)
            seen.append((messages[0]["content"], (text, usage)))
            return text, usage

        client.chat = spy
        try:
            return await _judge_labels(client)(rec)
        finally:
            await client.close()

    labels = asyncio.run(go())
    ((prompt, (reply, usage)),) = seen
    assert prompt.startswith(FIRST_ERROR_PROMPT.split("{")[0])
    assert "Step 3\nPage:\n" in prompt and rec.episode.instruction in prompt
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    verdict = parse_first_error(reply, len(rec.steps))
    if verdict.step is None or verdict.action is None:
        assert labels == []
    else:
        assert [lab.step for lab in labels] == list(range(verdict.step + 1))
