"""A static, self-contained HTML trajectory viewer for one run folder, or two side by side.

    rmsweb view runs/eval/miniwob-cpu/sft/s0      # -> ./eval-miniwob-cpu-sft-s0-test-viewer.html
    rmsweb view runs/eval/miniwob-cpu/sft/s0 --split val --max-episodes 50
    rmsweb view runs/eval/miniwob-cpu/sft/s0 --compare runs/eval/miniwob-cpu/rl/s0

One split per page: by default the report's (test where the run has it), named in the
page's header with the episodes of the other splits. Left: the episode list, filterable
by task, outcome, mined states and text. Right: one episode step by step (screenshot,
observation, model output, parsed action, parse/env errors, the labeller's acceptable
actions where a mining run stored them), its reflections and its outcome.

Steps are numbered from 1 everywhere on the page, as reflections name them ("Step 2" is
the second action); the tables store 0-based indices (`steps.step`, `mined_states.step`,
`reflections.named_steps`), so Step k is row k - 1.

Links: `#<episode id>` opens an episode, `#<episode id>@<k>` also scrolls to its Step k,
`#task=<task id>` lists one task's episodes (the report's per-task cells link so). In a
mine run the steps mined as critical or fragile states are marked (failure mode,
reference and policy action), an episode opens at its critical step, and episodes with
mined states come first. With `--compare`, each list entry is a (task, seed) unit that
both runs played, units whose outcomes differ first, and the two episodes show side by
side (`#<task id>/<seed>` opens one).

The data is embedded as JSON and rendered with textContent only, so page text from the
web can never inject markup. Page size is bounded: at most `max_episodes` episodes
(spread over tasks), and screenshots only up to `max_screenshot_mb` (later ones are
marked omitted).
"""

from __future__ import annotations

import base64
import functools
import html
import json
import math
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from rmsweb.errors import UserError
from rmsweb.report.tables import REPORT_SPLITS
from rmsweb.store.layout import part_files, run_name


def format_action(action: dict[str, Any] | None) -> str | None:
    """An action struct back in the action syntax, for display (`fill(3, "bob")`)."""
    if action is None:
        return None
    kind = action["type"]
    if kind == "click_xy":
        return f"click_xy({action['x']:g}, {action['y']:g})"
    args = []
    if action.get("target") is not None:
        args.append(str(action["target"]))
    if action.get("text") is not None:
        args.append(json.dumps(action["text"], ensure_ascii=False))
    return f"{kind}({', '.join(args)})"


# The split a viewer shows by default: the report's (test where the run has it).
SPLIT_ORDER = REPORT_SPLITS
ALL_SPLITS = "all"


# Spread the shown episodes over tasks: the k-th episode of every task before any
# task's (k+1)-th, so a capped page still shows every task. Episodes with mined
# (critical or fragile) states come before the others: they are what a mine run's
# viewer is for.
EPISODES_SQL = """
WITH mined AS (
    SELECT DISTINCT episode_id FROM mined_states WHERE source IN ('critical', 'fragile')
), flagged AS (
    SELECT *, episode_id IN (SELECT episode_id FROM mined) AS has_mined FROM episodes
    WHERE $split IS NULL OR split = $split
), ranked AS (
    SELECT *, row_number() OVER (
        PARTITION BY task_id, has_mined ORDER BY seed, policy, attempt, episode_id) AS task_rank
    FROM flagged
)
SELECT episode_id, task_id, seed, policy, attempt, success, reward, n_steps, answer, error,
       instruction, wall_s, tokens_in, tokens_out, env_retries, suite, split
FROM ranked
ORDER BY has_mined DESC, task_rank, task_id
LIMIT $cap
"""


