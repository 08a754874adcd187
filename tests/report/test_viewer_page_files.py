"""The viewer page's HTML, CSS and JavaScript are package data files, not Python strings.

rmsweb/report/viewer_page/ holds page.html (the template), viewer.css and viewer.js,
which an editor and a linter read as what they are; viewer.py keeps the data and the
writing: it fills the template's fields and inlines the two files, so a page stays one
self-contained file. The browser tests (test_report_browser.py) run the page itself.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from fnmatch import fnmatch
from importlib import resources
from pathlib import Path

import pytest

from rmsweb.report import viewer
from rmsweb.report.viewer import load_compare_data, load_viewer_data, render_viewer
from rmsweb.store.synthetic import write_eval_run, write_mine_run

ROOT = Path(__file__).resolve().parents[2]
FILES = ("page.html", "viewer.css", "viewer.js")


def test_the_module_holds_no_page_markup_styles_or_script() -> None:
    source = Path(viewer.__file__).read_text(encoding="utf-8")
    for sign in ("<!doctype", "<body>", "box-sizing", "addEventListener", "createElement"):
        assert sign not in source, f"{sign!r} is back in viewer.py: it belongs in viewer_page/"
    assert len(source.splitlines()) < 700


def test_the_files_are_package_data() -> None:
    folder = resources.files("rmsweb.report").joinpath("viewer_page")
    assert sorted(p.name for p in folder.iterdir() if p.is_file()) == sorted(FILES)
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["rmsweb.report"]
    for name in FILES:
        assert any(fnmatch(f"viewer_page/{name}", pattern) for pattern in declared), name


def _pages(tmp_path: Path) -> dict[str, str]:
    mine = load_viewer_data(write_mine_run(tmp_path / "runs", "x", states=6))
    a = write_eval_run(tmp_path / "runs", "y", "sft", 0.5, seeds=1)
    b = write_eval_run(tmp_path / "runs", "y", "rl", 0.7, seeds=1)
    return {
        "single": render_viewer(mine, "Trajectories: mine/x"),
        "compare": render_viewer(load_compare_data(a, b), "A vs B"),
    }


def test_every_field_is_filled_and_both_files_inlined(tmp_path: Path) -> None:
    page_html, css, js = (
        resources.files("rmsweb.report").joinpath("viewer_page", n).read_text() for n in FILES
    )
    assert "{{data}}" in page_html and '<script src="viewer.js"></script>' in page_html
    for mode, page in _pages(tmp_path).items():
        assert page.startswith("<!doctype html>"), mode
        outside = re.sub(r'type="application/json">.*?</script>', "", page, flags=re.S)
        assert "{{" not in outside and "}}" not in outside, mode
        assert f"<style>\n{css}</style>" in page and f"<script>\n{js}</script>" in page, mode
        assert 'href="viewer.css"' not in page and 'src="viewer.js"' not in page, mode
        assert page.count('<script id="viewer-data" type="application/json">') == 1
        # the mined-states filter is a single-run page's only
        assert ('id="f-mined"' in page) == (mode == "single"), mode
        assert "{{#single}}" not in page and "{{/single}}" not in page, mode


def test_text_filled_in_is_never_read_as_a_field(tmp_path: Path) -> None:
    data = load_viewer_data(write_eval_run(tmp_path / "runs", "z", "sft", 0.5, seeds=1))
    tricky = '{{js}} {{#single}} <link rel="stylesheet" href="viewer.css"> {{/single}}'
    data["episodes"][0]["instruction"] = tricky
    page = render_viewer(data, "{{data}}")
    assert "<title>{{data}}</title>" in page  # the title as written
    body = re.search(r'type="application/json">(.*?)</script>', page, re.S)[1]
    assert json.loads(body)["episodes"][0]["instruction"] == tricky
    assert page.count("<style>") == 1 and 'id="f-mined"' in page


@pytest.mark.slow
def test_a_built_wheel_ships_the_page_files(tmp_path: Path) -> None:
    """Build the wheel from a copy of the package (never in the working tree)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(
        ROOT / "rmsweb", src / "rmsweb", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path / "dist"), str(src)],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    (wheel,) = (tmp_path / "dist").glob("rmsweb-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in FILES:
        assert f"rmsweb/report/viewer_page/{name}" in names, name
