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
import html
import json
import math
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


CSS = """
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d1f23; }
header { padding: 0.6rem 1rem; border-bottom: 1px solid #d9dce3; background: #f6f7fa; }
header h1 { font-size: 1.1rem; margin: 0; } header .meta { color: #5a6070; font-size: 0.9em; }
#app { display: flex; height: calc(100vh - 58px); }
#sidebar { width: 340px; min-width: 260px; border-right: 1px solid #d9dce3; display: flex;
           flex-direction: column; }
.filters { padding: 0.5rem; display: grid; gap: 0.35rem; border-bottom: 1px solid #e6e8ee; }
.filters select, .filters input { width: 100%; padding: 0.25rem; font: inherit; }
#count { color: #5a6070; font-size: 0.85em; }
#episode-list { list-style: none; margin: 0; padding: 0; overflow-y: auto; flex: 1; }
#episode-list li { padding: 0.35rem 0.6rem; border-bottom: 1px solid #f0f1f4; cursor: pointer; }
#episode-list li:hover { background: #eef3ff; } #episode-list li.active { background: #dbe6ff; }
#episode-list .id { font-family: ui-monospace, monospace; font-size: 0.85em; }
.badge { display: inline-block; padding: 0 0.4rem; border-radius: 0.6rem; font-size: 0.8em;
         margin-right: 0.3rem; color: white; }
.ok { background: #2e8b57; } .fail { background: #c0392b; } .err { background: #8e44ad; }
#episode { flex: 1; overflow-y: auto; padding: 0.8rem 1.2rem 3rem; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 0.15rem 0.8rem; }
dl.facts dt { color: #5a6070; } dl.facts dd { margin: 0; }
.step { border: 1px solid #d9dce3; border-radius: 6px; margin: 0.8rem 0; padding: 0.6rem;
        display: flex; gap: 0.8rem; }
.step .shot img { max-width: 320px; border: 1px solid #ccc; image-rendering: pixelated; }
.step .body { flex: 1; min-width: 0; }
pre { background: #f6f7fa; padding: 0.4rem; white-space: pre-wrap; word-break: break-word;
      margin: 0.2rem 0 0.5rem; max-height: 22rem; overflow: auto; }
.label { color: #5a6070; font-size: 0.85em; text-transform: uppercase; letter-spacing: 0.03em; }
.action { font-family: ui-monospace, monospace; font-weight: 600; }
.error { color: #b03a2e; } .note { color: #5a6070; font-style: italic; }
.step.mined-critical { border: 2px solid #c0392b; background: #fff6f5; }
.step.mined-fragile { border: 2px solid #e67e22; background: #fffaf2; }
.mined-box { border-left: 3px solid #c0392b; padding: 0.2rem 0.6rem; margin: 0.3rem 0;
             background: #fdecea; }
.fragile { background: #e67e22; } .critical { background: #c0392b; }
.reflection { border-left: 3px solid #e0a800; padding: 0.2rem 0.6rem; margin: 0.4rem 0;
              background: #fffbea; }
.split-tag { margin-left: 0.6rem; padding: 0.05rem 0.5rem; border-radius: 0.6rem;
             background: #34495e; color: white; font-size: 0.75em; vertical-align: middle; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 1rem; }
.pair .episode-pane { min-width: 0; }
.pair .step { flex-direction: column; } .pair .step .shot img { max-width: 100%; }
"""

