"""A static, self-contained HTML trajectory viewer for one run folder.

    rmsweb view runs/eval/miniwob-cpu/sft            # -> runs/eval/miniwob-cpu/sft/viewer.html

Left: the episode list, filterable by task, outcome, mined states and text. Right:
one episode step by step (screenshot, observation, model output, parsed action,
parse/env errors, the labeller's acceptable actions where a mining run stored them),
its reflections and its outcome. `#<episode id>` in the URL opens an episode;
`#<episode id>@<step>` also scrolls to that step. In a mine run, the steps mined as
critical or fragile states are marked (failure mode, reference and policy action),
an episode opens at its critical step, and episodes with mined states come first. The data is embedded as JSON and rendered with textContent
only, so page text from the web can never inject markup.

Page size is bounded: at most `max_episodes` episodes (spread over tasks),
and screenshots only up to `max_screenshot_mb` (later ones are marked omitted).
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


# Spread the shown episodes over tasks: the k-th episode of every task before any
# task's (k+1)-th, so a capped page still shows every task. Episodes with mined
# (critical or fragile) states come before the others: they are what a mine run's
# viewer is for.
EPISODES_SQL = """
WITH mined AS (
    SELECT DISTINCT episode_id FROM mined_states WHERE source IN ('critical', 'fragile')
), flagged AS (
    SELECT *, episode_id IN (SELECT episode_id FROM mined) AS has_mined FROM episodes
), ranked AS (
    SELECT *, row_number() OVER (
        PARTITION BY task_id, has_mined ORDER BY seed, policy, attempt, episode_id) AS task_rank
    FROM flagged
)
SELECT episode_id, task_id, seed, policy, attempt, success, reward, n_steps, answer, error,
       instruction, wall_s, tokens_in, tokens_out, env_retries, suite, split
FROM ranked
ORDER BY has_mined DESC, task_rank, task_id
LIMIT ?
"""


def _fetch(con: Any, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    cur = con.execute(sql, params or [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def load_viewer_data(
    run_dir: Path, *, max_episodes: int = 200, max_screenshot_mb: float = 48.0
) -> dict[str, Any]:
    """Everything the page shows, as JSON-ready data."""
    from rmsweb.store.views import connect

    run = run_name(run_dir)
    if not part_files(run_dir, "episodes"):
        raise UserError(
            f"{run_dir} has no episodes table (expected {run_dir}/episodes/part-*.parquet)."
        )
    con = connect({run: run_dir})
    try:
        total, ok = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE success) FROM episodes"
        ).fetchone()
        episodes = _fetch(con, EPISODES_SQL, [max_episodes])
        episodes.sort(key=lambda e: (e["task_id"], e["seed"], e["policy"], e["attempt"]))
        ids = [e["episode_id"] for e in episodes]
        steps = _fetch(
            con,
            "SELECT * FROM steps WHERE list_contains(?, episode_id) ORDER BY episode_id, step",
            [ids],
        )
        reflections = _fetch(
            con,
            """SELECT r.episode_id, r.attempt, r.text, r.source, e.task_id, e.seed, e.policy
               FROM reflections r LEFT JOIN episodes e USING (run, episode_id)
               ORDER BY r.attempt""",
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
        wanted = list(dict.fromkeys(s["screenshot"] for s in steps if s["screenshot"]))
        pngs = dict(
            con.execute(
                "SELECT sha256, png FROM screenshots WHERE list_contains(?, sha256)", [wanted]
            ).fetchall()
        )
    finally:
        con.close()

    budget = max_screenshot_mb * 2**20
    shots: dict[str, str] = {}
    omitted = 0
    for sha in wanted:  # in display order, so the first episodes keep their screenshots
        if sha not in pngs:
            continue
        data = base64.b64encode(pngs[sha]).decode("ascii")
        if budget - len(data) < 0:
            omitted += 1
            continue
        budget -= len(data)
        shots[sha] = data

    label_of = {(lab["episode_id"], lab["step"]): lab for lab in labels}
    mined_of: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for m in mined:
        mined_of[m["episode_id"]].append({k: v for k, v in m.items() if k != "episode_id"})
    by_episode: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in steps:
        lab = label_of.get((s["episode_id"], s["step"]))
        sha = s["screenshot"]
        by_episode[s["episode_id"]].append(
            {
                "step": s["step"],
                "url": s["url"],
                "obs": s["obs_text"],
                "shot": sha if sha in shots else None,
                "shot_note": None
                if not sha or sha in shots
                else ("omitted (page size limit)" if sha in pngs else "missing"),
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
        )
    out = []
    for e in episodes:
        unit = (e["task_id"], e["seed"], e["policy"])
        refl = [
            {"attempt": r["attempt"], "text": r["text"], "source": r["source"]}
            for r in reflections
            if r["episode_id"] == e["episode_id"]
        ]
        prior = [
            {"attempt": r["attempt"], "text": r["text"], "source": r["source"]}
            for r in reflections
            if (r["task_id"], r["seed"], r["policy"]) == unit and r["attempt"] < e["attempt"]
        ]
        out.append(
            {
                **e,
                "steps": by_episode.get(e["episode_id"], []),
                "reflections": refl,
                "prior": prior,
                "mined": mined_of.get(e["episode_id"], []),
            }
        )
    out.sort(key=lambda e: not e["mined"])  # stable: mined episodes first, else by task
    return {
        "run": run,
        "total": total,
        "successes": ok,
        "shown": len(out),
        "shots_omitted": omitted,
        "episodes": out,
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
"""

