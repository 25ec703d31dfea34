// find: elements by ref, by CSS selector, or by words and role words
// ("search box", 'button "Add to cart"'), scored by heuristics in the page.
(() => {
  'use strict';
  const P = globalThis.__browserBridgePage;
  const { elOf } = P.refs;
  const { roleOf, nameOf, textOf, isInteractive, describe, rectOf, inViewport } = P.a11y;
  // Shown to the person: the element and every ancestor (hidden.js).
  const isVisible = (el) => !P.hidden.chain(el);

  /** args: {query, limit? (10)}. Returns {mode: 'ref'|'selector'|'text', matches, total}. */
  P.ops.find = (args) => {
    const query = String(args.query || '').trim();
    P.hidden.fresh();
    const limit = args.limit || 10;
    const out = [];
    const pushEl = (el, score) => {
      const d = describe(el);
      const r = rectOf(el);
      out.push({ ...d, rect: r, inViewport: inViewport(r), score });
    };
    if (/^ref_\d+$/.test(query)) {
      const el = elOf(query);
      if (el) pushEl(el, 100);
      return { mode: 'ref', matches: out, total: out.length };
    }
    let bySelector;
    try {
      bySelector = document.querySelectorAll(query);
    } catch {
      bySelector = null;
    }
    if (bySelector && bySelector.length) {
      const vis = [...bySelector].filter(isVisible);
      for (const el of vis.slice(0, limit)) pushEl(el, 100);
      return { mode: 'selector', matches: out, total: vis.length };
    }
    const ROLE_WORDS = {
      button: ['button'],
      btn: ['button'],
      link: ['link'],
      links: ['link'],
      input: ['textbox', 'searchbox', 'combobox', 'spinbutton'],
      field: ['textbox', 'searchbox', 'combobox', 'spinbutton'],
      textbox: ['textbox', 'searchbox'],
      box: ['textbox', 'searchbox', 'checkbox'],
      textarea: ['textbox'],
      search: ['searchbox'],
      checkbox: ['checkbox'],
      radio: ['radio'],
      dropdown: ['combobox', 'listbox'],
      select: ['combobox', 'listbox'],
      combobox: ['combobox'],
      menu: ['menu', 'menuitem', 'combobox'],
      image: ['img'],
      img: ['img'],
      picture: ['img'],
      icon: ['img', 'button'],
      logo: ['img', 'link'],
      heading: ['heading'],
      header: ['heading', 'banner'],
      title: ['heading'],
      tab: ['tab'],
      slider: ['slider'],
      switch: ['switch', 'checkbox'],
      toggle: ['switch', 'checkbox', 'button'],
      table: ['table'],
      row: ['row'],
      list: ['list'],
      item: ['listitem', 'option', 'menuitem'],
      option: ['option'],
      dialog: ['dialog'],
      modal: ['dialog'],
      form: ['form'],
      navigation: ['navigation'],
      nav: ['navigation'],
      paragraph: ['paragraph'],
    };
    const STOP = new Set([
      'the',
      'a',
      'an',
      'to',
      'for',
      'of',
      'on',
      'in',
      'with',
      'that',
      'which',
      'is',
      'and',
      'or',
      'at',
      'by',
      'element',
      'elements',
      'called',
      'named',
      'labeled',
      'labelled',
      'saying',
      'says',
      'containing',
      'contains',
      'text',
      'this',
      'page',
      'near',
      'all',
    ]);
    const tokens = query
      .toLowerCase()
      .replace(/["'“”‘’]/g, ' ')
      .split(/[^\p{L}\p{N}_@.-]+/u)
      .filter((t) => t && !STOP.has(t));
    const quoted = (query.match(/["“']([^"”']+)["”']/) || [])[1];
    const roleWanted = new Set();
    const words = [];
    for (const t of tokens) {
      if (ROLE_WORDS[t]) ROLE_WORDS[t].forEach((r) => roleWanted.add(r));
      else words.push(t);
    }
    const all = document.body ? document.body.querySelectorAll('*') : [];
    const scored = [];
    const ql = query.toLowerCase();
    for (const el of all) {
      const tag = el.tagName;
      if (tag === 'SCRIPT' || tag === 'STYLE' || tag === 'NOSCRIPT' || tag === 'TEMPLATE') continue;
      const role = roleOf(el);
      const interactive = isInteractive(el, role);
      if (role === 'generic' && !interactive) {
        // Plain containers only count for their own direct text.
        const own = [...el.childNodes]
          .filter((n) => n.nodeType === 3)
          .map((n) => n.textContent)
          .join(' ')
          .trim();
        if (!own) continue;
      }
      let score = 0;
      const name = nameOf(el, role).toLowerCase();
      const hay = [
        name,
        el.getAttribute('placeholder'),
        el.getAttribute('name'),
        el.id,
        el.getAttribute('title'),
        el.getAttribute('alt'),
        el.getAttribute('aria-label'),
        el.getAttribute('data-testid'),
        typeof el.className === 'string' ? el.className : '',
        role === 'generic' || role === 'paragraph' || role === 'listitem' || role === 'cell' ? textOf(el, 300) : '',
      ]
        .filter(Boolean)
        .join(' ')
        .toLowerCase();
      if (quoted && name.includes(quoted.toLowerCase())) score += 8;
      if (name && name === ql) score += 10;
      for (const w of words) {
        if (!hay.includes(w)) continue;
        score += name.includes(w) ? 3 : 1;
        if (
          new RegExp(`(^|[^\\p{L}\\p{N}])${w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}($|[^\\p{L}\\p{N}])`, 'u').test(
            name,
          )
        ) {
          score += 1;
        }
      }
      if (words.length && score === 0) continue;
      if (roleWanted.size) {
        if (roleWanted.has(role)) score += 3;
        else if (!words.length) continue;
      }
      if (score <= 0) continue;
      if (interactive) score += 1;
      if (!isVisible(el)) continue;
      scored.push({ el, score });
    }
    scored.sort((a, b) => b.score - a.score);
    // Drop an ancestor when a descendant with the same or better score matched.
    const picked = [];
    for (const s of scored) {
      if (picked.some((p) => p.el.contains(s.el) || s.el.contains(p.el))) continue;
      picked.push(s);
      if (picked.length >= limit) break;
    }
    for (const p of picked) pushEl(p.el, p.score);
    return { mode: 'text', matches: out, total: scored.length };
  };
})();
