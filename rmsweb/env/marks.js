// Set-of-marks: draw each element's box and id over the page (on = true), or remove
// the overlay again (on = false). The overlay ignores the pointer.
([on, boxes]) => {
  const old = document.getElementById('__rmsweb_marks');
  if (old) old.remove();
  if (!on) return;
  const layer = document.createElement('div');
  layer.id = '__rmsweb_marks';
  layer.style.cssText = 'position:fixed;left:0;top:0;width:0;height:0;z-index:2147483647;' +
    'pointer-events:none;';
  for (const [id, x, y, w, h] of boxes) {
    const b = document.createElement('div');
    b.style.cssText = 'position:fixed;box-sizing:border-box;border:1px solid #e0218a;' +
      'left:' + x + 'px;top:' + y + 'px;width:' + w + 'px;height:' + h + 'px;';
    const t = document.createElement('span');
    t.textContent = id;
    t.style.cssText = 'position:absolute;left:0;top:0;background:#e0218a;color:#fff;' +
      'font:bold 8px/9px monospace;padding:0 1px;';
    b.appendChild(t);
    layer.appendChild(b);
  }
  document.documentElement.appendChild(layer);
}