def _fetch(con: Any, sql: str, params: list[Any] | dict[str, Any] | None = None) -> list[dict]:
    cur = con.execute(sql, params or [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


# --------------------------------------------------------------------------- the run


def resolve_run_dir(path: Path) -> Path:
    """The run folder to show: `path` itself, or the one run below it (`sft` -> `sft/s0`).

    Several runs below it: an error naming them, so the user picks one."""
    from rmsweb.store.layout import find_runs

    path = Path(path)
    if not path.is_dir():
        raise UserError(f"no such run folder: {path}")
    if part_files(path, "episodes"):
        return path
    below = sorted(p for p in find_runs(path).values() if part_files(p, "episodes"))
    if len(below) == 1:
        return below[0]
    if below:
        names = ", ".join(p.relative_to(path.parent).as_posix() for p in below)
        raise UserError(
            f"{path} has no episodes table; the runs below it are {names}. "
            f"Give one of them, e.g. `rmsweb view {below[0]}`."
        )
    raise UserError(
        f"{path} has no episodes table (expected {path}/episodes/part-*.parquet) and no run "
        "below it; run folders are runs/<stage>/<experiment>/... (e.g. runs/eval/miniwob-cpu/"
        "sft/s0)."
    )


def split_counts(con: Any) -> dict[str, int]:
    """Episodes per split in the run, in the order the viewer prefers them."""
    counts = dict(con.execute("SELECT split, count(*) FROM episodes GROUP BY split").fetchall())
    rank = {s: i for i, s in enumerate(SPLIT_ORDER)}
    return dict(sorted(counts.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))


def choose_split(counts: dict[str, int], split: str | None) -> str | None:
    """`split`, checked; None (the default): the report's split, test where the run has it.
    Returns None for every split (`all`)."""
    if split == ALL_SPLITS:
        return None
    if split is None:
        return next(iter(counts), None)
    if split not in counts:
        have = ", ".join(f"{s} ({n})" for s, n in counts.items()) or "none"
        raise UserError(f"--split {split}: the run has no {split} episodes (has: {have}).")
    return split


# --------------------------------------------------------------------------- episodes


def _step_entry(s: dict[str, Any], lab: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "step": s["step"],  # 0-based, as stored; the page shows step + 1 ("Step 1" first)
        "url": s["url"],
        "obs": s["obs_text"],
        "sha": s["screenshot"],
        "output": s["output_text"],
        "action": format_action(s["action"]),
        "parse_ok": s["parse_ok"],
        "parse_error": s["parse_error"],
        "env_error": s["env_error"],
        "reward": s["reward"],
        "done": s["done"],
        "latency_s": s["latency_s"],
        "acceptable": lab["acceptable"] if lab else None,
        "label_source": lab["source"] if lab else None,
        "samples": lab["samples"] if lab else [],
    }


def episode_details(con: Any, episodes: list[dict[str, Any]]) -> tuple[list[dict], dict]:
    """The episodes with their steps, labels, mined states and reflections, and the
    screenshots their steps name (sha256 -> PNG bytes)."""
    ids = [e["episode_id"] for e in episodes]
    steps = _fetch(
        con,
        "SELECT * FROM steps WHERE list_contains(?, episode_id) ORDER BY episode_id, step",
        [ids],
    )
    labels = _fetch(
        con,
        """SELECT episode_id, step, source, acceptable, samples FROM step_labels
           WHERE list_contains(?, episode_id)""",
        [ids],
    )
    mined = _fetch(
        con,
        """SELECT episode_id, step, source, failure_mode, weight, reference_actions,
                  policy_action, sampled_actions
           FROM mined_states
           WHERE source IN ('critical', 'fragile') AND list_contains(?, episode_id)
           ORDER BY step""",
        [ids],
    )
    units = sorted({f"{e['task_id']}/{e['seed']}/{e['policy']}" for e in episodes})
    reflections = _fetch(
        con,
        """SELECT r.episode_id, r.attempt, r.text, r.source, e.task_id, e.seed, e.policy
           FROM reflections r JOIN episodes e USING (run, episode_id)
           WHERE list_contains(?, concat_ws('/', e.task_id, e.seed, e.policy))
           ORDER BY r.attempt""",
        [units],
    )
    wanted = list(dict.fromkeys(s["screenshot"] for s in steps if s["screenshot"]))
    pngs = dict(
        con.execute(
            "SELECT sha256, png FROM screenshots WHERE list_contains(?, sha256)", [wanted]
        ).fetchall()
    )

    label_of = {(lab["episode_id"], lab["step"]): lab for lab in labels}
    by_episode: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in steps:
        by_episode[s["episode_id"]].append(
            _step_entry(s, label_of.get((s["episode_id"], s["step"])))
        )
    mined_of: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for m in mined:
        mined_of[m["episode_id"]].append({k: v for k, v in m.items() if k != "episode_id"})

    def texts(rows: list[dict]) -> list[dict]:
        return [{"attempt": r["attempt"], "text": r["text"], "source": r["source"]} for r in rows]

    out = []
    for e in episodes:
        unit = (e["task_id"], e["seed"], e["policy"])
        mine = [r for r in reflections if (r["task_id"], r["seed"], r["policy"]) == unit]
        out.append(
            {
                **e,
                "steps": by_episode.get(e["episode_id"], []),
                "reflections": texts([r for r in mine if r["episode_id"] == e["episode_id"]]),
                "prior": texts([r for r in mine if r["attempt"] < e["attempt"]]),
                "mined": mined_of.get(e["episode_id"], []),
            }
        )
    return out, pngs


def embed_screenshots(
    episodes: list[dict[str, Any]], pngs: dict[str, bytes], max_mb: float
) -> tuple[dict[str, str], int]:
    """Base64 screenshots in display order within the page budget, so the first episodes
    keep theirs; each step gets `shot` (a key of the result) or a `shot_note`. Returns
    (sha256 -> base64, how many were omitted)."""
    budget = max_mb * 2**20
    shots: dict[str, str] = {}
    omitted = 0
    for ep in episodes:
        for s in ep["steps"]:
            sha = s.pop("sha")
            if sha and sha in pngs and sha not in shots:
                data = base64.b64encode(pngs[sha]).decode("ascii")
                if budget - len(data) >= 0:
                    budget -= len(data)
                    shots[sha] = data
                else:
                    omitted += 1
            s["shot"] = sha if sha in shots else None
            s["shot_note"] = (
                None
                if not sha or sha in shots
                else ("omitted (page size limit)" if sha in pngs else "missing")
            )
    return shots, omitted


def load_viewer_data(
    run_dir: Path,
    *,
    split: str | None = None,
    max_episodes: int = 200,
    max_screenshot_mb: float = 48.0,
) -> dict[str, Any]:
    """Everything the page of one run shows, as JSON-ready data.

    `split`: the episodes' split (None: the report's, test where the run has it; "all")."""
    from rmsweb.store.views import connect

    run_dir = resolve_run_dir(run_dir)
    run = run_name(run_dir)
    con = connect({run: run_dir})
    try:
        counts = split_counts(con)
        shown_split = choose_split(counts, split)
        total, ok = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE success) FROM episodes "
            "WHERE $split IS NULL OR split = $split",
            {"split": shown_split},
        ).fetchone()
        episodes = _fetch(con, EPISODES_SQL, {"split": shown_split, "cap": max_episodes})
        episodes.sort(key=lambda e: (e["task_id"], e["seed"], e["policy"], e["attempt"]))
        episodes, pngs = episode_details(con, episodes)
    finally:
        con.close()
    episodes.sort(key=lambda e: not e["mined"])  # stable: mined episodes first, else by task
    shots, omitted = embed_screenshots(episodes, pngs, max_screenshot_mb)
    return {
        "mode": "single",
        "run": run,
        "split": shown_split or ALL_SPLITS,
        "splits": counts,
        "total": total,
        "successes": ok,
        "shown": len(episodes),
        "cap": max_episodes,
        "shots_omitted": omitted,
        "episodes": episodes,
        "shots": shots,
    }


