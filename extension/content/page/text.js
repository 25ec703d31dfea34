// get_page_text's text: the readable text of the page (the main article or
// <main> when there is one, else the body), of a ref or of a selector.
// Text the person cannot see (hidden.js) is left out, or with includeHidden
// kept and marked "[hidden (why): …]".
(() => {
  'use strict';
  const P = globalThis.__browserBridgePage;
  const { needEl } = P.refs;
  const { isVisible } = P.a11y;

  const SKIP = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'HEAD', 'META', 'LINK']);
  const BREAKS = /^(block|flex|grid|list-item|table|table-row|table-caption|flow-root|inline-grid)$/;
  // Cells of a table or of an ARIA grid end with CELL_END, written as " | "
  // between the cells of a row (rows are lines), so that 1001 and "Guido
  // Sammet" stay two values.
  const CELL_END = '\u2063'; // INVISIBLE SEPARATOR: not in page text (icon fonts use the private-use area)
  const CELL_ROLES = /^(cell|gridcell|columnheader|rowheader)$/;
  const TABLES = 'table,[role=table],[role=grid],[role=treegrid]';

  /**
   * The text under root as innerText lays it out, walked by hand so that
   * hidden elements can be left out (hidden: el → why) or marked.
   */
  function walkText(root, hidden, includeHidden) {
    const parts = [];
    const visit = (node, inHidden) => {
      if (node.nodeType === 3) {
        const t = node.textContent.replace(/\s+/g, ' ');
        if (t.trim() || (t && parts.length && !/\s$/.test(parts[parts.length - 1]))) parts.push(t);
        return;
      }
      if (node.nodeType === 11) {
        for (const k of node.childNodes) visit(k, inHidden);
        return;
      }
      if (node.nodeType !== 1 || SKIP.has(node.tagName)) return;
      const why = !inHidden && hidden.get(node);
      if (why && !includeHidden) return;
      if (node.tagName === 'BR') return void parts.push('\n');
      if (node.tagName === 'SELECT' && !why) {
        // The person sees the chosen option, not the list.
        const chosen = [...node.selectedOptions].filter((o) => !hidden.get(o)).map((o) => o.textContent.trim());
        if (chosen.length) parts.push(` ${chosen.join(', ')} `);
        if (includeHidden) {
          for (const o of node.options) {
            if (hidden.get(o)) parts.push(` [hidden (${hidden.get(o)}): ${o.textContent.trim()}] `);
          }
        }
        return;
      }
      const display = inHidden || why ? 'block' : getComputedStyle(node).display;
      const role = node.getAttribute('role') || '';
      const cell = display === 'table-cell' || CELL_ROLES.test(role);
      const row = display === 'table-row' || role === 'row';
      const block = !cell && (row || BREAKS.test(display) || /^H[1-6]$|^P$/.test(node.tagName));
      if (block) parts.push('\n');
      if (why) parts.push(`[hidden (${why}): `);
      for (const k of node.shadowRoot ? node.shadowRoot.childNodes : node.childNodes) visit(k, inHidden || !!why);
      if (why) parts.push(']');
      if (cell) parts.push(CELL_END);
      // A row ends where the next begins: no blank line between rows.
      if (block && !row) parts.push(/^H[1-6]$|^P$/.test(node.tagName) ? '\n\n' : '\n');
    };
    visit(root, false);
    return parts
      .join('')
      .split('\n')
      .map((l) =>
        l
          .replace(/[ \t]+/g, ' ')
          .replace(/(\s*\u2063)+\s*$/, '')
          .replace(/\s*\u2063\s*/g, ' | ')
          .trim(),
      )
      .join('\n');
  }

  /** args: {ref?, selector?, whole?, includeHidden?}. Returns {url, origin, title, source, text, hidden}. */
  P.ops.text = (args) => {
    let root = null,
      source = 'body';
    P.hidden.fresh();
    if (args.ref) {
      root = needEl(args.ref);
      source = args.ref;
    } else if (args.selector) {
      root = document.querySelector(args.selector);
      if (!root) throw new Error(`no element matches ${args.selector}`);
      source = args.selector;
    } else if (!args.whole) {
      const arts = [...document.querySelectorAll('article')].filter(isVisible);
      const main = document.querySelector('main,[role=main]');
      const bodyLen = ((document.body && document.body.innerText) || '').length;
      if (arts.length === 1 && arts[0].innerText.length > 0.4 * bodyLen) {
        root = arts[0];
        source = 'article';
      } else if (main && isVisible(main) && main.innerText.length > 0.4 * bodyLen) {
        root = main;
        source = 'main';
      }
    }
    root = root || document.body || document.documentElement;
    const found = P.hidden.hiddenUnder(root, SKIP);
    const whyRoot = P.hidden.reason(root);
    if (whyRoot) found.unshift({ el: root, why: whyRoot });
    let text;
    if (!found.length && !root.querySelector(TABLES)) {
      // Nothing hidden and no table: the browser's own layout of the text.
      // (innerText runs a grid's cells one per line and a table's together
      // with tabs; walkText writes each row as a line of " | "-joined cells.)
      text = root.innerText !== undefined ? root.innerText : root.textContent;
    } else {
      const byEl = new Map(found.map((h) => [h.el, h.why]));
      text = walkText(root, byEl, !!args.includeHidden);
    }
    text = String(text || '')
      .replace(/[\u200b-\u200d\u2060\ufeff]/g, '')
      .replace(/[ \t\u00a0]+\n/g, '\n')
      .replace(/\n{3,}/g, '\n\n')
      .trim();
    return {
      url: location.href,
      origin: location.origin,
      title: document.title,
      source,
      text,
      hidden: P.hidden.summary(found),
    };
  };
})();
