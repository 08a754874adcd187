"""The Online-Mind2Web judge-input layout, checked against the authors' example run; and
WebJudge on that run: its three kinds of calls, a stored verdict."""

from __future__ import annotations

import asyncio
import base64
import filecmp
import io
import json
from pathlib import Path

import pytest
from PIL import Image

from rmsweb.env.actions import ActionRow
from rmsweb.errors import UserError
from rmsweb.evaluate.imported import imported_record
from rmsweb.judge import webjudge
from rmsweb.judge.client import JudgeClient
from rmsweb.judge.episode import describe_action, from_record
from rmsweb.judge.om2w_layout import export_run, read_run, read_trajectory, write_trajectory
from rmsweb.store.rows import EpisodeRecord, EpisodeRow, ScreenshotRow, StepRow
from rmsweb.store.views import connect
from rmsweb.store.writer import ShardWriter


def png(color: tuple[int, int, int], size: tuple[int, int] = (64, 48)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, "PNG")
    return buf.getvalue()


# --------------------------------------------------------------------------- the layout


@pytest.mark.parametrize("which", ["example_small", "example_full"])
def test_example_run_reads_and_writes_back_byte_identical(which, request, tmp_path) -> None:
    example: Path = request.getfixturevalue(which)
    inp = read_trajectory(example)
    assert inp.task_id == "fb7b4f784cfde003e2548fdf4e8d6b4f"
    assert inp.task == "Open the page with an overview of the submission of releases on Discogs."
    assert inp.answer.startswith("The page with an overview of submission guidelines")
    assert len(inp.actions) == len(inp.thoughts) == 4 and len(inp.screenshots) == 5
    assert inp.actions[0] == '<div role="button"> -> CLICK'
    out = write_trajectory(inp, tmp_path)
    assert out.name == example.name
    assert (out / "result.json").read_bytes() == (example / "result.json").read_bytes()
    names = sorted(p.name for p in (example / "trajectory").iterdir())
    assert sorted(p.name for p in (out / "trajectory").iterdir()) == names
    assert all(
        filecmp.cmp(example / "trajectory" / n, out / "trajectory" / n, False) for n in names
    )


def episode_record() -> EpisodeRecord:
    """A finished rmsweb episode: click, type, answer; one screenshot per step."""
    shots = [png((255, 0, 0)), png((0, 255, 0)), png((0, 0, 255))]
    rows = [ScreenshotRow(f"sha{i}", s, 64, 48) for i, s in enumerate(shots)]
    ep = EpisodeRow(
        episode_id="Shop--1/0/pol/0", run="eval/x", stage="eval", suite="webvoyager",
        task_id="Shop--1", seed=0, split="test", policy="pol", success=False, n_steps=3,
        answer="$12.50", instruction="Find the price of the blue widget.", started_at=1.7e9,
    )  # fmt: skip
    obs = '[1] link "Products"\n[2] textbox "Search"\n[3] button "Go"'
    steps = [
        StepRow(ep.episode_id, 0, "http://shop/", obs, "sha0",
                "Thought: open the catalogue\nAction: click(1)", ActionRow("click", "1"),
                True, None, 0.0, False, 0.1),
        StepRow(ep.episode_id, 1, "http://shop/p", obs, "sha1",
                'Action: fill(2, "blue widget")', ActionRow("fill", "2", "blue widget"),
                True, None, 0.0, False, 0.1),
        StepRow(ep.episode_id, 2, "http://shop/w", obs, "sha2",
                'Thought: found it\nAction: answer("$12.50")', ActionRow("answer", None, "$12.50"),
                True, None, 0.0, True, 0.1),
    ]  # fmt: skip
    return EpisodeRecord(episode=ep, steps=steps, screenshots=rows)