# --------------------------------------------------------------------------- two runs


UNITS_SQL = """
SELECT task_id, seed, episode_id, success, error, attempt
FROM episodes WHERE split = $split
QUALIFY row_number() OVER (PARTITION BY task_id, seed ORDER BY attempt DESC) = 1
"""


def _solved(r: dict[str, Any]) -> bool:
    return bool(r["success"]) and r["error"] is None


def pair_units(
    a: list[dict[str, Any]], b: list[dict[str, Any]], cap: int
) -> tuple[list[tuple[dict, dict]], int, int]:
    """The (task, seed) units both runs played, as (a's episode, b's episode): units
    whose outcomes differ first, each group spread over tasks (seed order within a
    task), at most `cap`. Also returns how many units the runs share and in how many
    of them the outcomes differ."""
    b_of = {(r["task_id"], r["seed"]): r for r in b}
    both = [(r, b_of[(r["task_id"], r["seed"])]) for r in a if (r["task_id"], r["seed"]) in b_of]
    rank: dict[tuple[bool, str], int] = defaultdict(int)
    keyed = []
    for x, y in sorted(both, key=lambda p: (p[0]["task_id"], p[0]["seed"])):
        same = _solved(x) == _solved(y)
        rank[(same, x["task_id"])] += 1
        keyed.append(((same, rank[(same, x["task_id"])], x["task_id"]), (x, y)))
    keyed.sort(key=lambda kv: kv[0])
    differ = sum(_solved(x) != _solved(y) for x, y in both)
    return [pair for _, pair in keyed[:cap]], len(both), differ


def _episodes_by_id(con: Any, ids: list[str]) -> list[dict[str, Any]]:
    rows = _fetch(
        con,
        """SELECT episode_id, task_id, seed, policy, attempt, success, reward, n_steps, answer,
                  error, instruction, wall_s, tokens_in, tokens_out, env_retries, suite, split
           FROM episodes WHERE list_contains(?, episode_id)""",
        [ids],
    )
    by_id = {r["episode_id"]: r for r in rows}
    return [by_id[i] for i in ids]


