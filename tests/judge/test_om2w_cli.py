"""`rmsweb export-om2w` and `rmsweb judge-om2w`: a stored run out in the Online-Mind2Web
layout (as the authors' example run lays it out), and another agent's run in that layout
judged into a run folder (episodes + judgments), against a scripted judge endpoint."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from rmsweb.cli import app
from rmsweb.store.reader import read_rows
from rmsweb.store.synthetic import make_episode
from rmsweb.store.writer import ShardWriter


def test_export_writes_a_run_in_the_example_layout(tmp_path, example_small) -> None:
    run = tmp_path / "runs" / "eval" / "x" / "p"
    with ShardWriter(run) as sink:
        sink.write(
            make_episode(run="eval/x/p", task="t1", seed=0, policy="p", success=True, n_steps=3)
        )
        sink.write(
            make_episode(run="eval/x/p", task="t2", seed=0, policy="p", success=False, n_steps=2)
        )
        sink.write(  # an environment error: a folder too (a failure, as rmsweb counts it)
            make_episode(run="eval/x/p", task="t3", seed=0, policy="p", success=False,
                         n_steps=0, env_error="browser crashed")
        )  # fmt: skip
    out = tmp_path / "om2w"
    result = CliRunner().invoke(app, ["export-om2w", str(run), str(out)])
    assert result.exit_code == 0, result.output
    assert "wrote 3 task folder(s)" in result.output
    assert "(1 ended in an environment error; 0 further attempt(s)" in result.output
    assert sorted(p.name for p in out.iterdir()) == ["t1", "t2", "t3"]
    theirs = json.loads((example_small / "result.json").read_text())
    for name, steps in (("t1", 3), ("t2", 2), ("t3", 0)):
        ours = json.loads((out / name / "result.json").read_text())
        assert list(ours)[: len(theirs)] == list(theirs)  # the example's keys, in its order
        assert all(type(ours[k]) is type(theirs[k]) for k in theirs)
        shots = sorted(p.name for p in (out / name / "trajectory").iterdir())
        assert shots == [f"{i}_full_screenshot.png" for i in range(steps)]
    assert json.loads((out / "t3" / "result.json").read_text())["rmsweb_error"] == (
        "browser crashed"
    )
    # not a run folder: a clear error, no traceback
    result = CliRunner().invoke(app, ["export-om2w", str(tmp_path / "om2w"), str(tmp_path / "o")])
    assert result.exit_code == 2 and "not a run folder" in result.output


def test_judge_om2w_judges_another_agents_run_into_a_run_folder(
    tmp_path, example_small, stub, reply_body
) -> None:
    stub.push(body=reply_body("The overview page is open. SUCCESS", 300, 20))
    out = tmp_path / "runs" / "import" / "other-agent"
    args = [
        "judge-om2w", str(example_small.parent), "--out", str(out),
        "--protocol", "webvoyager", "--base-url", stub.base_url, "--model", "judge",
        "--input-usd-per-mtok", "1", "--output-usd-per-mtok", "4",
        "--agent", "other-agent", "--cache", str(tmp_path / "cache"),
    ]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    (ep,) = read_rows(out, "episodes")
    assert (ep.task_id, ep.policy, ep.suite, ep.run) == (
        example_small.name, "other-agent", "online_mind2web", "import/other-agent",
    )  # fmt: skip
    assert ep.success and ep.category == "medium"  # the task's level in the bundled file
    assert ep.answer.startswith("The page with an overview") and ep.n_steps == 5
    (j,) = read_rows(out, "judgments")
    assert (j.episode_id, j.verdict, j.model) == (ep.episode_id, "success", "judge")
    assert j.cost_usd == (300 * 1 + 20 * 4) / 1e6
    request = stub.requests[0]["body"]
    assert sum(p["type"] == "image_url" for p in request["messages"][1]["content"]) == 5
    assert "medium" in result.output and "100.0%" in result.output
    # a rerun skips what is stored: no request
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0 and "judged 0 now, 1 already stored" in result.output
    assert len(stub.requests) == 1
    result = CliRunner().invoke(app, [*args[:-2], "--suite", "mind2web"])
    assert result.exit_code == 2 and "--suite must be one of" in result.output
