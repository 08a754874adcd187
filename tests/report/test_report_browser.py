"""The report and the viewer in headless Chromium: they load, render, and log no errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rmsweb.env.launch import LAUNCH_FLAGS, find_chromium
from rmsweb.report.build import write_report
from rmsweb.store.synthetic import make_episode, write_demo_runs
from rmsweb.store.writer import ShardWriter

pytestmark = pytest.mark.browser

ARGS = list(LAUNCH_FLAGS)
INJECTION = '</script><img src=x onerror="window.__pwned = 1"><script>window.__pwned = 2</script>'


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("browser")
    runs = write_demo_runs(root / "runs")
    # An episode whose page text tries to break out of the embedded data.
    rec = make_episode(
        run="eval/demo/sft", task="zz-hostile", seed=0, policy="sft", success=False, n_steps=1
    )
    rec.steps[0].obs_text = INJECTION
    with ShardWriter(runs["eval-sft"]) as sink:
        sink.write(rec)
    out = root / "report"
    write_report(
        out,
        runs,
        title="Browser check",
        viewer_max_episodes=50,
        side_by_side=[("eval-sft", "eval-rl")],
    )
    return out


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        executable = find_chromium(p.chromium.executable_path)
        b = p.chromium.launch(executable_path=executable, args=ARGS, headless=True)
        yield b
        b.close()


def open_page(browser, url: str):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: errors.append("dialog: " + d.message))
    page.goto(url)
    page.wait_for_load_state("load")
    return page, errors


def test_report_page(browser, report_dir: Path, tmp_path: Path) -> None:
    page, errors = open_page(browser, (report_dir / "report.html").as_uri())
    assert page.title() == "Browser check"
    headings = page.locator("h2").all_inner_texts()
    assert headings[:8] == [
        "Results",
        "Per-task success (test split)",
        "Arms over training seeds (test split)",
        "Collection: reflection retries",
        "Retry study: none / blind / reflect, with costs and the critic's grade",
        "SFT: training loss",
        "Failure-mode mining",
        "RL: rewards, gate and losses",
    ]
    widths = page.eval_on_selector_all("img", "imgs => imgs.map(i => i.complete && i.naturalWidth)")
    assert len(widths) == 6 and all(w > 100 for w in widths), widths
    assert page.locator("table").first.locator("tbody tr").count() == 4  # 4 policies
    page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    page.close()
    assert errors == []


def test_viewer_page(browser, report_dir: Path, tmp_path: Path) -> None:
    page, errors = open_page(browser, (report_dir / "viewer" / "eval-sft.html").as_uri())
    items = page.locator("#episode-list li")
    assert items.count() == 31  # 30 demo episodes + the hostile one (cap 50)
    # With no hash the first listed episode is shown.
    first_id = items.first.get_attribute("data-episode")
    assert page.locator("#episode h2").inner_text().endswith(first_id)

    # Open one episode: every step renders, with its screenshot, output and action.
    target = items.nth(3)
    episode_id = target.get_attribute("data-episode")
    target.click()
    page.wait_for_function(
        "id => document.querySelector('#episode h2').textContent.endsWith(id)", arg=episode_id
    )
    assert page.evaluate("decodeURIComponent(location.hash.slice(1))") == episode_id
    steps = page.locator("#steps section.step")
    n_steps = int(page.locator("dl.facts dt:text-is('steps') + dd").inner_text())
    assert steps.count() == n_steps > 0
    assert steps.first.locator("pre.obs").inner_text().startswith('RootWebArea "')
    assert steps.first.locator("pre.output").inner_text()
    shot = steps.first.locator(".shot img")
    assert shot.evaluate("i => i.complete && i.naturalWidth") == 160
    assert items.nth(3).get_attribute("class") == "active"
    assert "null" not in page.locator("#episode").inner_text()  # no absent part printed
    page.screenshot(path=str(tmp_path / "viewer.png"))

    # Filters: outcome, then task.
    page.select_option("#f-outcome", "failure")
    badges = page.locator("#episode-list li .badge").all_inner_texts()
    assert badges and set(badges) == {"failure"}
    page.select_option("#f-outcome", "")
    page.select_option("#f-task", "login-user")
    ids = page.locator("#episode-list li").evaluate_all("lis => lis.map(l => l.dataset.episode)")
    assert ids and all(i.startswith("login-user/") for i in ids)
    page.fill("#f-text", "no such thing")
    assert page.locator("#episode-list li").count() == 0

    # Hostile page text shows as text and runs nothing.
    page.goto((report_dir / "viewer" / "eval-sft.html").as_uri() + "#zz-hostile%2F0%2Fsft%2F0")
    page.wait_for_function(
        "() => document.querySelector('#episode h2').textContent.includes('zz-hostile')"
    )
    assert page.locator("#steps pre.obs").inner_text() == INJECTION
    assert page.evaluate("window.__pwned") is None
    page.close()
    assert errors == []


def test_collect_viewer_shows_reflections(browser, report_dir: Path) -> None:
    page, errors = open_page(browser, (report_dir / "viewer" / "collect.html").as_uri())
    retried = page.locator("#episode-list li[data-episode$='/1']").first
    retried.click()
    page.wait_for_selector("text=Reflections it was conditioned on")
    assert page.locator(".reflection").count() >= 1
    page.close()
    assert errors == []


def test_mine_viewer_jumps_to_the_critical_step(browser, report_dir: Path) -> None:
    url = (report_dir / "viewer" / "mine.html").as_uri()
    page, errors = open_page(browser, url)
    items = page.locator("#episode-list li")
    # Episodes with mined states are listed first, each marked with its states.
    marked = [items.nth(i).locator(".mark").count() > 0 for i in range(items.count())]
    assert marked[0] and marked == sorted(marked, reverse=True) and not all(marked)
    page.select_option("#f-mined", "critical")
    ids = page.locator("#episode-list li").evaluate_all("lis => lis.map(l => l.dataset.episode)")
    assert ids and len(ids) < items.count() + 1
    # Opening an episode scrolls to its critical step, which is marked.
    page.goto(f"{url}#{ids[0]}")
    page.reload()
    critical = page.locator("#steps section.mined-critical").first
    assert critical.locator(".mined-box").first.inner_text().startswith("critical state: ")
    box = critical.bounding_box()
    top = page.locator("#episode").bounding_box()
    step = int(critical.get_attribute("id").removeprefix("step-"))
    if step > 1:  # scrolled: the critical step sits at the top of the episode pane
        assert abs(box["y"] - top["y"]) < 5
    # `#<episode id>@<step>` opens that step instead.
    page.goto(f"{url}#{ids[0]}@1")  # step numbers count from 1, as in reflections
    page.reload()
    assert page.locator("#steps section.step").first.get_attribute("id") == "step-1"
    assert page.locator("#step-1 .step-no").inner_text() == "Step 1"
    first = page.locator("#step-1").bounding_box()
    assert abs(first["y"] - page.locator("#episode").bounding_box()["y"]) < 60
    page.close()
    assert errors == []


def test_per_task_cells_open_the_viewer_at_that_task(browser, report_dir: Path) -> None:
    page, errors = open_page(browser, (report_dir / "report.html").as_uri())
    link = page.locator("table a[href^='viewer/eval-sft.html#task=login-user']").first
    link.click()
    page.wait_for_url("**/viewer/eval-sft.html#task=login-user")
    page.wait_for_function("() => document.getElementById('f-task').value === 'login-user'")
    ids = page.locator("#episode-list li").evaluate_all("lis => lis.map(l => l.dataset.episode)")
    assert ids and all(i.startswith("login-user/") for i in ids)
    assert page.locator("#episode h2").inner_text().endswith(ids[0])
    assert "test split" in page.locator("header").inner_text()
    page.close()
    assert errors == []


def test_side_by_side_page_shows_both_episodes_of_a_unit(browser, report_dir: Path) -> None:
    page, errors = open_page(browser, (report_dir / "viewer" / "eval-sft-vs-eval-rl.html").as_uri())
    first = page.locator("#episode-list li").first
    unit = first.get_attribute("data-episode")  # "<task>/<seed>"
    panes = page.locator(".pair .episode-pane")
    assert panes.count() == 2
    heads = panes.locator("h3").first.inner_text(), panes.nth(1).locator("h3").first.inner_text()
    task, seed = unit.rsplit("/", 1)
    assert heads[0].endswith(f"{task}/{seed}/sft/0") and heads[1].endswith(f"{task}/{seed}/rl/0")
    # Units whose outcomes differ come first: the first entry's two badges disagree.
    badges = first.locator(".badge").all_inner_texts()
    assert badges[0].split(": ")[1] != badges[1].split(": ")[1]
    page.select_option("#f-outcome", "both")
    for li in page.locator("#episode-list li").all():
        assert li.locator(".badge").all_inner_texts() == ["A: success", "B: success"]
    assert page.locator("#a-step-1").count() == 1 and page.locator("#b-step-1").count() == 1
    page.close()
    assert errors == []
