"""The README's live-benchmark section says what a live number can be compared with, how
judge failures count and which judge the paper-scale specs use, and says it as the code
and the specs have it: change a judge, a protocol's frames or the retries, and this
fails until the README follows.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rmsweb.judge import client, webjudge, webtailbench, webvoyager
from rmsweb.judge.protocols import protocol_for
from rmsweb.report.live import OM2W_JUDGE
from rmsweb.spec.loader import load_experiment

ROOT = Path(__file__).resolve().parents[1]
PAPER_SPECS = ("paper-8b.yaml", "paper-32b.yaml")


@pytest.fixture(scope="module")
def live() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## Live benchmarks\n(.*?)^## ", readme, re.S | re.M)
    assert section, "README: no '## Live benchmarks' section"
    return " ".join(section.group(1).split())  # one line: wrapping does not matter


def test_it_says_how_the_numbers_compare_with_published_ones(live: str) -> None:
    assert "**How the numbers compare with published ones.**" in live
    for needed in ("the protocol:", "the judge model:", "the frames:", "the tasks:"):
        assert needed in live, needed
    assert f"WebJudge on {OM2W_JUDGE}" in live  # the leaderboard's judge (report/live.py)
    assert "not published" in live  # WebTailBench's rubric verifier


def test_the_frames_it_names_are_the_protocols(live: str) -> None:
    assert f"the last {webvoyager.LAST_K} screenshots" in live
    assert f"scoring {webjudge.SCORE_THRESHOLD} or more (at most {webjudge.MAX_IMAGES})" in live
    assert f"at most {webtailbench.LAST_K} frames" in live
    assert f"scaled to {webtailbench.SCALE:.0%}" in live


def test_it_says_how_judge_failures_count(live: str) -> None:
    assert "**Judge failures.**" in live
    assert f"{client.JUDGE_RETRIES + 1} asks in all" in live
    assert f"`{client.JUDGE_FAILED}`" in live
    assert '"Judge failures"' in live and '"Judged failed"' in live


PROTOCOL_NAMES = {
    "webvoyager": "WebVoyager",
    "webjudge": "WebJudge",
    "webtailbench": "WebTailBench",
}


def _judges(spec) -> list[tuple[str, object]]:
    """(protocol, judge spec) of every suite the spec judges: what it trains on and,
    where the spec has them, the suites it evaluates on."""
    suites = [spec.suite] + [s.suite for s in getattr(spec.eval, "suites", None) or []]
    out = []
    for suite in suites:
        judge = getattr(suite, "judge", None)
        if judge is not None:
            out.append((protocol_for(suite.kind, judge.protocol), judge))
    return out


@pytest.mark.parametrize("name", PAPER_SPECS)
def test_it_names_the_paper_specs_judges(live: str, name: str) -> None:
    spec = load_experiment(ROOT / "experiments" / name)
    assert "**The paper-scale specs' judge.**" in live
    paper = live[live.index("**The paper-scale specs' judge.**") :]
    assert f"`{name}`" in paper or f"`experiments/{name}`" in paper, name
    judges = _judges(spec)
    assert judges, f"{name} judges nothing: the README's paragraph is out of date"
    for protocol, judge in judges:
        assert f"{PROTOCOL_NAMES[protocol]}" in paper, (name, protocol)
        assert f"on {judge.model} through" in paper, (name, judge.model)
        assert f"`{judge.api_key_env}`" in paper, (name, judge.api_key_env)
        prices = judge.prices
        assert f"${prices.input_usd_per_mtok:.2f} / ${prices.output_usd_per_mtok:.2f}" in paper
        if protocol == "webvoyager" and judge.last_k_screenshots:
            assert f"last {judge.last_k_screenshots} screenshots" in paper
