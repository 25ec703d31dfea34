// get_page_text's text: the readable text of the page (the main article or
// <main> when there is one, else the body), of a ref or of a selector.
(() => {
  'use strict';
  const P = globalThis.__browserBridgePage;
  const { needEl } = P.refs;
  const { isVisible } = P.a11y;

  /** args: {ref?, selector?, whole?}. Returns {url, title, source, text}. */
  P.ops.text = (args) => {
    let root = null,
      source = 'body';
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
    let text = root.innerText !== undefined ? root.innerText : root.textContent;
    text = String(text || '')
      .replace(/[ \t\u00a0]+\n/g, '\n')
      .replace(/\n{3,}/g, '\n\n')
      .trim();
    return { url: location.href, title: document.title, source, text };
  };
})();
