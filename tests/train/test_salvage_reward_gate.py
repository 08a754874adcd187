"""Rewards, the gate's reasons, and mined rows rebuilt into the policy's exact prompt."""

from __future__ import annotations

import pytest

from rmsweb.agents.prompt import PromptConfig
from rmsweb.env.types import HistoryItem
from rmsweb.errors import UserError
from rmsweb.store.rows import ElementBoxRow, MinedStateRow
from rmsweb.train.salvage_ds.gate import gate, group_stats
from rmsweb.train.salvage_ds.reward import elements_from_boxes, parse_references, score
from rmsweb.train.salvage_ds.states import state_from_row

REFS = parse_references(["click(3)", 'fill(5, "Bob Smith")'], "test")
BOXES = elements_from_boxes(
    [ElementBoxRow("3", 10, 10, 40, 20), ElementBoxRow("4", 60, 10, 40, 20)]
)


@pytest.mark.parametrize(
    ("output", "reward"),
    [
        ("Action: click(3)", 1.0),
        ("Thought: the OK button\nAction: click(3)", 1.0),
        ('Action: fill(5, "Bob  Smith")', 1.0),  # whitespace normalised
        ("Action: click_xy(30, 20)", 1.0),  # inside element 3's box
        ("Action: click(4)", -1.0),  # well formatted, wrong element
        ("Action: click_xy(70, 20)", -1.0),  # inside element 4's box
        ('Action: fill(5, "bob smith")', -1.0),  # typed text is case-sensitive
        ('Action: select(3, "x")', -1.0),  # wrong type
        ("I would click the button", -1.0),  # unparseable
    ],
)
def test_polarized_reward(output: str, reward: float) -> None:
    got = score(output, REFS, kind="polarized", elements=BOXES)
    assert got.reward == reward and got.correct == (reward > 0)


def test_polarized_never_ranks_one_wrong_action_above_another() -> None:
    wrong = ["Action: click(4)", 'Action: fill(5, "Bob")', "Action: stop()", "nonsense"]
    assert {score(o, REFS).reward for o in wrong} == {-1.0}


def test_partial_and_format_plus_match() -> None:
    # partial: share of matching components of the best reference (type, target, argument).
    assert score("Action: click(3)", REFS, kind="partial").reward == 1.0
    assert score("Action: click(4)", REFS, kind="partial").reward == pytest.approx(2 / 3)
    assert score('Action: fill(5, "Al")', REFS, kind="partial").reward == pytest.approx(2 / 3)
    assert score('Action: press("Enter")', REFS, kind="partial").reward == 0.0
    assert score("no action", REFS, kind="partial").reward == 0.0
    # format_plus_match: bonus for parsing, +1 for a match.
    kw = {"kind": "format_plus_match", "format_bonus": 0.1}
    assert score("Action: click(3)", REFS, **kw).reward == pytest.approx(1.1)
    assert score("Action: click(4)", REFS, **kw).reward == pytest.approx(0.1)
    assert score("no action", REFS, **kw).reward == 0.0


def test_similarity_tau() -> None:
    refs = parse_references(['answer("the eiffel tower")'], "test")
    assert score('Action: answer("eiffel tower")', refs).reward == -1.0
    assert score('Action: answer("eiffel tower")', refs, tau=0.8).reward == 1.0


def test_bad_references_are_user_errors() -> None:
    with pytest.raises(UserError, match="does not parse"):
        parse_references(["clik(3)"], "state s1")
    with pytest.raises(UserError, match="no reference actions"):
        parse_references([], "state s1")


def _decide(rewards: list[float], **kw: float):
    stats = group_stats(rewards, [r > 0 for r in rewards])
    args = {"min_std": 0.1, "competence_min": 0.2, "competence_max": 0.8, **kw}
    return gate(stats, enabled=True, **args)


def test_gate_reasons() -> None:
    assert _decide([1, -1, -1, 1]).reason == "accepted"
    assert _decide([-1, -1, -1, -1]).reason == "all_wrong"
    assert _decide([1, 1, 1, 1]).reason == "all_right"
    assert _decide([1] + [-1] * 7).reason == "too_hard"  # 1/8 < 0.2
    assert _decide([-1] + [1] * 7).reason == "too_easy"  # 7/8 > 0.8
    assert _decide([1, -1, -1, 1], min_std=1.5).reason == "low_std"  # std 1.155
    stats = group_stats([-1.0, -1.0], [False, False])
    ungated = gate(stats, enabled=False, min_std=0.1, competence_min=0.2, competence_max=0.8)
    assert ungated.accepted and ungated.reason == "ungated"


def test_group_stats_use_the_advantage_std() -> None:
    stats = group_stats([1.0, -1.0, -1.0, -1.0], [True, False, False, False])
    assert (stats.mean, stats.std, stats.frac_correct) == (-0.5, 1.0, 0.25)


@pytest.mark.parametrize("budget", [256, 160])  # 160: cut (194 tokens by this tokenizer)
def test_mined_row_rebuilds_the_policys_prompt(tiny_tokenizer, budget: int) -> None:
    """The RL prompt of a mined row is, token for token, the text HFPolicy.render built
    for the policy at that step (same chat template, same truncation by the same
    tokenizer), not merely the output of the function both call."""
    from rmsweb.agents.hf_policy import HFPolicy
    from rmsweb.env.types import ActRequest, Observation
    from rmsweb.models.load import LoadedModel
    from rmsweb.train.salvage_ds.batch import encode_prompt

    cfg = PromptConfig(history_steps=2, system="compact", max_prompt_tokens=budget)
    history = [
        HistoryItem("Action: click(2)", "click(2)", None),
        HistoryItem("oops", None, None),
        HistoryItem('Action: fill(3, "x")', 'fill(3, "x")', "element 3 is not editable"),
    ]
    obs = '[2] button "ok"\n[3] textbox "name"\n[4] button "submit"'
    row = MinedStateRow(
        state_id="e1/3",
        episode_id="e1",
        step=3,
        obs_text=obs,
        screenshot=None,
        history=history,
        reference_actions=["click(4)"],
        policy_action="click(2)",
        failure_mode="wrong_element",
        weight=2.0,
        task_id="click-button",
        instruction="Click submit.",
    )
    tok = tiny_tokenizer
    policy = HFPolicy(LoadedModel(None, tok, tok, False), cfg)
    request = ActRequest(
        "click-button",
        "Click submit.",
        Observation(url="http://127.0.0.1/", title="t", text=obs),
        history=list(history),
        step=3,
    )
    rendered, image = policy.render(request)
    state = state_from_row(row, cfg, policy.count_tokens)
    encoded = encode_prompt(tok, tok, False, state.messages, state.image)
    assert tok.decode(encoded.input_ids) == rendered and image is None and state.image is None
    assert encoded.input_ids.tolist() == tok(rendered, add_special_tokens=False)["input_ids"]
    if budget == 256:
        assert 'fill(3, "x") -> error: element 3 is not editable' in rendered
    else:  # cut by the tokenizer's count: the older step and the page lines went
        assert "(unparseable output)" not in rendered and "lines omitted" in rendered
    assert state.references == ["click(4)"] and state.weight == 2.0
    with pytest.raises(UserError, match="does not parse"):
        state_from_row(MinedStateRow("s", "e", 0, obs, None, [], ["tap(4)"], None, None, 1.0), cfg)