def load_compare_data(
    run_a: Path,
    run_b: Path,
    *,
    split: str | None = None,
    max_units: int = 100,
    max_screenshot_mb: float = 48.0,
) -> dict[str, Any]:
    """Two runs side by side on the same (task, seed) units of one split (default: the
    report's), e.g. SFT and RL of one training seed."""
    from rmsweb.store.views import connect

    dirs = [resolve_run_dir(run_a), resolve_run_dir(run_b)]
    names = [run_name(d) for d in dirs]
    if names[0] == names[1]:
        raise UserError(f"--compare: both runs are {names[0]}; give two different runs.")
    cons = [connect({n: d}) for n, d in zip(names, dirs, strict=True)]
    try:
        counts = [split_counts(c) for c in cons]
        common = {s: min(counts[0][s], counts[1][s]) for s in counts[0] if s in counts[1]}
        shown_split = choose_split(common, split)
        if shown_split is None:
            raise UserError(
                f"{names[0]} and {names[1]} share no split"
                if split != ALL_SPLITS
                else "--split all: a comparison shows one split; give test, val, ..."
            )
        units = [_fetch(c, UNITS_SQL, {"split": shown_split}) for c in cons]
        pairs, shared, differ = pair_units(units[0], units[1], max_units)
        sides = []
        pngs: dict[str, bytes] = {}
        for i, con in enumerate(cons):
            eps, shots = episode_details(
                con, _episodes_by_id(con, [p[i]["episode_id"] for p in pairs])
            )
            sides.append(eps)
            pngs.update(shots)
    finally:
        for con in cons:
            con.close()
    merged = [ep for pair in zip(*sides, strict=True) for ep in pair]  # display order
    shots, omitted = embed_screenshots(merged, pngs, max_screenshot_mb)
    a_keys, b_keys = ({(r["task_id"], r["seed"]) for r in u} for u in units)
    both = a_keys & b_keys
    solved = [sum(_solved(r) for r in u if (r["task_id"], r["seed"]) in both) for u in units]
    return {
        "mode": "compare",
        "runs": names,
        "split": shown_split,
        "splits": common,
        "total": shared,
        "successes": solved,
        "differ": differ,
        "shown": len(pairs),
        "cap": max_units,
        "shots_omitted": omitted,
        "units": [
            {"task_id": a["task_id"], "seed": a["seed"], "a": a, "b": b}
            for a, b in zip(*sides, strict=True)
        ],
        "shots": shots,
    }


def _finite(value: Any) -> Any:
    # JSON.parse rejects NaN and Infinity: show them as null.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _embed(data: dict[str, Any]) -> str:
    # Inside <script>, "</script>" or "<!--" in page text would end the block:
    # escape every "<" (valid JSON: the JSON parser turns it back).
    text = json.dumps(_finite(data), ensure_ascii=False, allow_nan=False, default=str)
    return text.replace("<", "\\u003c")


# The page's HTML, styles and script are package data (rmsweb/report/viewer_page/:
# page.html, viewer.css, viewer.js), so an editor and a linter read them as what they
# are. render_viewer inlines the styles and the script into the HTML (a page is one
# self-contained file) and fills the HTML's {{name}} fields; {{#single}}...{{/single}}
# is what only a single-run page has (the mined-states filter).
PAGE_FILES = ("page.html", "viewer.css", "viewer.js")
_FIELD = re.compile(
    r'<link rel="stylesheet" href="viewer\.css">|<script src="viewer\.js"></script>'
    r"|\{\{(\w+)\}\}"
)
_SINGLE_ONLY = re.compile(r"\{\{#single\}\}(.*?)\{\{/single\}\}", re.S)


@functools.cache
def page_files() -> tuple[str, str, str]:
    """The page's HTML template, styles and script, as shipped with the package."""
    from importlib import resources

    folder = resources.files("rmsweb.report").joinpath("viewer_page")
    page, css, js = (folder.joinpath(name).read_text(encoding="utf-8") for name in PAGE_FILES)
    # Inlined, "</style" or "</script" would end the block early.
    if "</style" in css.lower() or "</script" in js.lower():
        raise RuntimeError("viewer.css or viewer.js closes its own inline block")
    return page, css, js


