"""A small deterministic shop on 127.0.0.1: the live site of the paper-8b rehearsal.

experiments/paper-8b-rehearsal.yaml runs paper-8b's pipeline shape on CPU; its live
suite needs a site to browse that never changes and never leaves the machine. This is
it: a home page, a product list, six product pages, an about page and a contact page,
rendered from the tables below, and fourteen WebVoyager-shaped tasks on them ("Find the
price of the Red Widget."), each with its gold path (the link labels to click, in
order) and its answer.

- The pages are rendered from `PRODUCTS` and `FACTS`, so a task's answer and the page
  that shows it cannot drift apart (`render_site`).
- The task file (data/rehearsal_site/tasks.jsonl, the WebVoyager layout the suite's
  loader reads) names the site at the fixed origin `ORIGIN`; `write_tasks_file`
  regenerates it and tests/test_rehearsal.py holds the committed copy to it.
- `gold_action` is the site's oracle: the right next action on a page, from the
  observation text alone. The rehearsal's scripted endpoint (scripts/rehearsal.py)
  plays the teacher and the judges with it.

No browser imports here.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

from rmsweb.suites.live import DATA

HOST = "127.0.0.1"
PORT = 18631  # fixed: the task file and the spec's private_origins name it
ORIGIN = f"http://{HOST}:{PORT}"
SITE_NAME = "Rehearsal Shop"
TASKS_FILE = DATA / "rehearsal_site" / "tasks.jsonl"

# name, price, units in stock
PRODUCTS = (
    ("Red Widget", "$9.99", 12),
    ("Blue Widget", "$12.50", 3),
    ("Green Gadget", "$24.00", 0),
    ("Yellow Gizmo", "$7.25", 40),
    ("Silver Sprocket", "$3.10", 150),
    ("Purple Doohickey", "$18.75", 8),
)
# page label (the home page's link), heading, fact lines
FACTS = {
    "About us": (
        "About us",
        ("Opening hours: Monday to Friday 9:00-17:00", "Saturday: 10:00-14:00", "Founded: 1998"),
    ),
    "Contact": ("Contact", ("Phone: 555-0100", "Email: hello@shop.test")),
}


@dataclass(frozen=True)
class SiteTask:
    """One task: the question, the links to click from the home page, the answer."""

    id: str
    question: str
    path: tuple[str, ...]  # link labels, in order, from the home page
    answer: str

    @property
    def heading(self) -> str:
        """The heading of the page that shows the answer."""
        return FACTS[self.path[-1]][0] if self.path[-1] in FACTS else self.path[-1]


def site_tasks() -> list[SiteTask]:
    questions: list[tuple[str, tuple[str, ...], str]] = []
    for name, price, _ in PRODUCTS:
        questions.append((f"Find the price of the {name}.", ("Products", name), price))
    for name, _, units in PRODUCTS[:4]:
        questions.append(
            (f"How many units of the {name} are in stock?", ("Products", name), str(units))
        )
    questions += [
        ("When does the shop open on Saturday?", ("About us",), "10:00-14:00"),
        ("In which year was the shop founded?", ("About us",), "1998"),
        ("What is the shop's phone number?", ("Contact",), "555-0100"),
        ("What is the shop's email address?", ("Contact",), "hello@shop.test"),
    ]
    return [
        SiteTask(f"{SITE_NAME}--{i}", q, path, answer)
        for i, (q, path, answer) in enumerate(questions)
    ]


def task_by_question(question: str) -> SiteTask | None:
    return next((t for t in site_tasks() if t.question == question.strip()), None)


# --------------------------------------------------------------------------- pages


def _slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-") + ".html"


def _page(title: str, body: str) -> str:
    return (
        "<!doctype html>\n"
        f"<html><head><title>{html.escape(title)} - {SITE_NAME}</title>\n"
        "<style>body { font: 16px sans-serif; margin: 12px; } li { margin: 4px 0; }</style>\n"
        f"</head>\n<body>\n<h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n"
    )


def _link(label: str) -> str:
    return f'<a href="{_slug(label)}">{html.escape(label)}</a>'


def pages() -> dict[str, str]:
    """File name -> HTML of every page of the site."""
    home_links = " | ".join(_link(x) for x in ("Products", *FACTS))
    out = {
        "index.html": _page(
            SITE_NAME, f"<p>Widgets and gadgets, delivered.</p>\n<nav>{home_links}</nav>"
        ),
        "products.html": _page(
            "Products",
            "<ul>\n"
            + "\n".join(f"  <li>{_link(name)}</li>" for name, _, _ in PRODUCTS)
            + f"\n</ul>\n{_home()}",
        ),
    }
    for name, price, units in PRODUCTS:
        out[_slug(name)] = _page(
            name,
            f"<p>Price: {price}</p>\n<p>Stock: {units} units</p>\n{_link('Products')} {_home()}",
        )
    for label, (heading, lines) in FACTS.items():
        body = "\n".join(f"<p>{html.escape(line)}</p>" for line in lines)
        out[_slug(label)] = _page(heading, f"{body}\n{_home()}")
    return out


def _home() -> str:
    return '<a href="index.html">Home</a>'


def render_site(folder: Path) -> Path:
    """Write the site's pages into `folder` (created) and return it."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in pages().items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def tasks_jsonl(origin: str = ORIGIN) -> str:
    """The task file's text: WebVoyager's layout (web_name, id, ques, web)."""
    return "".join(
        json.dumps(
            {"web_name": SITE_NAME, "id": t.id, "ques": t.question, "web": f"{origin}/index.html"}
        )
        + "\n"
        for t in site_tasks()
    )


