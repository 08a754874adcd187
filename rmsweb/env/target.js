// Find an element by its injected id and make it ready for a click or a fill:
// scroll it into view, check it is visible, enabled (and editable for fill), and find a
// point on it that is not covered by another element. Returns {x, y} or {error}.
([attr, id, mode]) => {
  const el = document.querySelector('[' + attr + '="' + id + '"]');
  if (!el) return { error: 'no element with id ' + id + ' on the page' };
  const style = getComputedStyle(el);
  const r = el.getBoundingClientRect();
  if (r.width === 0 || r.height === 0 || style.visibility !== 'visible') {
    return { error: 'element ' + id + ' is not visible' };
  }
  if (el.disabled || el.getAttribute('aria-disabled') === 'true') {
    return { error: 'element ' + id + ' is disabled' };
  }
  if (mode === 'fill') {
    const tag = el.tagName;
    const editable = tag === 'INPUT' || tag === 'TEXTAREA' || el.isContentEditable;
    if (!editable) return { error: 'element ' + id + ' is not a text field' };
    if (el.readOnly) return { error: 'element ' + id + ' is read-only' };
    const t = (el.getAttribute('type') || 'text').toLowerCase();
    if (tag === 'INPUT' && ['checkbox', 'radio', 'button', 'submit', 'reset', 'image', 'file',
      'range', 'color', 'hidden'].includes(t)) {
      return { error: 'element ' + id + ' is a ' + t + ', not a text field' };
    }
  }
  if (mode === 'select' && el.tagName !== 'SELECT') {
    return { error: 'element ' + id + ' is not a <select>; click its options instead' };
  }
  const hits = (h) => {
    if (!h) return false;
    if (h === el || el.contains(h)) return true;
    return h.tagName === 'LABEL' && h.control === el;
  };
  const fx = [0.5, 0.25, 0.75, 0.5, 0.5];
  const fy = [0.5, 0.5, 0.5, 0.25, 0.75];
  let blocker = null;
  const findPoint = () => {
    const r = el.getBoundingClientRect();
    for (let i = 0; i < fx.length; i++) {
      const x = r.left + r.width * fx[i];
      const y = r.top + r.height * fy[i];
      if (x < 0 || y < 0 || x >= innerWidth || y >= innerHeight) continue;
      const h = document.elementFromPoint(x, y);
      if (hits(h)) return { x: x, y: y };
      if (!blocker) blocker = h;
    }
    return null;
  };
  // Off screen, or clipped by a scrolled container: scroll it into view and look again.
  let point = findPoint();
  if (!point) {
    blocker = null;
    el.scrollIntoView({ block: 'center', inline: 'center', behavior: 'instant' });
    point = findPoint();
  }
  if (point) return point;
  if (!blocker) return { error: 'element ' + id + ' is outside the viewport' };
  const bid = blocker.getAttribute(attr);
  const what = bid ? '[' + bid + ']' : '<' + blocker.tagName.toLowerCase() + '>';
  return { error: 'element ' + id + ' is covered by ' + what };
}
