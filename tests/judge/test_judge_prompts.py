"""Each judge's prompts are its published protocol's, exactly: the texts are pinned by
sha256 (a one-character change fails), and the messages are assembled as the published
code assembles them."""

from __future__ import annotations

import datetime as dt
import hashlib

import pytest

from rmsweb.judge import webjudge, webtailbench, webvoyager
from rmsweb.judge.episode import JudgeInput

# sha256 and length of each prompt constant, taken from the published sources:
# WebVoyager evaluation/auto_eval.py; Online-Mind2Web src/methods/webjudge_online_mind2web.py;
# stagehand v3LegacyEvaluator.ts and evals/tasks/agent/webtailbench.ts.
PINNED = {
    (webvoyager, "SYSTEM_PROMPT"): (2157, "b666ebf53ca6d2d8c4a3f9af60e35885dd7094cc61d86c8352cccb127230a5b8"),
    (webvoyager, "USER_PROMPT"): (69, "22abfda4131da25bbea0e2bb9aeb8a39579a3bfcf0f6a0f943b281ff5bff3959"),
    (webvoyager, "VERDICT_PROMPT"): (14, "3154ce496fd5486bf0ee0afc2d25e9614aed1c16939673ff35040d6bb49de06b"),
    (webjudge, "KEY_POINTS_SYSTEM"): (951, "f59402219cc586b00584fea7263a4fa93f71bf3e4d6fd43ae66f5430844cd51d"),
    (webjudge, "KEY_POINTS_USER"): (12, "0a0cf959a858a9eb295675230f7826d4c759d28b40b9d7ddc3776c7c936057ab"),
    (webjudge, "IMAGE_SYSTEM"): (1956, "0c15bc23bcadf384e37763aaccf601291df6c0cdab8ec763b023b7c34470dda4"),
    (webjudge, "IMAGE_USER"): (119, "75cc58c21896a74c2a26a72792ea68e91e2df31239d8e02c79b3977c5f773c9e"),
    (webjudge, "FINAL_SYSTEM"): (2928, "ff67fd2ed338ab1aa571ec13efaa17ce2a459857e92a11f04b4217979a5484af"),
    (webjudge, "FINAL_USER"): (183, "0002edd5e7fffc9313703e3def89401534fc77ccc82700a6866c25ccb2425171"),
    (webjudge, "FINAL_USER_NO_IMAGES"): (75, "7ab5f230283267b7426b9bf8880aa5be6536cb192856d8eff72b005b4ca5bb65"),
    (webtailbench, "QUESTION"): (281, "961674537ec082679afcdfaf11d2f49a1394a5c16154332aab99b7fbb9b944c1"),
    (webtailbench, "SYSTEM_PROMPT"): (494, "68d4b616bf3c7930461bd398e04070b878ba85e53b451dc7f978296b1c895505"),
    (webtailbench, "WITH_REASONING"): (95, "880aa3542bba09678677fd17fd031ed24a48d97cb181ad7cbd2617bc18bd6866"),
    (webtailbench, "USE_REASONING"): (208, "e9820c4c7065b5e48bcf24ebfeccc6e64c172af99244b17b3087886eef6658ec"),
    (webtailbench, "USER_PROMPT"): (267, "aa72d3c3a5e261729b73dd1384807686e5def31368e05cb1965a6ea4290842b1"),
}  # fmt: skip


@pytest.mark.parametrize("key", PINNED, ids=lambda k: f"{k[0].__name__.split('.')[-1]}.{k[1]}")
def test_prompt_text_is_pinned(key) -> None:
    module, name = key
    text = getattr(module, name)
    length, digest = PINNED[key]
    assert (len(text), hashlib.sha256(text.encode()).hexdigest()) == (length, digest)


def test_published_sentences_are_there() -> None:
    # Readable anchors beside the hashes: the decisive instruction of each prompt.
    assert webvoyager.SYSTEM_PROMPT.endswith("either as 'SUCCESS' or 'NOT SUCCESS'.")
    assert (
        webvoyager.USER_PROMPT
        == "TASK: <task>\nResult Response: <answer>\n<num> screenshots at the end: "
    )
    assert "must go through the sort function" in webjudge.KEY_POINTS_SYSTEM
    assert webjudge.IMAGE_SYSTEM.endswith(
        "1. **Reasoning**: [Your explanation]  \n2. **Score**: [1-5]"
    )
    assert webjudge.FINAL_SYSTEM.endswith('Status: "success" or "failure"\n')
    assert "up to the point of purchasing/booking/entering payment/user information" in (
        webtailbench.QUESTION
    )


def shot(i: int) -> bytes:
    return f"png-{i}".encode()


