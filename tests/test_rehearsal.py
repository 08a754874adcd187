"""The paper-8b rehearsal's parts (experiments/paper-8b-rehearsal.yaml, `make rehearsal`).

The whole rehearsal is `make rehearsal` (CI runs it); these tests hold its pieces:
- the committed task file is the one the site module generates;
- the site's oracle solves every task in a real browser, and the teacher's first
  attempts make the mistakes they are meant to (a control: they must fail);
- the scripted endpoint recognises each call by the real prompts rmsweb sends
  (WebJudge's three kinds, the first-error judge, the reflector, the policy), and its
  verdicts and first-error labels are the oracle's;
- the spec has paper-8b's shape.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path

import pytest

from rmsweb.agents.base import ActResult
from rmsweb.agents.prompt import PromptConfig, build_messages
from rmsweb.env.actions import parse_action
from rmsweb.env.server import StaticServer
from rmsweb.judge import webjudge
from rmsweb.judge.reflect import llm_reflector
from rmsweb.judge.types import Verdict
from rmsweb.mine.judge import FIRST_ERROR_PROMPT, parse_first_error, render_steps
from rmsweb.spec import load_experiment
from rmsweb.store.rows import MemorySink
from rmsweb.store.synthetic import make_episode
from rmsweb.suites import rehearsal_site as site

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "experiments" / "paper-8b-rehearsal.yaml"
_spec = importlib.util.spec_from_file_location("rehearsal", ROOT / "scripts" / "rehearsal.py")
rehearsal = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
sys.modules["rehearsal"] = rehearsal
_spec.loader.exec_module(rehearsal)  # type: ignore[union-attr]


def test_committed_task_file_is_the_generated_one() -> None:
    assert site.TASKS_FILE.read_text(encoding="utf-8") == site.tasks_jsonl()
    ids = [t.id for t in site.site_tasks()]
    assert len(ids) == len(set(ids)) == 14


def test_every_answer_is_on_its_page() -> None:
    pages = site.pages()
    for task in site.site_tasks():
        page = pages[site._slug(task.path[-1])]
        assert f"<h1>{task.heading}</h1>" in page and task.answer in page, task.id


def test_spec_has_paper_8b_shape() -> None:
    spec = load_experiment(SPEC)
    assert spec.suite.kind == "task_pool" and spec.suite.judge.protocol == "webjudge"
    assert spec.suite.tasks_file == "rmsweb/suites/data/rehearsal_site/pool-train.jsonl"
    # two other local pools, with different judges and step limits (issue 43)
    shopa, shopb = spec.eval.suites
    assert (shopa.name, shopb.name) == ("shopa", "shopb")
    assert shopa.suite.max_steps != shopb.suite.max_steps
    assert shopa.suite.judge.model != shopb.suite.judge.model
    assert (shopa.suite.judge.score_threshold, shopa.suite.judge.max_images) != (
        shopb.suite.judge.score_threshold,
        shopb.suite.judge.max_images,
    )
    for ev in (shopa, shopb):
        assert ev.split == "all" and ev.suite.private_origins == [site.ORIGIN]
    assert spec.suite.browser.screenshots and spec.suite.browser.set_of_marks
    assert spec.suite.private_origins == [site.ORIGIN]
    assert (spec.model.kind, spec.model.arch) == ("tiny", "qwen3_vl")
    assert spec.model.lora.enabled and spec.model.prompt.screenshot
    assert spec.collect.teacher.kind == "openai" and spec.collect.retry == "reflect"
    assert spec.mine.mode == "judge" and spec.rl.kind == "salvage_ds"
    port = f":{rehearsal.ENDPOINT_PORT}/"
    assert port in spec.collect.teacher.base_url and port in spec.suite.judge.base_url
    assert port in spec.mine.judge.base_url
    assert spec.rl.micro_batch_size < spec.rl.batch_size * spec.rl.group_size  # micro-batched


# --------------------------------------------------------------------------- the endpoint


def test_webjudge_calls_are_recognised_and_judged_by_the_path() -> None:
    task = site.site_tasks()[0]  # the Red Widget's price: Products -> Red Widget
    role, text = rehearsal.reply(webjudge.key_points_messages(task.question))
    assert role == "key_points" and webjudge.parse_key_points(text)[1]
    role, text = rehearsal.reply(webjudge.image_messages(task.question, "1. x", b"jpeg"))
    assert role == "image_score" and webjudge.parse_image_score(text)[0] == 4
    right = ['[4] link "Products" -> CLICK', '[8] link "Red Widget" -> CLICK']
    wrong = ['[4] link "Products" -> CLICK', '[9] link "Blue Widget" -> CLICK']
    for actions, success in ((right, True), (wrong, False)):
        role, text = rehearsal.reply(webjudge.final_messages(task.question, "1. x", actions, []))
        assert role == "verdict" and webjudge.parse_status(text) == (success, True)


HOME = '[1] heading "Rehearsal Shop"\n  [4] link "Products"\n  [5] link "About us"'
PRODUCTS = '[7] heading "Products"\n[8] link "Red Widget"\n[9] link "Blue Widget"'
BLUE = '[15] heading "Blue Widget"\n[16] text "Price: $12.50"\n[18] link "Products"'


def _episode(task: site.SiteTask, steps: list[tuple[str, str]]):
    rec = make_episode(
        run="mine/r", task=task.id, seed=0, policy="sft", success=False, n_steps=len(steps)
    )
    rec.episode.instruction = task.question
    for row, (page, action) in zip(rec.steps, steps, strict=True):
        row.env_error = None
        row.obs_text, row.output_text = page, f"Action: {action}"
        row.action = parse_action(action).to_row()
    return rec


def test_first_error_judge_names_the_oracles_step_and_action() -> None:
    task = site.site_tasks()[0]
    rec = _episode(task, [(HOME, "click(4)"), (PRODUCTS, "click(9)"), (BLUE, 'answer("$12.50")')])
    prompt = FIRST_ERROR_PROMPT.format(instruction=task.question, steps=render_steps(rec, 2000))
    role, text = rehearsal.reply([{"role": "user", "content": prompt}])
    verdict = parse_first_error(text, len(rec.steps))
    assert role == "first_error" and verdict.step == 1 and verdict.action.target == "8"
    # control: the gold path has no wrong step
    gold = _episode(task, [(HOME, "click(4)"), (PRODUCTS, "click(8)")])
    prompt = FIRST_ERROR_PROMPT.format(instruction=task.question, steps=render_steps(gold, 2000))
    assert (
        parse_first_error(rehearsal.reply([{"role": "user", "content": prompt}])[1], 2).step is None
    )


def test_reflection_names_the_wrong_step() -> None:
    task = site.site_tasks()[0]
    rec = _episode(task, [(HOME, "click(4)"), (PRODUCTS, "click(9)"), (BLUE, 'answer("$12.50")')])

    class Client:
        async def chat(self, messages):
            self.role, text = rehearsal.reply(messages)
            return text, {"prompt_tokens": 1, "completion_tokens": 1}

    client = Client()
    reflection = asyncio.run(llm_reflector(client, "t")(rec, Verdict(success=False), []))
    assert client.role == "reflection" and reflection.text.startswith("Step 2:")


def test_policy_prompts_get_the_teachers_action() -> None:
    task = site.site_tasks()[0]
    assert rehearsal.makes_mistake(task) is False  # the Red Widget: no planted mistake
    messages = build_messages(task.question, PRODUCTS, [], PromptConfig(), with_image=True)
    assert rehearsal.reply(messages) == ("teacher", "Action: click(8)")
    assert rehearsal.reply([{"role": "user", "content": "hello"}])[0] == "unknown"


# --------------------------------------------------------------------------- in a browser


class _Teacher:
    """The endpoint's teacher in-process; `lessons`: as if a reflection were in the prompt."""

    name = "teacher"

    def __init__(self, lessons: bool) -> None:
        self.lessons = lessons

    async def act(self, request) -> ActResult:
        task = site.task_by_question(request.instruction)
        action = rehearsal.teacher_action(task, request.observation.text, self.lessons)
        return ActResult(text=f"Action: {action}", latency_s=0.0)

    async def close(self) -> None:
        pass