def write_tasks_file(path: Path = TASKS_FILE, origin: str = ORIGIN) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tasks_jsonl(origin), encoding="utf-8")
    return path


# The rehearsal's training pool and its two evaluation suites: disjoint task pools on
# the site (task-pool layout, rmsweb/suites/task_pool.py), by index into site_tasks():
# the pool trains on prices, stock and shop facts; "shopa" asks prices and stock of
# other products, "shopb" other shop facts.
POOLS: dict[str, tuple[int, ...]] = {
    "train": (0, 1, 2, 3, 6, 7, 10, 11),
    "shopa": (4, 5, 8, 9),
    "shopb": (12, 13),
}


def pool_file(name: str) -> Path:
    return TASKS_FILE.parent / f"pool-{name}.jsonl"


def pool_jsonl(name: str, origin: str = ORIGIN) -> str:
    """A pool's task file: start_url, goal, reference_answer, and the site's task id."""
    tasks = site_tasks()
    return "".join(
        json.dumps(
            {
                "id": tasks[i].id,
                "start_url": f"{origin}/index.html",
                "goal": tasks[i].question,
                "reference_answer": tasks[i].answer,
                "site": SITE_NAME,
            }
        )
        + "\n"
        for i in POOLS[name]
    )


def write_pool_files(origin: str = ORIGIN) -> list[Path]:
    out = []
    for name in POOLS:
        path = pool_file(name)
        path.write_text(pool_jsonl(name, origin), encoding="utf-8")
        out.append(path)
    return out


# --------------------------------------------------------------------------- oracle

_LINE = re.compile(r'^\s*\[(\w+)\]\s+(\w+)\s+"([^"]*)"', re.M)


def elements(obs_text: str) -> list[tuple[str, str, str]]:
    """(id, role, name) of each `[id] role "name"` line of an observation."""
    return _LINE.findall(obs_text)


def gold_action(task: SiteTask, obs_text: str) -> str:
    """The right next action on the page `obs_text` shows: answer on the answer's page,
    else click the deepest link of the gold path the page offers, else go home."""
    els = elements(obs_text)
    if any(role == "heading" and name == task.heading for _, role, name in els):
        return f'answer("{task.answer}")'
    for label in reversed(task.path):
        for el_id, role, name in els:
            if role == "link" and name == label:
                return f"click({el_id})"
    for el_id, role, name in els:
        if role == "link" and name == "Home":
            return f"click({el_id})"
    return "stop()"


def wrong_link(task: SiteTask, obs_text: str) -> str | None:
    """A plausible mistake on the product list: the product listed after the task's one."""
    names = [name for name, _, _ in PRODUCTS]
    if task.path[0] != "Products" or task.path[-1] not in names:
        return None
    wrong = names[(names.index(task.path[-1]) + 1) % len(names)]
    for el_id, role, name in elements(obs_text):
        if role == "link" and name == wrong:
            return f"click({el_id})"
    return None


def fact_on_page(obs_text: str) -> str | None:
    """The value the page shows first (a price, a stock count, a fact line's value)."""
    m = re.search(
        r'(?:Price|Stock|Saturday|Founded|Phone|Email):\s*([^"\n]+?)(?: units)?"', obs_text
    )
    return m.group(1).strip() if m else None
