"""The synthetic pretraining tasks: the policy's prompt format, determinism, right actions."""

from __future__ import annotations

import json
import re

import pytest

from rmsweb.agents.prompt import PromptConfig, approx_tokens, build_messages, completion_text
from rmsweb.env.actions import parse_action
from rmsweb.env.types import Action
from rmsweb.spec.model import PRETRAIN_SKILLS
from rmsweb.train.pretrain import templates as T
from rmsweb.train.pretrain.synthetic import (
    SKILLS,
    Example,
    episode,
    fingerprint,
    generate,
    to_sample,
)

# One observation line (rmsweb/env/observe.py render_line): indent, [id], role, name,
# type=, value=, states, options.
LINE = re.compile(
    r'^(?P<indent>(  )*)\[(?P<id>\d+)\] (?P<role>\w+)(?: (?P<name>"(?:[^"\\]|\\.)*"))?'
    r"(?: type=\w+)?(?: value=(?P<value>\"(?:[^\"\\]|\\.)*\"))?(?: (?:focused|selected|checked))*"
    r"(?: options=\[(?P<options>.*)\])?$"
)


def _page(obs: str) -> dict[str, dict]:
    els = {}
    for line in obs.splitlines():
        m = LINE.match(line)
        assert m, f"not an observation line: {line!r}"
        els[m["id"]] = {
            "role": m["role"],
            "name": json.loads(m["name"]) if m["name"] else "",
            "value": json.loads(m["value"]) if m["value"] else None,
            "options": json.loads(f"[{m['options']}]") if m["options"] else [],
        }
    return els


def test_skills_are_the_specs() -> None:
    assert SKILLS == PRETRAIN_SKILLS


def test_deterministic_from_the_seed() -> None:
    assert fingerprint(generate(300, 5)) == fingerprint(generate(300, 5))
    assert fingerprint(generate(300, 5)) != fingerprint(generate(300, 6))
    assert {e.skill for e in generate(60, 0, ("copy", "form"))} == {"copy", "form"}
    with pytest.raises(ValueError, match="unknown skills"):
        generate(3, 0, ("copy", "fly"))


def test_samples_are_the_policys_prompt_and_completion() -> None:
    cfg = PromptConfig(history_steps=3, max_prompt_tokens=512, system="none")
    for i, ex in enumerate(generate(120, 1)):
        s = to_sample(ex, i, cfg, approx_tokens)
        assert s.messages == build_messages(ex.instruction, ex.obs_text, ex.history, cfg)
        assert s.completion == completion_text(ex.action) == f"Action: {ex.action}"
        assert s.task_id == f"synthetic/{ex.skill}"
        text = s.messages[-1]["content"]
        assert text.startswith(f"Task: {ex.instruction}\n")
        assert ("Previous actions:\n" in text) == bool(ex.history)
        assert isinstance(parse_action(s.completion), Action)
        _page(ex.obs_text)  # every line in the observation format


def _check_step(ex: Example) -> None:
    page = _page(ex.obs_text)
    action = parse_action(ex.action)
    assert isinstance(action, Action)
    target = page.get(action.target) if action.target else None
    if action.type == "fill":
        assert target and target["role"] == "textbox" and target["value"] is None
        assert action.text and action.text in ex.instruction  # copied from the instruction
        if (
            ex.skill == "copy"
            and target["name"]
            and sum(e["role"] == "textbox" for e in page.values()) > 1
        ):
            assert target["name"] in ex.instruction  # the field the instruction names
    elif action.type == "click":
        assert target and target["role"] != "textbox"
        if ex.skill == "match":
            assert target["name"] in ex.instruction
            same = [e for e in page.values() if e["name"] == target["name"]]
            assert len(same) == 1  # the exact name (case too) picks one element
    elif action.type == "select":
        assert target and target["role"] == "combobox"
        assert action.text in target["options"] and action.text in ex.instruction
        assert action.text != target["value"]
    else:
        assert (action.type, action.text) == ("press", "Enter")
        assert ex.skill == "enter" and ex.history
        filled = [e for e in page.values() if e["value"] is not None]
        assert filled and filled[0]["value"] in ex.instruction


@pytest.mark.parametrize("skill", SKILLS)
def test_each_steps_action_is_right_for_its_page(skill: str) -> None:
    import random

    rng = random.Random(11)
    for _ in range(150):
        steps = episode(skill, rng)
        for k, ex in enumerate(steps):
            assert ex.step == k and len(ex.history) == k
            assert ex.instruction == steps[0].instruction
            _check_step(ex)
        if skill in ("form", "enter"):
            assert len(steps) >= 2  # several steps, the history tells where it is
        if skill == "form":
            fills = [parse_action(ex.action) for ex in steps[:-1]]
            assert all(a.type == "fill" for a in fills)  # one field a step...
            assert len({a.target for a in fills}) == len(fills)
            last = _page(steps[-1].obs_text)
            assert all(last[a.target]["value"] == a.text for a in fills)  # ...all filled
            click = parse_action(steps[-1].action)
            assert click.type == "click" and last[click.target]["role"] == "button"
            assert last[click.target]["name"] in steps[0].instruction


def test_attribute_picks_by_ordinal_role_and_caption() -> None:
    import random

    rng = random.Random(5)
    seen = set()
    for _ in range(300):
        ex = episode("attribute", rng)[0]
        page = _page(ex.obs_text)
        action = parse_action(ex.action)
        ids = list(page)
        target = page[action.target]
        if action.type == "fill":  # caption: the text line right above the input
            above = page[ids[ids.index(action.target) - 1]]
            assert above["role"] == "text" and above["name"] in ex.instruction
            seen.add("caption")
            continue
        same_role = [i for i in ids if page[i]["role"] == target["role"]]
        position = same_role.index(action.target)
        words = re.findall(r"[a-z]+|\d+", ex.instruction.lower())
        if "last" in words:
            assert position == len(same_role) - 1
            seen.add("ordinal")
        elif any(w in T.ORDINALS for w in words) or any(w.isdigit() for w in words):
            ordinal = next((T.ORDINALS.index(w) for w in words if w in T.ORDINALS), None)
            n = ordinal if ordinal is not None else int(next(w for w in words if w.isdigit())) - 1
            assert position == n
            seen.add("ordinal")
        else:  # role: other roles carry the same name
            assert sum(e["name"] == target["name"] for e in page.values()) >= 2
            assert any(noun in ex.instruction for noun in T.NOUNS[target["role"]])
            seen.add("role")
    assert seen == {"caption", "ordinal", "role"}
