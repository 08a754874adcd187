"""The vendored live-benchmark task files: intact, licensed, shipped, and loaded right."""

from __future__ import annotations

import collections
import hashlib
import re
import tomllib
from pathlib import Path

import pytest

from rmsweb.errors import UserError
from rmsweb.spec.suite import (
    WEBTAILBENCH_CATEGORIES,
    WEBVOYAGER_SITES,
    OnlineMind2WebSuite,
    WebTailBenchSuite,
    WebVoyagerSuite,
)
from rmsweb.suites.benchmarks import build_live_suite, load_tasks
from rmsweb.suites.live import DATA, LiveSuite, LiveTaskInfo, split_of
from rmsweb.suites.online_mind2web import level_of, load_online_mind2web
from rmsweb.suites.webtailbench import load_webtailbench
from rmsweb.suites.webvoyager import load_webvoyager

ROOT = Path(__file__).resolve().parents[2]


def test_files_match_the_checksums_in_the_provenance_readme() -> None:
    readme = (DATA / "README.md").read_text()
    sums = re.findall(r"^([0-9a-f]{64})  (\S+)$", readme, re.M)
    assert len(sums) == 5
    for digest, name in sums:
        assert hashlib.sha256((DATA / name).read_bytes()).hexdigest() == digest, name


def test_every_data_folder_carries_a_licence_and_is_shipped() -> None:
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["rmsweb.suites"]
    shipped = {p for pattern in package_data for p in (ROOT / "rmsweb" / "suites").glob(pattern)}
    for folder in ("webvoyager", "online_mind2web", "webtailbench"):
        files = list((DATA / folder).iterdir())
        assert any(f.name.startswith("LICENSE") for f in files), folder
        assert set(files) <= shipped, f"{folder}: not all files match package-data"
    assert DATA / "README.md" in shipped


def test_webvoyager_original_and_cleaned() -> None:
    original, cleaned = load_webvoyager(cleaned=False), load_webvoyager()
    assert (len(original), len(cleaned)) == (643, 595)
    assert {t.id for t in cleaned} < {t.id for t in original}
    sites = collections.Counter(t.category for t in original)
    assert set(sites) == set(WEBVOYAGER_SITES) and sites["Wolfram Alpha"] == 46
    first = original[0]
    assert first.id == "Allrecipes--0" and first.start_url == "https://www.allrecipes.com/"
    assert first.extra == {
        "reference_answer": "'Vegetarian Four Cheese Lasagna', 4.6-star, 181 reviews, Servings 8",
        "reference_type": "possible",
    }
    assert collections.Counter(t.extra["reference_type"] for t in original) == {
        "possible": 500,
        "golden": 143,
    }


def test_online_mind2web_levels() -> None:
    tasks = load_online_mind2web()
    assert len(tasks) == 300 and len({t.site for t in tasks}) == 139  # start URLs
    assert collections.Counter(t.category for t in tasks) == {"easy": 83, "medium": 143, "hard": 74}
    assert all(t.category == level_of(t.reference_length) for t in tasks)
    example = next(t for t in tasks if t.id == "fb7b4f784cfde003e2548fdf4e8d6b4f")
    assert (
        example.goal == "Open the page with an overview of the submission of releases on Discogs."
    )
    assert (example.category, example.reference_length) == ("medium", 6)
    assert [level_of(n) for n in (5, 6, 10, 11)] == ["easy", "medium", "medium", "hard"]


def test_webtailbench_categories_and_start_page() -> None:
    tasks = load_webtailbench()
    assert len(tasks) == 609 and len({t.id for t in tasks}) == 609
    counts = collections.Counter(t.category for t in tasks)
    assert set(counts) == set(WEBTAILBENCH_CATEGORIES) and counts["things_to_do"] == 80
    assert all(t.start_url == "https://www.google.com/" for t in tasks)
    assert not any(t.goal.endswith(("\r", "\n")) for t in tasks)


def test_split_by_task_id_is_stable_and_near_the_fraction() -> None:
    ids = [t.id for t in load_webvoyager(cleaned=False)]
    assert split_of("Allrecipes--0", 0.5) == split_of("Allrecipes--0", 0.5)
    test = sum(split_of(i, 0.5) == "test" for i in ids)
    assert 0.4 * len(ids) < test < 0.6 * len(ids)
    # growing the fraction only moves tasks into test, never out of it
    small = {i for i in ids if split_of(i, 0.2) == "test"}
    assert small <= {i for i in ids if split_of(i, 0.5) == "test"}


def test_suite_from_spec_filters_and_keeps_held_out_tasks_apart() -> None:
    suite = build_live_suite(
        OnlineMind2WebSuite(levels=["hard"], limit=20, test_fraction=0.3, max_wall_s=100)
    )
    assert isinstance(suite, LiveSuite) and suite.name == "online_mind2web"
    assert len(suite.task_ids()) == 20
    train, test = suite.task_ids("train"), suite.task_ids("test")
    assert sorted(train + test) == sorted(suite.task_ids()) and not set(train) & set(test)
    task = suite.task(test[0], 0, "test")
    assert task.instruction == suite.info(test[0]).goal and task.max_wall_s == 100
    with pytest.raises(UserError, match="belongs to the test split"):
        suite.task(test[0], 0, "train")
    assert suite.navigation_policy.live and not suite.navigation_policy.allow_private
    assert suite.allowed_origins is None and suite.seeds("train") == [0]


def test_spec_filters() -> None:
    tasks = load_tasks(WebVoyagerSuite(sites=["GitHub", "ESPN"], cleaned=False))
    assert len(tasks) == 85 and {t.site for t in tasks} == {"GitHub", "ESPN"}
    tail = load_tasks(WebTailBenchSuite(categories=["jobs"], start_url="https://duckduckgo.com/"))
    assert len(tail) == 50 and tail[0].start_url == "https://duckduckgo.com/"


def test_broken_task_files_name_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "tasks.jsonl"
    bad.write_text('{"id": "A--0", "ques": "q", "web": "https://a/", "web_name": "A"}\n{oops\n')
    with pytest.raises(UserError, match=r"tasks.jsonl:2: not JSON"):
        load_webvoyager(bad)
    bad.write_text('{"id": "A--0", "ques": "", "web": "https://a/", "web_name": "A"}\n')
    with pytest.raises(UserError, match=r"tasks.jsonl:1: missing or empty ques"):
        load_webvoyager(bad)
    om2w = tmp_path / "om2w.json"
    om2w.write_text(
        '[{"task_id": "t", "confirmed_task": "c", "website": "https://x/", '
        '"reference_length": 12, "level": "easy"}]'
    )
    with pytest.raises(UserError, match="does not match reference_length 12"):
        load_online_mind2web(om2w)
    with pytest.raises(UserError, match="cannot read"):
        load_online_mind2web(tmp_path / "missing.json")


def test_duplicate_ids_are_refused() -> None:
    t = LiveTaskInfo("x", "g", "https://a/", "a", "a")
    with pytest.raises(UserError, match="appears twice"):
        LiveSuite("webvoyager", [t, t])