JS = r"""
(function () {
  const data = JSON.parse(document.getElementById("viewer-data").textContent);
  const compare = data.mode === "compare";
  const items = compare ? data.units : data.episodes;
  const list = document.getElementById("episode-list");
  const view = document.getElementById("episode");
  const fTask = document.getElementById("f-task");
  const fOutcome = document.getElementById("f-outcome");
  const fMined = document.getElementById("f-mined");
  const fText = document.getElementById("f-text");
  const count = document.getElementById("count");

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v; else node.setAttribute(k, v);
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      node.append(c instanceof Node ? c : String(c));
    }
    return node;
  }
  // Steps are numbered from 1 on the page, as reflections write them ("Step 2" is the
  // second action); the tables store the 0-based index (steps.step = 1 for Step 2).
  function stepNo(step) { return step + 1; }
  function outcome(ep) { return ep.error ? "error" : (ep.success ? "success" : "failure"); }
  function badge(ep, prefix) {
    const o = outcome(ep);
    const cls = o === "success" ? "ok" : (o === "error" ? "err" : "fail");
    return el("span", {class: "badge " + cls}, (prefix || "") + o);
  }
  function keyOf(item) { return compare ? item.task_id + "/" + item.seed : item.episode_id; }

  for (const task of [...new Set(items.map(e => e.task_id))].sort()) {
    fTask.append(el("option", {value: task}, task));
  }

  function matchesOutcome(item) {
    const v = fOutcome.value;
    if (!v) return true;
    if (!compare) return outcome(item) === v;
    const a = outcome(item.a) === "success", b = outcome(item.b) === "success";
    return {differ: a !== b, "a-only": a && !b, "b-only": b && !a, both: a && b,
            neither: !a && !b}[v];
  }
  function matches(item) {
    if (fTask.value && item.task_id !== fTask.value) return false;
    if (!matchesOutcome(item)) return false;
    if (fMined) {
      const mined = item.mined || [];
      if (fMined.value === "any" && !mined.length) return false;
      if (fMined.value && fMined.value !== "any" &&
          !mined.some(m => m.source === fMined.value)) return false;
    }
    const q = fText.value.trim().toLowerCase();
    const text = compare ? keyOf(item) + " " + item.a.instruction
                         : item.episode_id + " " + item.instruction;
    if (q && !text.toLowerCase().includes(q)) return false;
    return true;
  }

  function listEntry(item, i) {
    if (compare) {
      return el("li", {"data-index": i, "data-episode": keyOf(item)},
        el("span", {class: "id"}, keyOf(item)),
        el("div", {}, badge(item.a, "A: "), badge(item.b, "B: ")),
        el("div", {class: "note"}, item.a.n_steps + " vs " + item.b.n_steps + " steps"));
    }
    const marks = (item.mined || []).map(m => el("span", {class: "mark badge " + m.source},
      m.source + " @ step " + stepNo(m.step) + ": " + m.failure_mode));
    return el("li", {"data-index": i, "data-episode": item.episode_id},
      badge(item), el("span", {class: "id"}, item.episode_id), ...marks,
      el("div", {class: "note"},
        item.n_steps + (item.n_steps === 1 ? " step" : " steps") + ", reward " + item.reward));
  }

  function renderList() {
    list.replaceChildren();
    let n = 0;
    items.forEach((item, i) => {
      if (!matches(item)) return;
      n += 1;
      const li = listEntry(item, i);
      li.addEventListener("click", () => { location.hash = encodeURIComponent(keyOf(item)); });
      list.append(li);
    });
    count.textContent = n + " of " + items.length + (compare ? " shown units" : " shown episodes");
  }

  function facts(pairs) {
    const dl = el("dl", {class: "facts"});
    for (const [k, v] of pairs) {
      if (v === null || v === undefined || v === "") continue;
      dl.append(el("dt", {}, k), el("dd", {}, v));
    }
    return dl;
  }

  function reflections(title, refl) {
    if (!refl.length) return null;
    const box = el("div", {}, el("h3", {}, title));
    for (const r of refl) {
      box.append(el("div", {class: "reflection"},
        el("div", {class: "label"}, "attempt " + r.attempt + " · " + r.source), r.text));
    }
    return box;
  }

  function minedBox(m) {
    const lines = [el("strong", {}, m.source + " state: " + m.failure_mode),
      " · weight " + Number(m.weight).toFixed(2),
      el("div", {}, "reference: ", el("span", {class: "action"},
        (m.reference_actions || []).join("  |  "))),
      el("div", {}, "policy: ", el("span", {class: "action"},
        m.policy_action === null ? "(unparsable output)" : m.policy_action))];
    if (m.sampled_actions && m.sampled_actions.length) {
      lines.push(el("div", {}, "samples: " + m.sampled_actions.join("  |  ")));
    }
    return el("div", {class: "mined-box"}, ...lines);
  }

  function renderStep(s, mined, prefix) {
    let shot = null;  // text-only runs have no screenshot column to show
    if (s.shot) {
      shot = el("div", {class: "shot"}, el("img", {
        src: "data:image/png;base64," + data.shots[s.shot],
        alt: "screenshot of step " + stepNo(s.step)}));
    } else if (s.shot_note) {
      shot = el("div", {class: "shot"}, el("div", {class: "note"}, "screenshot " + s.shot_note));
    }
    const body = el("div", {class: "body"},
      el("div", {}, el("strong", {class: "step-no"}, "Step " + stepNo(s.step)), " ",
         el("span", {class: "note"}, s.url)),
      el("div", {class: "label"}, "observation"), el("pre", {class: "obs"}, s.obs),
      el("div", {class: "label"}, "model output"), el("pre", {class: "output"}, s.output),
      el("div", {class: "label"}, "parsed action"),
      s.parse_ok ? el("div", {class: "action"}, s.action)
                 : el("div", {class: "error"}, "did not parse" +
                      (s.parse_error ? ": " + s.parse_error : "")),
      s.env_error ? el("div", {class: "error"}, "env error: " + s.env_error) : null,
      s.acceptable ? el("div", {class: "note"}, "acceptable (" + s.label_source + "): " +
         (s.acceptable.length ? s.acceptable.join("  |  ") : "nothing to suggest")) : null,
      s.samples && s.samples.length > 1 ?
        el("div", {class: "note"}, "sampled: " + s.samples.join("  |  ")) : null,
      el("div", {class: "note"}, "reward " + s.reward + (s.done ? " · done" : "") +
         " · " + Number(s.latency_s).toFixed(2) + " s"));
    for (const m of mined) body.prepend(minedBox(m));
    const cls = mined.length ? " mined-" + mined[0].source : "";
    return el("section", {class: "step" + cls, id: prefix + "step-" + stepNo(s.step)}, shot, body);
  }

  // One episode: facts, reflections, steps. `prefix` keeps step ids apart in a comparison.
  function renderEpisode(ep, prefix, title) {
    const head = el("div", {},
      el(compare ? "h3" : "h2", {}, badge(ep), title ? title + ": " : "", ep.episode_id),
      facts([["task", ep.task_id], ["seed", ep.seed], ["split", ep.split],
             ["policy", ep.policy], ["attempt", ep.attempt], ["instruction", ep.instruction],
             ["outcome", outcome(ep)], ["reward", ep.reward], ["steps", ep.n_steps],
             ["answer", ep.answer], ["env error", ep.error],
             ["env retries", ep.env_retries || null],
             ["time", Number(ep.wall_s).toFixed(2) + " s"],
             ["tokens in/out", ep.tokens_in + " / " + ep.tokens_out]]));
    const steps = el("div", {class: "steps", id: prefix + "steps"});
    const mined = ep.mined || [];
    for (const s of ep.steps) {
      steps.append(renderStep(s, mined.filter(m => m.step === s.step), prefix));
    }
    if (!ep.steps.length) steps.append(el("p", {class: "note"}, "No steps stored."));
    // replaceChildren would print a null as the text "null": drop absent parts.
    return el("div", {class: "episode-pane"}, ...[head,
      reflections("Reflections it was conditioned on", ep.prior),
      reflections("Reflections on this attempt", ep.reflections),
      el("h3", {}, "Steps"), steps].filter(Boolean));
  }

  function show(index, step) {
    const item = items[index];
    for (const li of list.children) {
      li.classList.toggle("active", Number(li.dataset.index) === index);
    }
    if (compare) {
      view.replaceChildren(
        el("h2", {}, "task " + item.task_id + ", seed " + item.seed),
        el("div", {class: "pair"},
          renderEpisode(item.a, "a-", "A " + data.runs[0]),
          renderEpisode(item.b, "b-", "B " + data.runs[1])));
      view.scrollTop = 0;
      return;
    }
    view.replaceChildren(renderEpisode(item, "", null));
    view.scrollTop = 0;
    // Jump to the asked step (1-based), else to the critical state (else the first mined).
    const mined = item.mined || [];
    const critical = mined.find(m => m.source === "critical") || mined[0];
    const target = step !== null ? step : (critical ? stepNo(critical.step) : null);
    const node = target !== null ? document.getElementById("step-" + target) : null;
    if (node) node.scrollIntoView({block: "start"});
  }

  function route() {
    const hash = decodeURIComponent(location.hash.slice(1));
    if (hash.startsWith("task=")) {  // the report's per-task cells link here
      const task = hash.slice(5);
      if ([...fTask.options].some(o => o.value === task) && fTask.value !== task) {
        fTask.value = task;
        renderList();
      }
    }
    const at = hash.match(/^(.*)@(\d+)$/);  // "<episode id>@<step number>"
    const id = at ? at[1] : hash;
    let step = at ? Number(at[2]) : null;
    let index = items.findIndex(e => keyOf(e) === id);
    if (index < 0) {
      const first = list.querySelector("li");
      index = first ? Number(first.dataset.index) : -1;
      step = null;  // the asked step belongs to another episode
    }
    if (index >= 0) show(index, step);
    else view.replaceChildren(el("p", {class: "note"}, "No episode matches the filters."));
  }

  for (const f of [fTask, fOutcome, fMined].filter(Boolean)) {
    f.addEventListener("change", () => { renderList(); route(); });
  }
  fText.addEventListener("input", renderList);
  window.addEventListener("hashchange", route);
  renderList();
  route();
})();
"""


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


MINED_FILTER = """<select id="f-mined" aria-label="mined states">
      <option value="">all episodes</option><option value="any">with mined states</option>
      <option value="critical">with a critical state</option>
      <option value="fragile">with a fragile state</option>
    </select>"""


def render_viewer(data: dict[str, Any], title: str) -> str:
    compare = data.get("mode") == "compare"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title><style>{CSS}</style></head>
<body>
<header><h1>{html.escape(title)}<span class="split-tag">{html.escape(data["split"])} split</span></h1>
<div class="meta">{html.escape(_meta(data))}</div></header>
<div id="app">
<nav id="sidebar">
  <div class="filters">
    <select id="f-task" aria-label="task"><option value="">all tasks</option></select>
    <select id="f-outcome" aria-label="outcome">{_outcome_options(compare)}</select>
    {"" if compare else MINED_FILTER}
    <input id="f-text" type="search" placeholder="filter by id or instruction" aria-label="text">
    <div id="count"></div>
  </div>
  <ul id="episode-list"></ul>
</nav>
<main id="episode"></main>
</div>
<script id="viewer-data" type="application/json">{_embed(data)}</script>
<script>{JS}</script>
</body></html>
"""


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