def test_rmsweb_episode_exports_in_the_example_layout(example_small, tmp_path) -> None:
    rec = episode_record()
    (folder,) = export_run([rec], tmp_path).folders
    ours = json.loads((folder / "result.json").read_text())
    theirs = json.loads((example_small / "result.json").read_text())
    assert list(ours) == list(theirs)  # same keys, same order
    assert all(type(ours[k]) is type(theirs[k]) for k in theirs)
    assert folder.name == "Shop--1" and ours["task_id"] == "Shop--1"
    assert ours["final_result_response"] == "$12.50"
    # the answer is the final result, not an action of the history
    assert ours["action_history"] == [
        '[1] link "Products" -> CLICK',
        '[2] textbox "Search" -> TYPE: blue widget',
    ]
    assert ours["thoughts"] == ["open the catalogue", ""]
    files = sorted(p.name for p in (folder / "trajectory").iterdir())
    assert files == [f"{i}_full_screenshot.png" for i in range(3)]
    assert (folder / "trajectory" / "2_full_screenshot.png").read_bytes() == rec.screenshots[2].png
    back = read_trajectory(folder)
    direct = from_record(rec)
    assert (back.task, back.answer, back.actions, back.thoughts, back.screenshots) == (
        direct.task, direct.answer, direct.actions, direct.thoughts, direct.screenshots,
    )  # fmt: skip


def test_one_folder_per_task_with_its_other_attempts_inside(tmp_path) -> None:
    """The authors' script counts the folders under the run: one per task, whatever the
    attempts; attempt 0 is the scored one, the others are kept in <task>/attempts/."""
    first, retry = episode_record(), episode_record()
    retry.episode.attempt, retry.episode.answer = 1, "$12.49"
    done = export_run([retry, first], tmp_path)  # in any order
    assert [f.name for f in done.folders] == ["Shop--1"] and done.attempts == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Shop--1"]
    assert (
        json.loads((tmp_path / "Shop--1" / "result.json").read_text())["final_result_response"]
        == "$12.50"
    )  # attempt 0
    kept = read_trajectory(tmp_path / "Shop--1" / "attempts" / "a1")
    assert kept.answer == "$12.49" and len(kept.screenshots) == 3
    assert [r.task_id for r in read_run(tmp_path)] == ["Shop--1"]  # attempts are not runs


def test_several_seeds_get_one_folder_per_seed(tmp_path) -> None:
    a, b, c = episode_record(), episode_record(), episode_record()
    b.episode.seed = 1
    c.episode.task_id = "Shop--2"
    done = export_run([a, b, c], tmp_path)
    assert [f.name for f in done.folders] == ["Shop--1__s0", "Shop--1__s1", "Shop--2__s0"]
    assert [r.task_id for r in read_run(tmp_path)] == ["Shop--1", "Shop--1", "Shop--2"]


def test_an_environment_error_is_a_folder_with_nothing_to_judge(tmp_path) -> None:
    rec = episode_record()
    rec.episode.error, rec.episode.answer, rec.steps, rec.screenshots = "crash", None, [], []
    done = export_run([rec], tmp_path)
    assert done.env_errors == 1
    result = json.loads((tmp_path / "Shop--1" / "result.json").read_text())
    assert result["rmsweb_error"] == "crash" and result["action_history"] == []
    assert result["final_result_response"] == ""
    assert list((tmp_path / "Shop--1" / "trajectory").iterdir()) == []  # listed, empty


def test_tasks_whose_names_collide_are_refused(tmp_path) -> None:
    a, b = episode_record(), episode_record()
    a.episode.task_id, b.episode.task_id = "Shop 1", "Shop_1"
    with pytest.raises(UserError, match="would share the folder 'Shop_1'"):
        export_run([a, b], tmp_path)