def _play(lessons: bool, tmp_path: Path) -> tuple[dict[str, tuple[str | None, int]], dict]:
    from rmsweb.rollout.build import build_runner

    with StaticServer(site.render_site(tmp_path / "site")) as shop:  # a free port
        tasks = tmp_path / "tasks.jsonl"
        every = "".join(site.pool_jsonl(name, shop.origin) for name in site.POOLS)
        tasks.write_text(every, encoding="utf-8")  # the three pools: all 14 tasks
        spec = load_experiment(SPEC).suite.model_copy(
            update={"tasks_file": str(tasks), "private_origins": [shop.origin],
                    "test_fraction": 0.01}  # every task in train
        )  # fmt: skip

        async def go() -> list:
            runner = build_runner(spec, run="t", stage="collect", progress=False, contexts=1)
            sink = MemorySink()
            async with runner:
                ids = runner.suite.task_ids("train")
                await runner.run(_Teacher(lessons), ids, [0], sink, split="train")
            return sink.records

        records = asyncio.run(go())
    return {r.episode.task_id: (r.episode.answer, r.episode.n_steps) for r in records}, {
        # each step's (url, output, step error): says where a wrong step count came from
        r.episode.task_id: [(s.url, s.output_text, s.env_error) for s in r.steps]
        for r in records
    }


