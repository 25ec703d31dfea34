// The page agent's namespace, loaded first. The page agent is a set of
// classic scripts (not modules) that content/agent.js injects with
// chrome.scripting.executeScript({files}) into the extension's ISOLATED world
// of a page, in the order of PAGE_SCRIPTS there. Each adds its part to one
// object on the isolated world's globalThis:
//
//   globalThis.__browserBridgePage = {
//     ops:   {name: (args) => value},  what the worker can call (run below)
//     run(op, args)                    calls an op: {ok: true, value} or {ok: false, error}
//     token                            which worker build loaded these scripts (agent.js sets it)
//     util, refs, a11y                 helpers the op files share
//   }
//
// Every file is wrapped in a function, so that injecting it again into the
// same world (a classic script's top-level let/const would then throw
// "already declared") only replaces what it defined. The element refs live
// apart, in globalThis.__browserBridgeAgent (refs.js), which no file
// replaces: a ref stays the same for the same element for the document's
// lifetime, whatever is injected again.
(() => {
  'use strict';
  const P = globalThis.__browserBridgePage || (globalThis.__browserBridgePage = {});
  P.ops = P.ops || {};

  /**
   * Runs an op. Results travel as {ok: true, value} or {ok: false, error},
   * because an exception thrown in an injected function does not reach the
   * caller; a promise resolves to one of the two.
   */
  P.run = (op, args) => {
    P.called = true; // the code is warm now: no warm-up (warm.js)
    const wrapErr = (e) => ({ ok: false, error: scrub(String((e && e.message) || e)) });
    try {
      const fn = Object.hasOwn(P.ops, op) ? P.ops[op] : null;
      if (!fn) throw new Error(`unknown page agent op ${op}`);
      const v = fn(args || {});
      if (v && typeof v.then === 'function') return v.then((value) => ({ ok: true, value: scrub(value) }), wrapErr);
      return { ok: true, value: scrub(v) };
    } catch (e) {
      return wrapErr(e);
    }
  };

  // No result leaves the page with the value of one of its password fields
  // in it, whatever the op (hidden.js).
  const scrub = (v) => {
    const H = P.hidden;
    if (!H || typeof document === 'undefined') return v;
    return H.redactDeep(v, H.secretValues());
  };

  /**
   * Collapses white space, drops zero-width characters (pages put them in
   * names to allow line breaks; a model would copy them into its queries),
   * and cuts to max characters (the last one an ellipsis).
   */
  const clean = (s, max = 120) => {
    s = String(s == null ? '' : s)
      .replace(/[\u200b-\u200d\u2060\ufeff]/g, '')
      .replace(/\s+/g, ' ')
      .trim();
    return s.length > max ? s.slice(0, max - 1) + '…' : s;
  };

  /**
   * Lines of output under a budget of characters (each line counts its
   * newline). The line that does not fit is cut to what is left, with an
   * ellipsis, so a long paragraph at the end is shown in part rather than
   * dropped; nothing is taken after it.
   */
  const lineBuffer = (maxChars) => {
    const lines = [];
    let chars = 0;
    const b = {
      truncated: false,
      get chars() {
        return chars;
      },
      push(s) {
        if (b.truncated) return false;
        if (chars + s.length + 1 <= maxChars) {
          lines.push(s);
          chars += s.length + 1;
          return true;
        }
        b.truncated = true;
        const room = maxChars - chars - 1;
        if (room >= 40) {
          let cut = room - 1;
          const c = s.charCodeAt(cut - 1);
          if (c >= 0xd800 && c <= 0xdbff) cut--; // never split a surrogate pair
          lines.push(s.slice(0, cut) + '…');
          chars += cut + 2;
        }
        return false;
      },
      text: () => lines.join('\n'),
    };
    return b;
  };

  P.util = { clean, lineBuffer };
})();
