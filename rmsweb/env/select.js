// Choose an option of a <select> by its label (exact, then case-insensitive), or value;
// fire the events a user's choice fires. Returns null or an error string.
([attr, id, wanted]) => {
  const el = document.querySelector('[' + attr + '="' + id + '"]');
  if (!el) return 'no element with id ' + id + ' on the page';
  const norm = (s) => (s || '').replace(/\s+/g, ' ').trim();
  const opts = Array.from(el.options);
  const w = norm(wanted);
  let o = opts.find((o) => norm(o.label) === w) ||
    opts.find((o) => norm(o.label).toLowerCase() === w.toLowerCase()) ||
    opts.find((o) => o.value === wanted);
  if (!o) {
    const names = opts.slice(0, 10).map((o) => '"' + norm(o.label) + '"').join(', ');
    return 'no option "' + w + '" in element ' + id + ' (options: ' + names + ')';
  }
  if (o.disabled) return 'option "' + w + '" is disabled';
  el.focus();
  o.selected = true;
  el.dispatchEvent(new Event('input', { bubbles: true }));
  el.dispatchEvent(new Event('change', { bubbles: true }));
  return null;
}
