// Script of the `rmsweb view` page; rmsweb/report/viewer.py inlines it into the page,
// which embeds the data as JSON (#viewer-data). Page text is shown with textContent only.
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
