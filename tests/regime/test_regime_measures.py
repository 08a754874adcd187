"""Headroom and length from constructed val episodes; the metrics' shape per task."""

from __future__ import annotations

from rmsweb.regime.measures import POOLED, regime_metrics
from rmsweb.regime.probe import ProbeState
from rmsweb.store.synthetic import make_episode


def episodes(policy: str, task: str, outcomes: list[tuple[bool, int]]) -> list:
    return [
        make_episode(run="regime/x/s0", task=task, seed=i, policy=policy, success=ok, n_steps=n)
        for i, (ok, n) in enumerate(outcomes)
    ]


def probed(task: str, kind: str, reached: bool, source: str = "critical") -> ProbeState:
    s = ProbeState(
        state_id=f"{task}-{kind}-{reached}-{source}",
        kind=kind,
        source=source,
        task_id=task,
        seed=0,
        episode_id="e",
        step=0,
        instruction="",
        obs_text="",
        screenshot=None,
        history=[],
        references=["click(1)"],
        boxes=[],
        policy_output=None,
    )
    s.samples_ok = [False, reached]
    return s


def test_headroom_and_length_per_task_and_pooled() -> None:
    records = [
        *episodes("expert", "click-button", [(True, 1), (True, 1), (True, 2), (True, 2)]),
        *episodes("sft", "click-button", [(True, 1), (False, 3), (True, 1), (False, 2)]),
        *episodes("expert", "login-user", [(True, 3), (True, 3), (True, 3), (False, 5)]),
        *episodes("sft", "login-user", [(False, 5)] * 4),
    ]
    mined = [probed("click-button", "mined", True), probed("login-user", "mined", False)]
    val = [probed("login-user", "val", True), probed("login-user", "val", False)]
    m = regime_metrics(["click-button", "login-user"], records, mined, val)
    cb, lu, pooled = m["click-button"], m["login-user"], m[POOLED]
    assert (cb["expert_success_val"], cb["sft_success_val"], cb["headroom"]) == (1.0, 0.5, 0.5)
    assert cb["expert_steps"] == 1.5  # successful episodes only
    assert (lu["expert_success_val"], lu["sft_success_val"], lu["headroom"]) == (0.75, 0.0, 0.75)
    assert lu["expert_steps"] == 3.0  # the failed 5-step episode does not count
    assert pooled["headroom"] == 0.625  # mean over tasks
    assert pooled["expert_steps"] == 2.25
    assert cb["expert_episodes"] == cb["sft_episodes"] == 4
    low, high = (cb["sft_success_val_ci_low"], cb["sft_success_val_ci_high"])
    assert low < 0.5 < high
    # reach: per task, and pooled over the states
    assert (cb["reach_mined"], cb["reach_mined_states"]) == (1.0, 1)
    assert (lu["reach_mined"], lu["reach_val"], lu["reach_val_states"]) == (0.0, 0.5, 2)
    assert (cb["reach_val"], cb["reach_val_states"], cb["reach_val_ci_low"]) == (None, 0, None)
    assert (pooled["reach_mined"], pooled["reach_mined_states"]) == (0.5, 2)
    assert pooled["reach_val_ci_low"] < 0.5 < pooled["reach_val_ci_high"]


def test_a_task_without_episodes_has_no_headroom() -> None:
    records = episodes("expert", "click-button", [(True, 1)])
    m = regime_metrics(["click-button"], records, [], [])
    assert m["click-button"]["headroom"] is None and m["click-button"]["sft_episodes"] == 0
    assert m[POOLED]["reach_mined"] is None and m[POOLED]["reach_mined_states"] == 0


def test_reach_at_first_failures_counts_only_an_episodes_first_wrong_step() -> None:
    val = [
        probed("login-user", "val", True, source="first"),
        probed("login-user", "val", False, source="first"),
        probed("login-user", "val", False, source="later"),
        probed("login-user", "val", False, source="later"),
    ]
    m = regime_metrics(["login-user"], [], [], val)
    lu = m["login-user"]
    assert (lu["reach_val"], lu["reach_val_states"]) == (0.25, 4)
    assert (lu["reach_val_first"], lu["reach_val_first_states"]) == (0.5, 2)
    assert m[POOLED]["reach_val_first_reached"] == 1