JS = r"""
(function () {
  const data = JSON.parse(document.getElementById("viewer-data").textContent);
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
  function outcome(ep) { return ep.error ? "error" : (ep.success ? "success" : "failure"); }
  function badge(ep) {
    const o = outcome(ep);
    const cls = o === "success" ? "ok" : (o === "error" ? "err" : "fail");
    return el("span", {class: "badge " + cls}, o);
  }

  for (const task of [...new Set(data.episodes.map(e => e.task_id))].sort()) {
    fTask.append(el("option", {value: task}, task));
  }

  function matches(ep) {
    if (fTask.value && ep.task_id !== fTask.value) return false;
    if (fOutcome.value && outcome(ep) !== fOutcome.value) return false;
    const mined = ep.mined || [];
    if (fMined.value === "any" && !mined.length) return false;
    if (fMined.value && fMined.value !== "any" &&
        !mined.some(m => m.source === fMined.value)) return false;
    const q = fText.value.trim().toLowerCase();
    if (q && !(ep.episode_id + " " + ep.instruction).toLowerCase().includes(q)) return false;
    return true;
  }

  function renderList() {
    list.replaceChildren();
    let n = 0;
    data.episodes.forEach((ep, i) => {
      if (!matches(ep)) return;
      n += 1;
      const marks = (ep.mined || []).map(m => el("span", {class: "mark badge " + m.source},
        m.source + " @" + m.step + ": " + m.failure_mode));
      const li = el("li", {"data-index": i, "data-episode": ep.episode_id},
        badge(ep), el("span", {class: "id"}, ep.episode_id), ...marks,
        el("div", {class: "note"},
          ep.n_steps + (ep.n_steps === 1 ? " step" : " steps") + ", reward " + ep.reward));
      li.addEventListener("click", () => { location.hash = encodeURIComponent(ep.episode_id); });
      list.append(li);
    });
    count.textContent = n + " of " + data.episodes.length + " shown episodes";
  }

  function facts(pairs) {
    const dl = el("dl", {class: "facts"});
    for (const [k, v] of pairs) {
      if (v === null || v === undefined || v === "") continue;
      dl.append(el("dt", {}, k), el("dd", {}, v));
    }
    return dl;
  }

  function reflections(title, items) {
    if (!items.length) return null;
    const box = el("div", {}, el("h3", {}, title));
    for (const r of items) {
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

  function renderStep(s, mined) {
    let shot = null;  // text-only runs have no screenshot column to show
    if (s.shot) {
      shot = el("div", {class: "shot"}, el("img", {
        src: "data:image/png;base64," + data.shots[s.shot], alt: "screenshot of step " + s.step}));
    } else if (s.shot_note) {
      shot = el("div", {class: "shot"}, el("div", {class: "note"}, "screenshot " + s.shot_note));
    }
    const body = el("div", {class: "body"},
      el("div", {}, el("strong", {}, "Step " + s.step), " ",
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
    return el("section", {class: "step" + cls, id: "step-" + s.step}, shot, body);
  }

  function show(index, step) {
    const ep = data.episodes[index];
    for (const li of list.children) {
      li.classList.toggle("active", Number(li.dataset.index) === index);
    }
    const head = el("div", {},
      el("h2", {}, badge(ep), ep.episode_id),
      facts([["task", ep.task_id], ["seed", ep.seed], ["policy", ep.policy],
             ["attempt", ep.attempt], ["instruction", ep.instruction],
             ["outcome", outcome(ep)], ["reward", ep.reward], ["steps", ep.n_steps],
             ["answer", ep.answer], ["env error", ep.error],
             ["env retries", ep.env_retries || null],
             ["time", Number(ep.wall_s).toFixed(2) + " s"],
             ["tokens in/out", ep.tokens_in + " / " + ep.tokens_out]]));
    const steps = el("div", {id: "steps"});
    const mined = ep.mined || [];
    for (const s of ep.steps) steps.append(renderStep(s, mined.filter(m => m.step === s.step)));
    if (!ep.steps.length) steps.append(el("p", {class: "note"}, "No steps stored."));
    // replaceChildren would print a null as the text "null": drop absent parts.
    view.replaceChildren(...[head,
      reflections("Reflections it was conditioned on", ep.prior),
      reflections("Reflections on this attempt", ep.reflections),
      el("h3", {}, "Steps"), steps].filter(Boolean));
    view.scrollTop = 0;
    // Jump to the asked step, else to the episode's critical state (else its first mined).
    const critical = mined.find(m => m.source === "critical") || mined[0];
    const target = step !== null ? step : (critical ? critical.step : null);
    const node = target !== null ? document.getElementById("step-" + target) : null;
    if (node) node.scrollIntoView({block: "start"});
  }

  function route() {
    const hash = decodeURIComponent(location.hash.slice(1));
    const at = hash.match(/^(.*)@(\d+)$/);  // "<episode id>@<step>"
    const id = at ? at[1] : hash;
    let step = at ? Number(at[2]) : null;
    let index = data.episodes.findIndex(e => e.episode_id === id);
    if (index < 0) {
      const first = list.querySelector("li");
      index = first ? Number(first.dataset.index) : -1;
      step = null;  // the asked step belongs to another episode
    }
    if (index >= 0) show(index, step);
    else view.replaceChildren(el("p", {class: "note"}, "No episode matches the filters."));
  }

  for (const f of [fTask, fOutcome, fMined]) f.addEventListener("change", () => { renderList(); route(); });
  fText.addEventListener("input", renderList);
  window.addEventListener("hashchange", route);
  renderList();
  route();
})();
"""


