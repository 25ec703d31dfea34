// Element refs ("ref_12"): the same element keeps the same ref for the
// document's lifetime, and a ref is never given to another element. The
// registry lives on the isolated world's globalThis under
// __browserBridgeAgent, {next, byEl: WeakMap<Element, ref>, byRef:
// Map<ref, WeakRef<Element>>}, created once per document and never replaced
// (injecting the scripts again keeps it), so refs from an earlier read_page
// or find still work.
(() => {
  'use strict';
  const P = globalThis.__browserBridgePage;
  const G = globalThis;
  const S = G.__browserBridgeAgent || (G.__browserBridgeAgent = { next: 1, byEl: new WeakMap(), byRef: new Map() });

  /** The element's ref, given on first sight. */
  function refOf(el) {
    let r = S.byEl.get(el);
    if (r) {
      const w = S.byRef.get(r);
      if (w && w.deref() === el) return r;
    }
    r = 'ref_' + S.next++;
    S.byEl.set(el, r);
    S.byRef.set(r, new WeakRef(el));
    if (S.byRef.size > 20000) {
      for (const [k, v] of S.byRef) if (!v.deref() || v.deref().isConnected === false) S.byRef.delete(k);
    }
    return r;
  }

  /** The element of a ref, or null when it is gone or out of the document. */
  function elOf(ref) {
    const w = S.byRef.get(ref);
    const el = w && w.deref();
    if (!el) {
      S.byRef.delete(ref);
      return null;
    }
    if (el.isConnected === false) return null;
    return el;
  }

  /** elOf, or an error that tells the model what to do. */
  function needEl(ref) {
    const el = elOf(ref);
    if (!el) {
      throw new Error(
        `element ${ref} not found: the page changed or navigated since it was read; call read_page or find again`,
      );
    }
    return el;
  }

  /**
   * Runs fn, then forgets the refs it gave: the warm-up (warm.js) reads
   * elements that are not the page's, and the page's refs go on from the
   * same number as without it.
   */
  function scratch(fn) {
    const next = S.next;
    try {
      return fn();
    } finally {
      for (let n = next; n < S.next; n++) S.byRef.delete('ref_' + n);
      S.next = next;
    }
  }

  P.refs = { refOf, elOf, needEl, scratch };
  P.ops.refOf = (args) => (args.elements || []).map(refOf);
  P.ops.elOf = (args) => elOf(args.ref);
})();
