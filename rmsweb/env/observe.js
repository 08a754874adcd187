// One DOM walk per observation (a single page.evaluate round trip).
//
// Gives every visible interactive or text element a small integer id, stored in the
// DOM (attribute opts.attr) so it stays stable while the element lives, and returns one
// compact record per element: [id, role, name, value, states, options, x, y, w, h,
// depth, tag], as JSON. Python renders the accessibility text from these records.
//
// Rules (kept close to what a sighted user can act on, and short for tiny models):
// - hidden subtrees (display:none, opacity 0, aria-hidden, opts.exclude) are skipped;
// - interactive elements (links, buttons, form controls, ARIA widgets, text with a
//   pointer cursor, icon images) get a line; their descendants' text is their name;
// - an element with its own text gets a `text` line; inline children without their own
//   behaviour (b, span) are folded into the parent's text;
// - a <label> that names a control is folded into that control's name;
// - nesting: depth counts emitted ancestors and list containers (trees, menus).
async (opts) => {
  const ATTR = opts.attr;
  let next = opts.next;
  const MAXLEN = opts.maxlen;
  const MAX_ELEMENTS = opts.maxElements;
  let out = [];
  let seen = new Set();
  // Images still loading have no size yet, so they would be missing from the text:
  // collect them during the walk, wait for them (briefly) and walk again.
  const loading = new Set();
  const excluded = new Set();
  for (const sel of opts.exclude) {
    for (const e of document.querySelectorAll(sel)) excluded.add(e);
  }
  let active = document.activeElement;
  while (active && active.shadowRoot && active.shadowRoot.activeElement) {
    active = active.shadowRoot.activeElement;
  }

  const SKIP_TAGS = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'HEAD', 'META', 'LINK',
    'TITLE', 'BR', 'WBR', 'OPTION', 'OPTGROUP', 'DATALIST']);
  const LIST_TAGS = new Set(['UL', 'OL', 'MENU']);
  const LIST_ROLES = new Set(['list', 'tree', 'group', 'menu', 'listbox', 'tablist', 'grid']);
  const WIDGET_ROLES = new Set(['button', 'link', 'checkbox', 'radio', 'tab', 'menuitem',
    'menuitemcheckbox', 'menuitemradio', 'option', 'treeitem', 'combobox', 'textbox',
    'searchbox', 'switch', 'slider', 'spinbutton', 'gridcell']);
  const CONTAINER_ROLES = new Set(['dialog', 'alertdialog']);
  const TEXT_INPUTS = new Set(['text', 'password', 'email', 'search', 'tel', 'url', 'number',
    'date', 'time', 'datetime-local', 'month', 'week', '']);
  const BUTTON_INPUTS = new Set(['button', 'submit', 'reset', 'image']);

  const norm = (s) => (s || '').replace(/\s+/g, ' ').trim();
  const clip = (s) => (s.length > MAXLEN ? s.slice(0, MAXLEN - 1) + '…' : s);

  function roleOf(el, style) {
    const explicit = (el.getAttribute('role') || '').trim().split(/\s+/)[0];
    if (explicit && explicit !== 'presentation' && explicit !== 'none') return explicit;
    const tag = el.tagName;
    if (tag === 'A') return el.hasAttribute('href') || style.cursor === 'pointer' ? 'link' : null;
    if (tag === 'BUTTON' || tag === 'SUMMARY') return 'button';
    if (tag === 'SELECT') return el.multiple || el.size > 1 ? 'listbox' : 'combobox';
    if (tag === 'TEXTAREA') return 'textbox';
    if (tag === 'INPUT') {
      const t = (el.getAttribute('type') || 'text').toLowerCase();
      if (t === 'hidden') return null;
      if (t === 'checkbox') return 'checkbox';
      if (t === 'radio') return 'radio';
      if (BUTTON_INPUTS.has(t)) return 'button';
      if (t === 'range') return 'slider';
      if (t === 'color' || t === 'file') return 'button';
      return 'textbox';
    }
    if (el.isContentEditable && !(el.parentElement && el.parentElement.isContentEditable)) {
      return 'textbox';
    }
    return null;
  }

  // Drag handles (resize/move cursors) look like icons but are not buttons.
  const HANDLE_CURSORS = /resize|move|grab|crosshair|col-|row-/;

  function isIcon(el, style) {
    if (el.children.length > 0 || norm(el.textContent)) return false;
    if (HANDLE_CURSORS.test(style.cursor)) return false;
    const tag = el.tagName;
    if (tag === 'IMG' || tag === 'SVG' || tag === 'svg' || tag === 'CANVAS') return true;
    return (style.content || '').startsWith('url(') || style.backgroundImage !== 'none';
  }

  function labelledBy(el) {
    const ids = (el.getAttribute('aria-labelledby') || '').split(/\s+/).filter(Boolean);
    return norm(ids.map((id) => {
      const e = document.getElementById(id);
      return e ? e.textContent : '';
    }).join(' '));
  }

  // A <label> without a control, directly followed by an unnamed form control, names it.
  function namingLabel(el) {
    const prev = el.previousElementSibling;
    if (prev && prev.tagName === 'LABEL' && !prev.control && norm(prev.textContent)) return prev;
    return null;
  }

  function controlName(el) {
    const aria = norm(el.getAttribute('aria-label'));
    if (aria) return aria;
    const by = labelledBy(el);
    if (by) return by;
    if (el.labels && el.labels.length) {
      const t = norm(Array.from(el.labels).map((l) => l.textContent).join(' '));
      if (t) return t;
    }
    const lab = namingLabel(el);
    if (lab) return norm(lab.textContent);
    return norm(el.getAttribute('placeholder') || el.getAttribute('title') || '');
  }

  function nameOf(el, role, style) {
    const tag = el.tagName;
    if (tag === 'INPUT' || tag === 'SELECT' || tag === 'TEXTAREA') {
      const t = (el.getAttribute('type') || '').toLowerCase();
      if (tag === 'INPUT' && BUTTON_INPUTS.has(t)) return norm(el.value || el.getAttribute('aria-label') || t);
      return controlName(el);
    }
    const aria = norm(el.getAttribute('aria-label'));
    if (aria) return aria;
    const by = labelledBy(el);
    if (by) return by;
    if (role === 'img') {
      // icons often have nothing but a class to go by ("trash", "star clicked")
      const cls = typeof el.className === 'string' ? el.className.trim().split(/\s+/) : [];
      return norm(el.getAttribute('alt') || el.getAttribute('title') || el.id ||
        cls.slice(0, 2).join(' '));
    }
    if (CONTAINER_ROLES.has(role)) return '';
    return norm(el.textContent) || norm(el.getAttribute('title') || '');
  }

  function hasOwnText(el) {
    for (const c of el.childNodes) {
      if (c.nodeType === 3 && c.data.trim()) return true;
    }
    return false;
  }

  // Text of a text element: its own text nodes plus inline descendants; block-level
  // descendants get their own lines. `fold` collects the inline elements absorbed.
  function ownText(el, fold) {
    let s = '';
    for (const c of el.childNodes) {
      if (c.nodeType === 3) {
        s += c.data;
      } else if (c.nodeType === 1 && !SKIP_TAGS.has(c.tagName) && !excluded.has(c)) {
        const cs = getComputedStyle(c);
        if (cs.display === 'none') continue;
        if (cs.display === 'inline') {
          fold.push(c);
          s += ownText(c, fold);
        } else {
          s += ' ';
        }
      }
    }
    return s;
  }

  function states(el, role) {
    const st = [];
    const tag = el.tagName;
    if ((role === 'checkbox' || role === 'radio' || role === 'switch') && tag === 'INPUT') {
      if (el.checked) st.push('checked');
    } else if (el.getAttribute('aria-checked') === 'true') {
      st.push('checked');
    }
    if (el.getAttribute('aria-selected') === 'true') st.push('selected');
    if (el.getAttribute('aria-current') && el.getAttribute('aria-current') !== 'false') {
      st.push('current');
    }
    const exp = role === 'tab' ? null : el.getAttribute('aria-expanded');
    if (exp === 'true') st.push('expanded');
    else if (exp === 'false') st.push('collapsed');
    if (el === active) st.push('focused');
    if (el.disabled || el.getAttribute('aria-disabled') === 'true') st.push('disabled');
    if (el.readOnly && (tag === 'INPUT' || tag === 'TEXTAREA')) st.push('readonly');
    return st;
  }

  function valueOf(el, role) {
    const tag = el.tagName;
    if (tag === 'SELECT') {
      const o = el.selectedOptions && el.selectedOptions[0];
      return o ? clip(norm(o.label || o.textContent)) : '';
    }
    if (role === 'textbox' || role === 'searchbox' || role === 'slider' || role === 'spinbutton') {
      if (tag === 'INPUT' || tag === 'TEXTAREA') return clip(el.value.replace(/\n/g, ' '));
      if (el.isContentEditable) return clip(norm(el.innerText));
    }
    return null;
  }

  function optionsOf(el) {
    if (el.tagName !== 'SELECT') return [];
    return Array.from(el.options).slice(0, 50).map((o) => clip(norm(o.label || o.textContent)));
  }

  function emit(el, role, name, depth, style, rect) {
    let id = el.getAttribute(ATTR);
    // Pages clone nodes with our attribute; a repeated id gets a fresh one.
    if (!id || seen.has(id)) {
      id = String(next++);
      el.setAttribute(ATTR, id);
    }
    seen.add(id);
    let tag = el.tagName.toLowerCase();
    if (tag === 'input') tag += ':' + (el.getAttribute('type') || 'text').toLowerCase();
    out.push([id, role, clip(name), valueOf(el, role), states(el, role), optionsOf(el),
      Math.round(rect.left * 10) / 10, Math.round(rect.top * 10) / 10,
      Math.round(rect.width * 10) / 10, Math.round(rect.height * 10) / 10, depth, tag]);
    return id;
  }

  const folded = new Set();

  // inWidget: inside an interactive element (its text is already that element's name).
  // parentName: name of the nearest emitted ancestor (to drop lines that repeat it).
  // lists: how many list containers enclose el; indented: whether an element emitted
  // since the innermost enclosing list already indents el.
  function walk(el, depth, inWidget, parentName, lists, indented) {
    if (out.length >= MAX_ELEMENTS) return;
    if (SKIP_TAGS.has(el.tagName) || excluded.has(el)) return;
    if (el.getAttribute('aria-hidden') === 'true') return;
    const style = getComputedStyle(el);
    if (style.display === 'none' || style.opacity === '0') return;
    // "Visually hidden" text for screen readers (jQuery UI's live regions, sr-only)
    if (style.clip === 'rect(0px, 0px, 0px, 0px)' || style.clipPath === 'inset(50%)') return;
    const shown = style.visibility === 'visible' && style.display !== 'contents';
    const rect = el.getBoundingClientRect();
    const sized = rect.width > 0 && rect.height > 0;
    if (!sized && shown && el.children.length === 0) {
      if (el.tagName === 'IMG' && !el.complete && el.src) loading.add(el.src);
      const m = /^url\("?(.*?)"?\)$/.exec(style.content || '');
      if (m) loading.add(m[1]);
    }
    let role = roleOf(el, style);
    let emitted = false;
    let childDepth = depth;
    let childName = parentName;

    if (shown && sized && !folded.has(el)) {
      if (el.tagName === 'LABEL' && el.control) {
        // folded into its control's name
      } else if (role && (WIDGET_ROLES.has(role) || role === 'listbox')) {
        const name = nameOf(el, role, style);
        // a link inside a tab with the same label is the same target twice
        if (!(inWidget && name === parentName)) {
          emit(el, role, name, depth, style, rect);
          emitted = true;
          childName = name;
        }
        inWidget = true;
      } else if (role && CONTAINER_ROLES.has(role)) {
        const name = nameOf(el, role, style);
        emit(el, role, name, depth, style, rect);
        emitted = true;
        childName = name;
      } else if (!inWidget && isIcon(el, style)) {
        emit(el, 'img', nameOf(el, 'img', style), depth, style, rect);
        emitted = true;
      } else if (!inWidget && hasOwnText(el)) {
        if (el.tagName === 'LABEL') {
          const nxt = el.nextElementSibling;
          // a label that names the next control is rendered as that control's name
          if (nxt && !el.control && ['INPUT', 'SELECT', 'TEXTAREA'].includes(nxt.tagName) &&
              !(nxt.labels && nxt.labels.length) && !nxt.getAttribute('aria-label')) {
            return;
          }
        }
        const fold = [];
        const text = norm(ownText(el, fold));
        const pointer = style.cursor === 'pointer';
        for (const f of fold) {
          // inline children with a behaviour of their own (links, pointer spans) keep a line
          const fs = getComputedStyle(f);
          if (!roleOf(f, fs) && !(fs.cursor === 'pointer' && style.cursor !== 'pointer')) folded.add(f);
        }
        if (text && text !== parentName) {
          const r = role || (/^H[1-6]$/.test(el.tagName) ? 'heading' : pointer ? 'link' : 'text');
          emit(el, r, text, depth, style, rect);
          emitted = true;
          childName = text;
        }
      }
    }
    if (emitted) childDepth = depth + 1;
    // A list nested in a list (trees, sub-menus) indents its items like a browser
    // does, unless an emitted ancestor inside the outer list indents them already.
    const listy = LIST_TAGS.has(el.tagName) || LIST_ROLES.has(el.getAttribute('role') || '');
    if (listy && !emitted && lists > 0 && !indented) childDepth = depth + 1;
    if (el.tagName === 'SELECT') return; // options are listed on the select's line
    const childLists = lists + (listy ? 1 : 0);
    const childIndented = listy ? false : indented || emitted;
    for (const c of el.children) {
      walk(c, childDepth, inWidget, childName, childLists, childIndented);
    }
    if (el.shadowRoot) {
      for (const c of el.shadowRoot.children) {
        walk(c, childDepth, inWidget, childName, childLists, childIndented);
      }
    }
  }

  if (document.body) walk(document.body, 0, false, '', 0, false);
  if (loading.size > 0 && opts.imageWaitMs > 0) {
    const urls = Array.from(loading).slice(0, 50);
    const wait = Promise.all(urls.map((u) => {
      const img = new Image();
      img.src = u;
      return img.decode().catch(() => null);
    }));
    await Promise.race([wait, new Promise((r) => setTimeout(r, opts.imageWaitMs))]);
    out = [];
    seen = new Set();
    folded.clear();
    if (document.body) walk(document.body, 0, false, '', 0, false);
  }
  // One JSON string: Playwright transfers it much faster than nested arrays.
  return JSON.stringify({
    url: location.href,
    title: document.title,
    next: next,
    elements: out,
    truncated: out.length >= MAX_ELEMENTS,
  });
}