def test_webvoyager_messages() -> None:
    inp = JudgeInput(
        "e",
        "Apple--3",
        "Find the price.",
        "It costs $999.",
        screenshots=[shot(i) for i in range(20)],
    )
    messages = webvoyager.build_messages(inp)
    assert messages[0] == {"role": "system", "content": webvoyager.SYSTEM_PROMPT}
    parts = messages[1]["content"]
    assert parts[0] == {
        "type": "text",
        "text": "TASK: Find the price.\nResult Response: It costs $999.\n15 screenshots at the end: ",
    }
    assert [p["type"] for p in parts] == ["text"] + ["image_url"] * 15 + ["text"]
    assert parts[1]["image_url"]["url"] == "data:image/png;base64," + "cG5nLTU="  # screenshot 5
    assert parts[-1] == {"type": "text", "text": "Your verdict:\n"}
    # fewer screenshots than k: all of them, and the prompt still says k (as the script does)
    few = webvoyager.build_messages(JudgeInput("e", "t", "T", "A", screenshots=[shot(0)]), 15)
    assert "15 screenshots at the end" in few[1]["content"][0]["text"]
    assert len(few[1]["content"]) == 3


def test_webjudge_messages() -> None:
    kp = webjudge.key_points_messages("Book a table.")
    assert kp == [
        {"role": "system", "content": webjudge.KEY_POINTS_SYSTEM},
        {"role": "user", "content": [{"type": "text", "text": "Task: Book a table."}]},
    ]
    img = webjudge.image_messages("Book a table.", "1. Book\n2. Table", b"jpeg")
    assert img[1]["content"][0]["text"] == (
        "**Task**: Book a table.\n\n**Key Points for Task Completion**: 1. Book\n2. Table\n\n"
        "The snapshot of the web page is shown in the image."
    )
    assert img[1]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/jpeg;base64,anBlZw==", "detail": "high"},
    }
    final = webjudge.final_messages(
        "Book a table.",
        "1. Book",
        ['[3] link "Reserve" -> CLICK', "-> SCROLL: down"],
        [(b"a", "It shows the form."), (b"b", "")],
    )
    assert final[0]["content"] == webjudge.FINAL_SYSTEM
    assert final[1]["content"][0]["text"] == (
        "User Task: Book a table.\n\nKey Points: 1. Book\n\nAction History:\n"
        '1. [3] link "Reserve" -> CLICK\n2. -> SCROLL: down\n\n'
        "The potentially important snapshots of the webpage in the agent's trajectory and "
        "their reasons:\n1. It shows the form."
    )
    assert [p["type"] for p in final[1]["content"]] == ["text", "image_url", "image_url"]
    none_kept = webjudge.final_messages("T", "k", ["a"], [])
    assert none_kept[1]["content"] == [
        {"type": "text", "text": "User Task: T\n\nKey Points: k\n\nAction History:\n1. a"}
    ]


def test_webtailbench_messages() -> None:
    import io

    import numpy as np
    from PIL import Image

    def noise(seed: int) -> bytes:  # frames no two of which are near-duplicates
        pixels = np.random.default_rng(seed).integers(0, 256, (50, 100, 3), dtype=np.uint8)
        out = io.BytesIO()
        Image.fromarray(pixels).save(out, "PNG")
        return out.getvalue()

    buf = io.BytesIO()
    Image.new("RGB", (100, 50), (0, 0, 255)).save(buf, "PNG")
    inp = JudgeInput(
        "e",
        "united_13",
        "Find the fare.",
        "Economy $500.",
        screenshots=[noise(i) for i in range(10)],
        date=dt.date(2026, 12, 1),
    )
    messages = webtailbench.build_messages(inp)
    # The evaluator's template literal as stagehand renders it with agent reasoning given.
    assert messages[0]["content"] == (
        "You are an expert evaluator that confidently returns YES or NO given a question and "
        "multiple screenshots showing the progression of a task.\n"
        "        You also have access to the agent's detailed reasoning and thought process "
        "throughout the task.\n"
        "        Analyze ALL screenshots to understand the complete journey. Look for evidence "
        "of task completion across all screenshots, not just the last one.\n"
        "        Success criteria may appear at different points in the sequence (confirmation "
        "messages, intermediate states, etc).\n"
        "        The agent's reasoning provides crucial context about what actions were "
        "attempted, what was observed, and the decision-making process. Use this alongside "
        "the visual evidence to make a comprehensive evaluation.\n"
        "        Today's date is 12/1/2026"
    )
    parts = messages[1]["content"]
    assert parts[0]["text"] == (
        'Question: Did the agent successfully complete this task: "Find the fare."? Note that '
        "the agent does not have purchasing/booking capabilities; mark as pass if the agent has "
        "successfully performed all necessary steps for the task up to the point of "
        "purchasing/booking/entering payment/user information\n\n"
        "Agent's reasoning and actions throughout the task:\nEconomy $500.\n\n"
        "I'm providing 8 screenshots showing the progression of the task. Please analyze both "
        "the agent's reasoning and all screenshots to determine if the task was completed "
        "successfully."
    )
    assert len(parts) == 1 + 8  # the last 8 of 10 distinct frames
    first = Image.open(
        io.BytesIO(__import__("base64").b64decode(parts[1]["image_url"]["url"].split(",")[1]))
    )
    assert first.size == (70, 35)  # scaled to 70%
    no_answer = webtailbench.build_messages(
        JudgeInput("e", "t", "T", None, screenshots=[buf.getvalue()])
    )
    assert (
        "throughout the task:\nno reasoning available, agent potentially hit step limit"
        in (no_answer[1]["content"][0]["text"])
    )