@pytest.mark.browser
@pytest.mark.slow  # 28 episodes with fresh browsers: minutes on a loaded 2-core machine
def test_oracle_solves_every_task_and_first_attempts_go_wrong(tmp_path: Path) -> None:
    taught, taught_steps = _play(lessons=True, tmp_path=tmp_path)
    first, first_steps = _play(lessons=False, tmp_path=tmp_path)
    tasks = {t.id: t for t in site.site_tasks() if t.id in taught}
    assert len(tasks) >= 12, taught
    for task_id, task in tasks.items():
        why = (task_id, {"taught": taught_steps[task_id], "first": first_steps[task_id]})
        assert taught[task_id] == (task.answer, len(task.path) + 1), why
        if rehearsal.makes_mistake(task):
            assert first[task_id][0] != task.answer, why  # the planted mistake
        else:
            assert first[task_id] == taught[task_id], why
    assert sum(first[t][0] != tasks[t].answer for t in tasks) >= 3


def test_sft_rows_with_a_system_prompt_and_a_screenshot_make_a_dataset() -> None:
    """Found by the rehearsal: paper-8b's prompt (a system message, then image + text
    parts) failed SFT's Dataset.from_list ("cannot mix list and non-list values")."""
    import io

    from datasets import Dataset
    from PIL import Image

    from rmsweb.train.sft.samples import Sample
    from rmsweb.train.sft.trainer import _row

    buf = io.BytesIO()
    Image.new("RGB", (32, 32), (200, 10, 10)).save(buf, format="PNG")
    messages = build_messages("Click ok.", '[2] button "ok"', [], PromptConfig(), with_image=True)
    assert isinstance(messages[0]["content"], str)  # the system prompt
    sample = Sample("t", 0, 0, messages, "Action: click(2)", "sha", buf.getvalue())
    assert len(Dataset.from_list([_row(sample, True)])) == 1
    with pytest.raises(Exception, match="cannot mix list and non-list"):  # control: as it was
        Dataset.from_list([{"prompt": messages}])


def _table_report(tmp_path: Path, judge_b: str) -> Path:
    """A report of the rehearsal's shape at tmp_path: its headline table from LiveCells."""
    import json
    import shutil

    from rmsweb.report.document import Document, to_markdown
    from rmsweb.report.headline import headline_section
    from rmsweb.report.live import LiveCell, comparable_with

    (tmp_path / "experiments").mkdir()
    for name in ("paper-8b.yaml", "paper-8b-rehearsal.yaml"):
        shutil.copy(ROOT / "experiments" / name, tmp_path / "experiments")
    cells = []
    for bench, judge in (("shopa", "rehearsal-judge"), ("shopb", judge_b)):
        for policy in ("sft", "rl"):
            cells.append(
                LiveCell(
                    f"eval/paper-8b-rehearsal/{bench}-{policy}/s0", "task_pool", "test", "*",
                    4, 1, 0, 1, 100, 10, 0.001, 3, 1000, 30, 0.002, 0,
                    f"webjudge / {judge}", policy,
                )
            )  # fmt: skip

    from types import SimpleNamespace

    rep = SimpleNamespace(metrics={})
    section = headline_section(rep, cells, comparable_with)
    md = tmp_path / rehearsal.REPORT_MD
    md.parent.mkdir(parents=True)
    md.write_text(to_markdown(Document("r", "", [section])), encoding="utf-8")
    metrics = tmp_path / rehearsal.REPORT_METRICS
    metrics.parent.mkdir(parents=True)
    metrics.write_text(json.dumps(rep.metrics), encoding="utf-8")
    return tmp_path


def test_table_check_passes_on_the_rehearsals_table(tmp_path: Path) -> None:
    root = _table_report(tmp_path, "rehearsal-judge-strict")
    assert rehearsal.check_table(root) == []


def test_table_check_fails_when_a_column_has_the_wrong_judge(tmp_path: Path) -> None:
    root = _table_report(tmp_path, "rehearsal-judge")
    assert rehearsal.check_table(root) == [
        "shopb's caveat does not name its judge webjudge / rehearsal-judge-strict"
    ]
    (root / rehearsal.REPORT_MD).unlink()
    assert "no report" in rehearsal.check_table(root)[0]


def test_rehearsal_runs_the_sharded_preflight_after_the_specs() -> None:
    script = rehearsal
    plain, sharded = script.preflight_command("python"), script.preflight_command("python", True)
    assert "-o" not in plain and plain[plain.index("--out") + 1] == script.PREFLIGHT_OUT
    assert sharded[sharded.index("-o") + 1] == "compute.sharding=fsdp"
    assert sharded[sharded.index("--out") + 1] == f"{script.PREFLIGHT_OUT}-fsdp"
    text = (ROOT / "scripts" / "rehearsal.py").read_text()
    assert text.index("for sharded in (False, True)") < text.index("cmd, cwd=ROOT")
