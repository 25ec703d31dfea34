// What computer, upload_image, permissions_check and the relay's methods
// ask of the page: where an element is, what is at a point, files put into
// an input or dropped, permission states, the scroll position.
(() => {
  'use strict';
  const P = globalThis.__browserBridgePage;
  const { refOf, needEl } = P.refs;
  const { roleOf, nameOf, describe, rectOf } = P.a11y;

  /** args: {ref, scroll? (true)}: where to click the element, scrolled into view, and what covers it if anything does. */
  P.ops.locate = (args) => {
    const el = needEl(args.ref);
    let r = el.getBoundingClientRect();
    if (args.scroll !== false && !(r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth)) {
      el.scrollIntoView({ block: 'center', inline: 'center', behavior: 'instant' });
      r = el.getBoundingClientRect();
    }
    if (r.width === 0 && r.height === 0) throw new Error(`element ${args.ref} has no size on screen (hidden?)`);
    const x = Math.round(r.left + r.width / 2),
      y = Math.round(r.top + r.height / 2);
    let hit = document.elementFromPoint(x, y);
    while (hit && hit.shadowRoot && hit.shadowRoot.elementFromPoint) {
      const inner = hit.shadowRoot.elementFromPoint(x, y);
      if (!inner || inner === hit) break;
      hit = inner;
    }
    const role = roleOf(el);
    const res = { x, y, rect: rectOf(el), role, name: nameOf(el, role) };
    if (hit && hit !== el && !el.contains(hit) && !hit.contains(el)) {
      const hr = roleOf(hit);
      res.obscuredBy = { ref: refOf(hit), role: hr, name: nameOf(hit, hr), tag: hit.tagName.toLowerCase() };
    }
    return res;
  };

  /** args: {x, y}: the element at a viewport point, or null. */
  P.ops.elementAt = (args) => {
    const el = document.elementFromPoint(args.x, args.y);
    if (!el) return null;
    const role = roleOf(el);
    return { ref: refOf(el), role, name: nameOf(el, role), tag: el.tagName.toLowerCase() };
  };

  /** args: {ref}: the element's ref, role, name, value and state. */
  P.ops.describe = (args) => describe(needEl(args.ref));

  /** args: {ref, files: [{base64, mimeType, name}], point?}: into a file input, or dropped onto the element. */
  P.ops.upload = (args) => {
    const el = needEl(args.ref);
    const files = (args.files || []).map((f) => {
      const bin = atob(f.base64);
      const bytes = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
      return new File([bytes], f.name, { type: f.mimeType, lastModified: Date.now() });
    });
    const dt = new DataTransfer();
    for (const f of files) dt.items.add(f);
    if (el.tagName === 'INPUT' && (el.getAttribute('type') || '').toLowerCase() === 'file') {
      if (el.disabled) throw new Error(`${args.ref} is disabled`);
      el.files = dt.files;
      el.dispatchEvent(new Event('input', { bubbles: true, composed: true }));
      el.dispatchEvent(new Event('change', { bubbles: true, composed: true }));
      return {
        ref: args.ref,
        mode: 'file-input',
        files: [...el.files].map((f) => ({ name: f.name, size: f.size, type: f.type })),
      };
    }
    el.scrollIntoView({ block: 'center', behavior: 'instant' });
    const r = el.getBoundingClientRect();
    const clientX = args.point ? args.point[0] : r.left + r.width / 2;
    const clientY = args.point ? args.point[1] : r.top + r.height / 2;
    const ev = (type) =>
      new DragEvent(type, { bubbles: true, cancelable: true, composed: true, dataTransfer: dt, clientX, clientY });
    el.dispatchEvent(ev('dragenter'));
    el.dispatchEvent(ev('dragover'));
    const dropEv = ev('drop');
    const notCancelled = el.dispatchEvent(dropEv);
    return {
      ref: args.ref,
      mode: 'drop',
      accepted: !notCancelled || dropEv.defaultPrevented,
      files: files.map((f) => ({ name: f.name, size: f.size, type: f.type })),
    };
  };

  /** args: {names}: the page's permission states (navigator.permissions). */
  P.ops.permissions = (args) => {
    const names = args.names || [];
    return Promise.all(
      names.map(async (name) => {
        try {
          const st = await navigator.permissions.query({ name });
          return [name, st.state];
        } catch {
          return [name, 'unsupported'];
        }
      }),
    ).then((pairs) => ({ origin: location.origin, secureContext: isSecureContext, states: Object.fromEntries(pairs) }));
  };

  /**
   * args: {calls: [[op, args], ...]}: several ops in one call into the page
   * (each call is a round trip through the browser, 2-10 ms on a busy
   * machine): a click's locate and the watch of settle.js, form_input's
   * watch, fill and report. In order; the first that fails ends the batch.
   * Answers [{ok: true, value} | {ok: false, error}], one per op run.
   */
  P.ops.batch = (args) => {
    const calls = args.calls || [];
    const out = [];
    const failed = (e) => out.push({ ok: false, error: String((e && e.message) || e) });
    const from = (i) => {
      for (; i < calls.length; i++) {
        const [op, opArgs] = calls[i];
        if (op === 'batch' || !Object.hasOwn(P.ops, op)) {
          failed(new Error(`unknown page agent op ${op}`));
          return out;
        }
        let v;
        try {
          v = P.ops[op](opArgs || {});
        } catch (e) {
          failed(e);
          return out;
        }
        if (v && typeof v.then === 'function') {
          const next = i + 1;
          return v.then(
            (value) => {
              out.push({ ok: true, value });
              return from(next);
            },
            (e) => {
              failed(e);
              return out;
            },
          );
        }
        out.push({ ok: true, value: v });
      }
      return out;
    };
    return from(0);
  };

  /** The scroll position and the viewport's and the page's sizes. */
  P.ops.scrollInfo = () => ({
    scrollX: Math.round(scrollX),
    scrollY: Math.round(scrollY),
    width: innerWidth,
    height: innerHeight,
    pageWidth: document.documentElement.scrollWidth,
    pageHeight: document.documentElement.scrollHeight,
  });
})();
