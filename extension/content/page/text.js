// get_page_text's text: the readable text of the page (the main article or
// <main> when there is one, else the body), of a ref or of a selector.
// With a main part, the frame around it (header, navigation, sidebar,
// footer) is left out and named, so the answer can say how to get it.
// Text the person cannot see (hidden.js) is left out, or with includeHidden
// kept and marked "[hidden (why): …]".
(() => {
  'use strict';
  const P = globalThis.__browserBridgePage;
  const { needEl } = P.refs;
  const { isVisible, roleOf } = P.a11y;

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

  // Landmarks that frame a page's main part: left out with it, and named.
  const FRAME = /^(banner|navigation|complementary|contentinfo|search)$/;
  const FRAME_SELECTOR =
    'header,nav,aside,footer,[role=banner],[role=navigation],[role=complementary],[role=contentinfo],[role=search]';
  // What the page says now: never left out with the frame (a dialog over
  // the page, an alert, a "Saved" status).
  const LIVE =
    'dialog[open],[role=dialog],[role=alertdialog],[role=alert],[role=status],[aria-live=polite],[aria-live=assertive],output';
  // Text outside the main part that is no landmark of the frame: above this
  // share of the main part's, the page may not be what its landmarks say, and
  // it is read whole.
  const MAX_OTHER_SHARE = 0.25;

  const visibleText = (el) => (P.hidden.reason(el) ? '' : (el.innerText || '').trim());

  /**
   * What a page shows around its main part root, in page order: each
   * visible element beside root or beside one of its ancestors, as {kind,
   * chars}, kind being its frame landmark's role (or that of the first one
   * inside it) or "other". null when something there must not be left out:
   * a dialog, an alert or a live message with text, or more other text than
   * MAX_OTHER_SHARE of root's.
   */
  function frameAround(root, rootChars) {
    const parts = [];
    let other = 0;
    for (let el = root; el.parentElement && el !== document.body; el = el.parentElement) {
      for (const sib of el.parentElement.children) {
        if (sib === el || SKIP.has(sib.tagName)) continue;
        const chars = visibleText(sib).length;
        if (!chars) continue;
        const live = sib.matches(LIVE) ? [sib] : [...sib.querySelectorAll(LIVE)];
        if (live.some((l) => visibleText(l))) return null;
        let role = roleOf(sib);
        if (!FRAME.test(role)) {
          const inner = sib.querySelector(FRAME_SELECTOR);
          role = inner && FRAME.test(roleOf(inner)) ? roleOf(inner) : 'other';
        }
        if (role === 'other') other += chars;
        parts.push({ el: sib, kind: role, chars });
      }
    }
    if (other > MAX_OTHER_SHARE * rootChars) return null;
    parts.sort((a, b) => (a.el.compareDocumentPosition(b.el) & Node.DOCUMENT_POSITION_FOLLOWING ? -1 : 1));
    return parts.map(({ kind, chars }) => ({ kind, chars }));
  }

  /**
   * The page's main part when it has one: a single visible <article> or its
   * <main> (role=main), holding more than 40% of the page's text, with the
   * frame left out around it (frameAround). null: read the whole body.
   */
  function mainPart() {
    const bodyLen = ((document.body && document.body.innerText) || '').length;
    const arts = [...document.querySelectorAll('article')].filter(isVisible);
    const main = document.querySelector('main,[role=main]');
    const candidates = [];
    if (arts.length === 1) candidates.push({ root: arts[0], source: 'article' });
    if (main && isVisible(main)) candidates.push({ root: main, source: 'main' });
    for (const c of candidates) {
      const chars = c.root.innerText.length;
      if (chars <= 0.4 * bodyLen) continue;
      const leftOut = frameAround(c.root, chars);
      if (leftOut) return { ...c, leftOut };
    }
    return null;
  }

  /**
   * args: {ref?, selector?, whole?, includeHidden?}. Returns {url, origin,
   * title, source, leftOut, text, hidden}; leftOut lists what the main part
   * left out ([{kind, chars}], frameAround), empty when the text is all of
   * root.
   */
  P.ops.text = (args) => {
    let root = null,
      source = 'body',
      leftOut = [];
    P.hidden.fresh();
    if (args.ref) {
      root = needEl(args.ref);
      source = args.ref;
    } else if (args.selector) {
      root = document.querySelector(args.selector);
      if (!root) throw new Error(`no element matches ${args.selector}`);
      source = args.selector;
    } else if (!args.whole) {
      const part = mainPart();
      if (part) ({ root, source, leftOut } = part);
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
      leftOut,
      text,
      hidden: P.hidden.summary(found),
    };
  };
})();
