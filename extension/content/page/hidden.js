// What the person cannot see, and what they must never have read out:
// hidden text (the commonest carrier of prompt injection: instructions in
// white on white, off screen, clipped, aria-hidden) and the values of
// password fields. read_page and get_page_text leave hidden text out unless
// asked (include_hidden), and every op's result is scrubbed of the page's
// password values before it leaves the page (base.js run()).
//
// The rules look at one element at a time (its computed style and box);
// the walks in snapshot.js and text.js go top-down, so an element under a
// hidden one is hidden too. Reading style is most of the filter's cost
// (about 1 µs a property an element), so each element is decided once per
// op and reads only what can hide it: checkVisibility for display,
// visibility and opacity; overflow only for a box of 1px or less; font size,
// text-indent and colour only for an element with text of its own (its
// descendants inherit them and are decided themselves).
(() => {
  'use strict';
  const P = globalThis.__browserBridgePage;

  /** What stands in for a secret in any result. */
  const SECRET_MARK = '[password hidden]';
  /** Shorter values are masked in their own field, but not searched for in other text (they would match ordinary words). */
  const MIN_SCAN = 4;

  // Parsed colours by their computed string: a page uses a few colours on
  // many elements. Bounded, as a long-lived page may animate through many.
  const colours = new Map();
  const MAX_COLOURS = 512;

  /**
   * Parses a computed colour, "rgb(1, 2, 3)" or "rgba(1, 2, 3, 0.5)", to
   * [r, g, b, a]; null for others. The array is shared: do not change it.
   */
  function parseColour(s) {
    const key = String(s || '');
    let c = colours.get(key);
    if (c === undefined) {
      if (colours.size >= MAX_COLOURS) colours.clear();
      c = parseColourString(key);
      colours.set(key, c);
    }
    return c;
  }

  function parseColourString(s) {
    const m = /^rgba?\(\s*([\d.]+)[,\s]+([\d.]+)[,\s]+([\d.]+)(?:\s*[,/]\s*([\d.]+%?))?\s*\)$/.exec(
      String(s || '').trim(),
    );
    if (!m) return null;
    let a = m[4] === undefined ? 1 : parseFloat(m[4]);
    if (m[4] && m[4].endsWith('%')) a /= 100;
    return [Number(m[1]), Number(m[2]), Number(m[3]), a];
  }

  /** Whether text of colour fg is unreadable on bg: transparent, or (nearly) the same colour. */
  function unreadable(fg, bg) {
    if (!fg) return false;
    if (fg[3] === 0) return true;
    if (!bg) return false;
    const d = Math.abs(fg[0] - bg[0]) + Math.abs(fg[1] - bg[1]) + Math.abs(fg[2] - bg[2]);
    return d < 24;
  }

  /**
   * Why an element is hidden, from its computed style and box alone (no
   * ancestors): '' when it shows. s: {display, visibility, opacity,
   * fontSize, clip, clipPath, overflow, textIndent}, a CSSStyleDeclaration
   * in a page, where each property is read only when a rule needs it (a read
   * costs about 1 µs, most of the filter's time); box: {width, height, left,
   * top, right, bottom} in page coordinates; page: {width}. hasChildren: a
   * zero-size box can still show its children. opts.checked: display,
   * visibility and opacity are known to show (checkVisibility said so);
   * opts.text: false when the element holds no text of its own, so that the
   * rules that hide only text (font size, text-indent) are not read: its
   * descendants inherit those properties and are looked at themselves.
   */
  function reasonFromStyle(s, box, page, hasChildren, { checked = false, text = true } = {}) {
    return boxReason(s, box.width, box.height, box.left, box.right, box.bottom, page.width, hasChildren, checked, text);
  }

  // clip: rect(0 0 0 0), and clip-path insets of half or more or a circle of no radius, hide what they clip.
  const CLIP_NOTHING = /^rect\(\s*0(px)?[,\s]+0(px)?[,\s]+0(px)?[,\s]+0(px)?\s*\)$/;
  const CLIP_PATH_INSET = /inset\(\s*(50|100)%/;
  const CLIP_PATH_POINT = /circle\(\s*0(px)?[\s)]/;

  /**
   * reasonFromStyle with the box as numbers (left, right, bottom in page
   * coordinates), so that the walk's call makes no objects: it runs once
   * for every element a read judges.
   */
  function boxReason(s, width, height, left, right, bottom, pageWidth, hasChildren, checked, text) {
    if (!checked) {
      const why = ownCSSReason(s);
      if (why) return why;
    }
    // Overflow matters only to a box of 1px or less in a dimension: read it only then.
    const tiny = width <= 1 || height <= 1;
    const overflow = tiny ? s.overflow : '';
    const clips = !!overflow && overflow !== 'visible';
    if (clips && width <= 1 && height <= 1) return 'clipped';
    const clip = s.clip;
    if (clip && clip !== 'auto' && CLIP_NOTHING.test(clip)) return 'clipped';
    const clipPath = s.clipPath;
    if (clipPath && clipPath !== 'none' && (CLIP_PATH_INSET.test(clipPath) || CLIP_PATH_POINT.test(clipPath))) {
      return 'clipped';
    }
    if (width === 0 && height === 0 && !hasChildren && s.display !== 'contents') return 'zero-size';
    if (clips && (width === 0 || height === 0)) return 'zero-size';
    if (width > 0 || height > 0) {
      if (right <= 0 || bottom <= 0 || (pageWidth > 0 && left >= pageWidth)) return 'off-screen';
    }
    if (!text) return '';
    if (parseFloat(s.fontSize) < 1) return 'font-size:0';
    if (parseFloat(s.textIndent) <= -999) return 'off-screen';
    return '';
  }

  // What one op knows of the page, kept for the synchronous task it runs
  // in and forgotten at the next microtask, so no later op sees a stale
  // page: the page's width and scroll offsets (read beside each element's
  // box they made the walk 1.5 times as slow), each element's verdict (a
  // walk, its inline runs and its labels ask about the same elements
  // again), the effective background of each element, and each element's
  // computed style (one object per element and op: the rules, the
  // background's ancestors and a11y.js's cursor test read the same ones).
  // The page's size is read when a box first needs it (an op that judges
  // only hidden elements, or the warm-up's detached ones, reads none).
  let task = null;
  function taskState() {
    if (!task) {
      let page = null;
      task = {
        get page() {
          return page || (page = { width: document.documentElement.scrollWidth, scrollX, scrollY });
        },
        why: new Map(),
        bg: new Map(),
        style: new Map(),
      };
      queueMicrotask(() => {
        task = null;
      });
    }
    return task;
  }

  /** getComputedStyle(el), made once per element and op (a live object: it follows the page). */
  function styleOf(el) {
    const cache = taskState().style;
    let s = cache.get(el);
    if (s === undefined) {
      s = getComputedStyle(el);
      cache.set(el, s);
    }
    return s;
  }

  /** The colour behind an element's text: the first ancestor's opaque background; null when an image may be behind it. */
  function backgroundOf(el) {
    const cache = taskState().bg;
    const chain = [];
    let bg = null;
    for (let e = el; e && e.nodeType === 1; e = e.parentElement || (e.parentNode && e.parentNode.host)) {
      if (cache.has(e)) {
        bg = cache.get(e);
        break;
      }
      chain.push(e);
      const cs = styleOf(e);
      const c = parseColour(cs.backgroundColor);
      // An image under an opaque colour still shows the colour only where the image is transparent: either may be behind.
      if (cs.backgroundImage !== 'none' && cs.backgroundImage) {
        bg = null;
        break;
      }
      if (c && c[3] >= 0.9) {
        bg = c;
        break;
      }
      if (e === document.documentElement) bg = [255, 255, 255, 1]; // the canvas
    }
    for (const e of chain) cache.set(e, bg);
    return bg;
  }

  /** Whether el has a text node of its own that is not only white space. */
  function hasOwnText(el) {
    for (let n = el.firstChild; n; n = n.nextSibling) if (n.nodeType === 3 && /\S/.test(n.data)) return true;
    return false;
  }

  /** Whether a style alone hides its element by display, visibility or opacity, and by which ('' when not). */
  function ownCSSReason(s) {
    if (s.display === 'none') return 'display:none';
    if (s.visibility === 'hidden' || s.visibility === 'collapse') return 'visibility:hidden';
    if (parseFloat(s.opacity) === 0) return 'opacity:0';
    return '';
  }

  /** The name of what checkVisibility found hidden: el's own display, visibility or opacity, else an ancestor's. */
  function cssReason(el) {
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) {
      const why = ownCSSReason(styleOf(e));
      if (why) return why;
    }
    return 'display:none'; // no box for another reason (content-visibility of an ancestor)
  }

  /** Why el itself is hidden from the person ('' when it shows); of its ancestors, display, visibility and opacity count. */
  function reason(el) {
    const memo = taskState().why;
    let why = memo.get(el);
    if (why === undefined) {
      why = compute(el);
      memo.set(el, why);
    }
    return why;
  }

  // checkVisibility's options: display (its own and its ancestors'), visibility, and opacity 0 here or above.
  const CHECK_CSS = Object.freeze({ checkVisibilityCSS: true, checkOpacity: true });

  function compute(el) {
    if (el.getAttribute && el.getAttribute('aria-hidden') === 'true') return 'aria-hidden';
    if (el.tagName === 'OPTION' || el.tagName === 'OPTGROUP') {
      // A select draws its options: they have no box of their own, so checkVisibility says no for every
      // one. Only their own style hides them from the list the person opens (the select's is its own element).
      return ownCSSReason(styleOf(el));
    }
    const canCheck = typeof el.checkVisibility === 'function';
    // One call answers display (the element's and its ancestors'), visibility and opacity (0 here or above).
    if (canCheck && !el.checkVisibility(CHECK_CSS)) {
      // An element of display: contents has no box of its own (checkVisibility says no) and shows its
      // children, unless an ancestor hides them.
      if (styleOf(el).display !== 'contents') return cssReason(el);
      const p = el.parentElement;
      if (p && !p.checkVisibility(CHECK_CSS)) return cssReason(p);
    }
    const page = taskState().page;
    const r = el.getBoundingClientRect();
    const cs = styleOf(el);
    const text = hasOwnText(el);
    const why = boxReason(
      cs,
      r.width,
      r.height,
      r.left + page.scrollX,
      r.right + page.scrollX,
      r.bottom + page.scrollY,
      page.width,
      el.firstElementChild !== null,
      canCheck,
      text,
    );
    if (why) return why;
    if (!text) return '';
    // Transparent text (or a colour not parsed) needs no background.
    const fg = parseColour(cs.color);
    if (fg && (fg[3] === 0 || unreadable(fg, backgroundOf(el)))) return 'same colour as background';
    return '';
  }

  /** Why el or an ancestor up to root is hidden ('' when it all shows). */
  function chain(el, root) {
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) {
      const why = reason(e);
      if (why) return why;
      if (e === root) break;
    }
    return '';
  }

  /** The hidden elements under root, topmost only: [{el, why}]. */
  function hiddenUnder(root, skip) {
    const out = [];
    const visit = (el) => {
      for (const k of el.children) {
        if (skip && skip.has(k.tagName)) continue;
        const why = reason(k);
        if (why) {
          out.push({ el: k, why });
          continue;
        }
        visit(k);
        if (k.shadowRoot) visit(k.shadowRoot);
      }
    };
    visit(root);
    return out;
  }

  /**
   * Runs the rules for a shown element on el, whatever checkVisibility says
   * (el is one of warm.js's detached sample elements, which it says no for):
   * their code is then compiled and has met style and box objects before
   * the first read of a page needs it.
   */
  function warmRules(el) {
    const r = el.getBoundingClientRect();
    const cs = getComputedStyle(el);
    const box = { width: r.width, height: r.height, left: r.left, top: r.top, right: r.right, bottom: r.bottom };
    const text = hasOwnText(el);
    reasonFromStyle(cs, box, { width: 0 }, el.firstElementChild !== null, { checked: true, text });
    unreadable(parseColour(cs.color) || parseColour('rgb(1, 2, 3)'), backgroundOf(el));
    ownCSSReason(cs);
  }

  /** Starts a walk: forgets what an earlier walk in the same task learnt (the page may have changed). */
  function fresh() {
    task = null;
  }

  /** {count, reasons: {why: n}} of a list of hidden elements. */
  function summary(list) {
    const reasons = {};
    for (const h of list) reasons[h.why] = (reasons[h.why] || 0) + 1;
    return { count: list.length, reasons };
  }

  // --- secrets ---

  /** Whether el holds a secret: a password field, or one the page marks as a password (autocomplete). */
  function isSecret(el) {
    if (!el || el.tagName !== 'INPUT') return false;
    if ((el.getAttribute('type') || '').toLowerCase() === 'password') return true;
    return /\b(current|new)-password\b/i.test(el.getAttribute('autocomplete') || '');
  }

  /** The values of the document's password fields (its own, its open shadow roots' and same-origin frames'). */
  function secretValues(doc = document) {
    const out = new Set();
    const scan = (root) => {
      for (const el of root.querySelectorAll('input')) if (isSecret(el) && el.value) out.add(el.value);
      for (const f of root.querySelectorAll('iframe,frame')) {
        try {
          if (f.contentDocument) scan(f.contentDocument);
        } catch {
          /* another origin: not ours to read */
        }
      }
    };
    scan(doc);
    // Open shadow roots: a field in a web component is still a field.
    if (typeof doc.createTreeWalker !== 'function') return [...out];
    const walker = doc.createTreeWalker(doc.documentElement || doc, 1);
    let n = 0;
    for (let e = walker.currentNode; e && n < 50000; e = walker.nextNode(), n++) if (e.shadowRoot) scan(e.shadowRoot);
    return [...out];
  }

  /** s with every secret (of MIN_SCAN characters or more) replaced by SECRET_MARK. */
  function redactString(s, secrets) {
    let out = s;
    for (const v of secrets) {
      if (v.length >= MIN_SCAN && out.includes(v)) out = out.split(v).join(SECRET_MARK);
    }
    return out;
  }

  /** A copy of a JSON-like value with every string (keys too) scrubbed of secrets. */
  function redactDeep(v, secrets) {
    if (!secrets.length) return v;
    if (typeof v === 'string') return redactString(v, secrets);
    if (Array.isArray(v)) return v.map((x) => redactDeep(x, secrets));
    if (v && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) {
      const o = {};
      for (const [k, x] of Object.entries(v)) o[redactString(k, secrets)] = redactDeep(x, secrets);
      return o;
    }
    return v;
  }

  P.hidden = {
    SECRET_MARK,
    MIN_SCAN,
    parseColour,
    unreadable,
    reasonFromStyle,
    reason,
    styleOf,
    chain,
    hiddenUnder,
    fresh,
    warmRules,
    summary,
    isSecret,
    secretValues,
    redactString,
    redactDeep,
  };

  /** args: {ref?}: whether typing now would go into a password field (the ref's element, else the focused one). */
  P.ops.secretTarget = (args) => {
    let el = args.ref ? P.refs.needEl(args.ref) : document.activeElement;
    while (!args.ref && el && el.shadowRoot && el.shadowRoot.activeElement) el = el.shadowRoot.activeElement;
    if (!args.ref && el && el.tagName === 'IFRAME') {
      try {
        el = el.contentDocument.activeElement;
      } catch {
        /* another origin */
      }
    }
    return { secret: isSecret(el), origin: location.origin };
  };

  /** args: {text}: the text with the page's password values replaced (javascript_tool's results). */
  P.ops.redact = (args) => ({ text: redactString(String(args.text || ''), secretValues()) });
})();