def _meta(data: dict[str, Any]) -> str:
    split, cap = data["split"], data["cap"]
    omitted = (
        f"; {data['shots_omitted']} screenshots omitted (page size limit)"
        if data["shots_omitted"]
        else ""
    )
    if data["mode"] == "compare":
        a, b = data["successes"]
        return (
            f"{split} split: {data['total']} (task, seed) units played by both, outcomes "
            f"differ on {data['differ']}; A solved {a}, B solved {b}. Showing {data['shown']} "
            f"(at most {cap}), units with different outcomes first{omitted}."
        )
    others = [f"{s} ({n} episodes; --split {s})" for s, n in data["splits"].items() if s != split]
    where = f"{split} split" if split != ALL_SPLITS else "all splits"
    return (
        f"{where}: {data['total']} episodes, {data['successes']} successful; showing "
        f"{data['shown']} (at most {cap}){omitted}."
        + (f" Also in this run: {', '.join(others)}." if others and split != ALL_SPLITS else "")
        + " Steps count from 1, as reflections do (Step 1 is the first action)."
    )


def _outcome_options(compare: bool) -> str:
    if compare:
        pairs = [
            ("", "all units"),
            ("differ", "outcomes differ"),
            ("a-only", "only A solved"),
            ("b-only", "only B solved"),
            ("both", "both solved"),
            ("neither", "neither solved"),
        ]
    else:
        pairs = [
            ("", "all outcomes"),
            ("success", "success"),
            ("failure", "failure"),
            ("error", "env error"),
        ]
    return "".join(f'<option value="{v}">{html.escape(t)}</option>' for v, t in pairs)


def render_viewer(data: dict[str, Any], title: str) -> str:
    """The page: the template with its fields filled, the styles and script inlined."""
    page, css, js = page_files()
    compare = data.get("mode") == "compare"
    page = _SINGLE_ONLY.sub("" if compare else r"\1", page)
    values = {
        "title": html.escape(title),
        "split": html.escape(data["split"]),
        "meta": html.escape(_meta(data)),
        "outcome_options": _outcome_options(compare),
        "data": _embed(data),
    }

    def fill(m: re.Match[str]) -> str:
        if m.group(1) is not None:
            return values[m.group(1)]
        if m.group(0).startswith("<link"):
            return f"<style>\n{css}</style>"
        return f"<script>\n{js}</script>"

    # one pass: text filled in (page data, the script) is never read for fields again
    return _FIELD.sub(fill, page)


def page_name(data: dict[str, Any]) -> str:
    """The default file name: the run(s) and the split, so pages of different runs (sft/s0
    and rl/s0) or splits never overwrite each other."""
    runs = data["runs"] if data["mode"] == "compare" else [data["run"]]
    return "-vs-".join(r.replace("/", "-") for r in runs) + f"-{data['split']}-viewer.html"


def _write_page(page: str, out: Path) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out)
    return out


def write_viewer(
    run_dir: Path,
    out: Path | None,
    *,
    split: str | None = None,
    max_episodes: int = 200,
    max_screenshot_mb: float = 48.0,
    title: str | None = None,
) -> Path:
    """Write the viewer page of one run to `out` (None: ./<page_name>)."""
    data = load_viewer_data(
        Path(run_dir), split=split, max_episodes=max_episodes, max_screenshot_mb=max_screenshot_mb
    )
    page = render_viewer(data, title or f"Trajectories: {data['run']}")
    return _write_page(page, out or Path(page_name(data)))


def write_compare(
    run_a: Path,
    run_b: Path,
    out: Path | None,
    *,
    split: str | None = None,
    max_units: int = 100,
    max_screenshot_mb: float = 48.0,
    title: str | None = None,
) -> Path:
    """Write the side-by-side page of two runs to `out` (None: ./<page_name>)."""
    data = load_compare_data(
        run_a, run_b, split=split, max_units=max_units, max_screenshot_mb=max_screenshot_mb
    )
    a, b = data["runs"]
    return _write_page(
        render_viewer(data, title or f"A {a} vs B {b}"), out or Path(page_name(data))
    )


def main(
    run_dir: Path,
    out: Path | None = None,
    *,
    split: str | None = None,
    max_episodes: int = 200,
    compare: Path | None = None,
) -> None:
    """The `rmsweb view` command."""
    if max_episodes < 1:
        raise UserError(f"--max-episodes {max_episodes}: show at least 1.")
    # Not inside RUN_DIR by default: run folders are DVC outputs and must stay unchanged.
    if compare is not None:
        path = write_compare(run_dir, compare, out, split=split, max_units=max_episodes)
    else:
        path = write_viewer(run_dir, out, split=split, max_episodes=max_episodes)
    print(f"wrote {path}", file=sys.stdout)
