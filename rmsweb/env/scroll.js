// Scroll by most of a screen: the focused element's scrollable ancestor, else the
// largest visible scrollable element, else the page. Returns null or an error string.
([direction]) => {
  const scrollable = (e) => {
    if (!e || e === document.body || e === document.documentElement) return false;
    const s = getComputedStyle(e);
    const oy = /(auto|scroll)/.test(s.overflowY) && e.scrollHeight > e.clientHeight + 1;
    const ox = /(auto|scroll)/.test(s.overflowX) && e.scrollWidth > e.clientWidth + 1;
    return direction === 'up' || direction === 'down' ? oy : ox;
  };
  let target = null;
  for (let e = document.activeElement; e; e = e.parentElement) {
    if (scrollable(e)) { target = e; break; }
  }
  if (!target) {
    let best = 0;
    for (const e of document.querySelectorAll('body *')) {
      if (!scrollable(e)) continue;
      const r = e.getBoundingClientRect();
      const area = r.width * r.height;
      if (area > best) { best = area; target = e; }
    }
  }
  const page = document.scrollingElement || document.documentElement;
  const el = target || page;
  const h = el === page ? innerHeight : el.clientHeight;
  const w = el === page ? innerWidth : el.clientWidth;
  const dy = direction === 'down' ? 0.8 * h : direction === 'up' ? -0.8 * h : 0;
  const dx = direction === 'right' ? 0.8 * w : direction === 'left' ? -0.8 * w : 0;
  const before = [el.scrollLeft, el.scrollTop];
  el.scrollBy({ left: dx, top: dy, behavior: 'instant' });
  if (el.scrollLeft === before[0] && el.scrollTop === before[1]) {
    return 'cannot scroll ' + direction + ' any further';
  }
  return null;
}