def render_viewer(data: dict[str, Any], title: str) -> str:
    meta = f"{data['total']} episodes, {data['successes']} successful; showing {data['shown']}" + (
        f"; {data['shots_omitted']} screenshots omitted" if data["shots_omitted"] else ""
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title><style>{CSS}</style></head>
<body>
<header><h1>{html.escape(title)}</h1><div class="meta">{html.escape(meta)}</div></header>
<div id="app">
<nav id="sidebar">
  <div class="filters">
    <select id="f-task" aria-label="task"><option value="">all tasks</option></select>
    <select id="f-outcome" aria-label="outcome">
      <option value="">all outcomes</option><option value="success">success</option>
      <option value="failure">failure</option><option value="error">env error</option>
    </select>
    <select id="f-mined" aria-label="mined states">
      <option value="">all episodes</option><option value="any">with mined states</option>
      <option value="critical">with a critical state</option>
      <option value="fragile">with a fragile state</option>
    </select>
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


def write_viewer(
    run_dir: Path,
    out: Path,
    *,
    max_episodes: int = 200,
    max_screenshot_mb: float = 48.0,
    title: str | None = None,
) -> Path:
    """Write the viewer page of one run to `out`."""
    run_dir = Path(run_dir)
    data = load_viewer_data(run_dir, max_episodes=max_episodes, max_screenshot_mb=max_screenshot_mb)
    page = render_viewer(data, title or f"Trajectories: {data['run']}")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out)
    return out


def main(run_dir: Path, out: Path | None = None) -> None:
    """The `rmsweb view` command."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError(f"no such run folder: {run_dir}")
    # Not inside RUN_DIR by default: run folders are DVC outputs and must stay unchanged.
    path = write_viewer(run_dir, out or Path(f"{run_dir.resolve().name}-viewer.html"))
    print(f"wrote {path}", file=sys.stdout)
