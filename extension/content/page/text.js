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
      const display = inHidden || why ? 'block' : getComputedStyle(node).display;
      const block = BREAKS.test(display) || /^H[1-6]$|^P$/.test(node.tagName);
      if (block) parts.push('\n');
      if (why) parts.push(`[hidden (${why}): `);
      for (const k of node.shadowRoot ? node.shadowRoot.childNodes : node.childNodes) visit(k, inHidden || !!why);
      if (why) parts.push(']');
      if (display === 'table-cell') parts.push('\t');
      if (block) parts.push(/^H[1-6]$|^P$/.test(node.tagName) ? '\n\n' : '\n');
    };
    visit(root, false);
    return parts
      .join('')
      .split('\n')
      .map((l) => l.replace(/[ \t]+/g, ' ').trim())
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
    if (!found.length) {
      // Nothing hidden: the browser's own layout of the text, as always.
      text = root.innerText !== undefined ? root.innerText : root.textContent;
    } else {
      const byEl = new Map(found.map((h) => [h.el, h.why]));
      text = walkText(root, byEl, !!args.includeHidden);
    }
    text = String(text || '')
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