def test_v2_results_are_read(tmp_path) -> None:
    folder = tmp_path / "t1"
    (folder / "trajectory").mkdir(parents=True)
    for name in ("a.png", "b.png"):
        (folder / "trajectory" / name).write_bytes(png((1, 2, 3)))
    result = {
        "schema_version": "online-mind2web-v2",
        "task": "Do it.",
        "agent_final_answer": "Done.",
        "action_history": [
            {"action": "<a> -> CLICK", "thought": "go", "screenshot": "a.png"},
            {"action": "ANSWER: Done.", "thought": "end", "screenshot": "b.png"},
        ],
    }
    (folder / "result.json").write_text(json.dumps(result))
    inp = read_trajectory(folder)
    assert (inp.task_id, inp.answer, inp.actions, inp.thoughts) == (
        "t1",
        "Done.",
        ["<a> -> CLICK"],
        ["go"],
    )
    assert len(inp.screenshots) == 2 and inp.episode_id == "import/t1"


def test_broken_runs_are_user_errors(tmp_path) -> None:
    with pytest.raises(UserError, match="cannot read"):
        read_trajectory(tmp_path / "none")
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "result.json").write_text("{not json")
    with pytest.raises(UserError, match="not JSON"):
        read_trajectory(tmp_path / "x")
    (tmp_path / "x" / "result.json").write_text('{"task": 3}')
    with pytest.raises(UserError, match="`task` string"):
        read_trajectory(tmp_path / "x")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match=r"no <task_id>/result\.json"):
        read_run(tmp_path / "empty")


def test_actions_read_like_online_mind2web_histories() -> None:
    obs = '[4] textbox "Name" value="Ada"\n  [12] button "Submit"'
    assert describe_action(ActionRow("click", "12"), obs) == '[12] button "Submit" -> CLICK'
    assert describe_action(ActionRow("select", "9", "Red"), obs) == "[9] -> SELECT: Red"
    assert describe_action(ActionRow("click_xy", x=40, y=96.5)) == "(40, 96.5) -> CLICK"
    assert describe_action(ActionRow("goto", text="https://a.b/")) == "-> GOTO: https://a.b/"
    assert describe_action(ActionRow("go_back")) == "-> GO BACK"


# --------------------------------------------------------------------------- WebJudge


SCORES = [1, 2, 4, 3, 5]  # per screenshot of the example; >= 3 are kept


def scripted_webjudge(jpegs: list[bytes]):
    """Replies by call kind; screenshot replies score by which screenshot they show."""
    index = {base64.b64encode(j).decode(): i for i, j in enumerate(jpegs)}

    def reply(messages) -> str:
        system = messages[0]["content"]
        if system == webjudge.KEY_POINTS_SYSTEM:
            return "**Key Points**:\n\n1. Open the overview page\n2. Submission of releases"
        if system == webjudge.IMAGE_SYSTEM:
            i = index[messages[1]["content"][1]["image_url"]["url"].split(",", 1)[1]]
            return f"1. **Reasoning**: Screenshot {i} of the Discogs help.\n\n2. **Score**: {SCORES[i]}"
        assert system == webjudge.FINAL_SYSTEM
        return 'Thoughts: the overview page is open.\nStatus: "success"'

    return reply


@pytest.mark.parametrize("which", ["example_small", "example_full"])
def test_webjudge_on_the_example_run_makes_three_kinds_of_calls_and_stores_a_verdict(
    which, request, tmp_path, scripted
) -> None:
    inp = read_trajectory(request.getfixturevalue(which))
    jpegs = [webjudge.to_jpeg(s) for s in inp.screenshots]
    backend = scripted(scripted_webjudge(jpegs))
    client = JudgeClient(backend)
    outcome = asyncio.run(webjudge.judge(inp, client))
    assert outcome.success and outcome.parse_ok
    assert outcome.details == {
        "key_points": "\n1. Open the overview page\n2. Submission of releases",
        "scores": SCORES,
        "kept": 3,
    }
    calls = [(r.call, r.index) for r in client.rows]
    assert calls == [("key_points", 0)] + [("image_score", i) for i in range(5)] + [("final", 0)]
    final = backend.requests[-1]["messages"][1]["content"]
    text = final[0]["text"]
    assert text.startswith(f"User Task: {inp.task}\n\nKey Points: \n1. Open the overview page")
    assert '1. <div role="button"> -> CLICK\n2. <button> -> CLICK' in text
    assert inp.answer not in text  # the final answer is not in the history
    assert text.endswith(
        "their reasons:\n1. Screenshot 2 of the Discogs help.\n"
        "2. Screenshot 3 of the Discogs help.\n3. Screenshot 4 of the Discogs help."
    )
    kept = [p["image_url"]["url"].split(",", 1)[1] for p in final[1:]]
    assert kept == [base64.b64encode(jpegs[i]).decode() for i in (2, 3, 4)]
    assert all(r["max_tokens"] == 512 for r in backend.requests)

    # every call is stored with its episode: the judgments table, read back with SQL
    record = imported_record(
        inp, run="eval/om2w", suite="online_mind2web", policy="x", split="test"
    )
    record.judgments = client.take_rows()
    with ShardWriter(tmp_path / "eval" / "om2w") as writer:
        writer.write(record)
    con = connect({"eval/om2w": tmp_path / "eval" / "om2w"})
    rows = con.execute(
        "SELECT call, count(*), max(verdict), min(score), bool_and(parse_ok), sum(tokens_in) > 0 "
        "FROM judgments GROUP BY call ORDER BY call"
    ).fetchall()
    assert rows == [
        ("final", 1, "success", None, True, True),
        ("image_score", 5, None, 1.0, True, True),
        ("key_points", 1, None, None, True, True),
    ]
    assert con.execute("SELECT DISTINCT episode_id, stage FROM judgments").fetchall() == [
        ("import/fb7b4f784cfde003e2548fdf4e8d6b4f", "eval")
    ]


def test_webjudge_without_relevant_screenshots_judges_from_the_history(
    example_small, scripted
) -> None:
    inp = read_trajectory(example_small)

    def reply(messages) -> str:
        system = messages[0]["content"]
        if system == webjudge.KEY_POINTS_SYSTEM:
            return "no header here, 1. open the page"  # malformed: fallback parsing
        if system == webjudge.IMAGE_SYSTEM:
            return "I cannot see anything relevant."  # no score: 0, not kept
        return "The agent did it."  # no "Status:": asked again, then a judge failure

    backend = scripted(reply)
    client = JudgeClient(backend)
    outcome = asyncio.run(webjudge.judge(inp, client))
    assert (outcome.success, outcome.parse_ok) == (False, False)
    assert outcome.details["scores"] == [0] * 5 and outcome.details["kept"] == 0
    final = backend.requests[-1]["messages"][1]["content"]
    assert len(final) == 1 and "important snapshots" not in final[0]["text"]
    # key points usable (no retry); 5 screenshots and the verdict asked 3 times each
    assert len(backend.requests) == 1 + 6 * 3
    assert [r.parse_ok for r in client.rows] == [False] * (1 + 6 * 3)
    assert [r.call for r in client.rows if r.verdict] == ["final"]
    assert client.rows[-1].verdict == "judge_failed"
    # an unscored screenshot keeps the reference's score 0 after its retries
    assert [r.score for r in client.rows if r.call == "image_score"] == [None, None, 0] * 5


def test_webjudge_without_key_points_stops_as_a_judge_failure(example_small, scripted) -> None:
    backend = scripted(lambda messages: "")  # a reasoning model out of tokens, every time
    client = JudgeClient(backend)
    outcome = asyncio.run(webjudge.judge(read_trajectory(example_small), client))
    assert (outcome.success, outcome.parse_ok) == (False, False)
    assert len(backend.requests) == 3  # the key-point call, asked 3 times; nothing else
    assert [(r.call, r.verdict) for r in client.rows] == [
        ("key_points", None), ("key_points", None), ("key_points", "judge_failed"),
    ]  # fmt: skip
