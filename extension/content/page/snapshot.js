// read_page's snapshot: an outline of the page, one line per element with
// its role, name, value and state and its ref, text in between, under a
// budget of characters. Text is kept whole (a paragraph is one line however
// long); only the budget cuts, and the result says where.
(() => {
  'use strict';
  const P = globalThis.__browserBridgePage;
  const { clean, lineBuffer } = P.util;
  const { refOf, needEl } = P.refs;
  const { NAME_FROM_CONTENT, roleOf, nameOf, labelText, isInteractive, childNodesOf, describe, line } = P.a11y;

  /** The snapshot's budget when the caller gives none, in characters. */
  const DEFAULT_MAX_CHARS = 50000;

  // Elements that are more than a run of inline text (a table's rows are
  // kept apart: textRow writes each on its own line).
  const RICH =
    'a[href],button,input,select,textarea,img,svg,canvas,video,audio,iframe,h1,h2,h3,h4,h5,h6,ul,ol,dl,table,tr,form,nav,main,' +
    'section,article,aside,header,footer,p,li,details,summary,label,fieldset,dialog,[role],[tabindex],[contenteditable],[onclick],[aria-label]';
  const SKIP = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'HEAD', 'META', 'LINK']);
  const INLINE_ROLES = new Set(['generic', 'paragraph', 'listitem', 'cell', 'code', 'blockquote']);

  const whole = (s) => clean(s, Infinity);
  const NOT_SPACE = /\S/;
  // Whether an inline run holds hidden text, which its innerText would show.
  const hiddenInside = (el) => {
    for (const e of el.querySelectorAll('*')) if (P.hidden.reason(e)) return true;
    return false;
  };
  const quote = (s) => s.replace(/"/g, '\\"');
  // A name clean() cut to its 120 characters: the element's text is longer.
  const cutName = (name) => name.length >= 120 && name.endsWith('…');

  /**
   * What a virtualized table, grid or list leaves out, when it says so: its
   * aria-rowcount (or its items' aria-setsize) above the rows it rendered.
   * '' when it does not say, or all are there.
   */
  function missingRows(el, role) {
    let total = 0;
    let shown = 0;
    if (/^(table|grid|treegrid)$/.test(role)) {
      total = Number(el.getAttribute('aria-rowcount'));
      shown = el.querySelectorAll('tr,[role=row]').length;
    } else if (/^(list|listbox|tree|feed)$/.test(role)) {
      const items = el.querySelectorAll('[aria-setsize]');
      total = items.length ? Number(items[0].getAttribute('aria-setsize')) : 0;
      shown = items.length;
    }
    if (!(total > shown)) return '';
    return `${shown} of its ${total} rows are in the page; scroll it (computer scroll at ${refOf(el)}) and read again for the others`;
  }

  /**
   * A row of cells holding only text, as its cells' texts joined by " | "
   * (one line for the row, not a line per cell and text); null for a row a
   * person acts on in a cell, or with something richer than text.
   */
  function textRow(el, why) {
    const cells = [...el.children];
    if (!cells.length || isInteractive(el, 'row')) return null;
    for (const c of cells) {
      if (c.querySelector(RICH) || c.shadowRoot || isInteractive(c, roleOf(c))) return null;
    }
    if (!why && hiddenInside(el)) return null;
    return cells.map((c) => whole(why ? c.textContent : c.innerText)).join(' | ');
  }

  /**
   * Whether a label needs no line of its own: the control it labels shows
   * and its name already says the label's text.
   */
  function labelInName(label) {
    const ctl = label.control;
    if (!ctl || P.hidden.reason(ctl)) return false;
    const said = labelText(label).replace(/…$/, '');
    return !!said && nameOf(ctl, roleOf(ctl)).includes(said);
  }

  /**
   * Whether an element adds only a line to what its one child says: a list
   * item or a heading around a single link or button, a pre around its
   * code. Such a wrapper is read as its child (a list's line still says it
   * is a list; a heading's level is said on its control's line, [h3]).
   * Not when it has a name, text of its own, or more than one child.
   */
  function wrapsOne(el, role) {
    if (role !== 'listitem' && role !== 'code' && role !== 'heading') return false;
    const only = el.firstElementChild;
    if (!only || only !== el.lastElementChild || el.shadowRoot) return false;
    if (el.hasAttribute('aria-label') || el.hasAttribute('aria-labelledby')) return false;
    for (let n = el.firstChild; n; n = n.nextSibling) if (n.nodeType === 3 && /\S/.test(n.data)) return false;
    if (role === 'code') return roleOf(only) === 'code';
    return isInteractive(only, roleOf(only));
  }

  // Controls whose lines say their own text.
  const CONTROLS =
    'a[href],button,input,select,textarea,[role=button],[role=link],[role=checkbox],[role=tab],[role=menuitem]';

  /**
   * Whether the name an element takes from its content is said again by
   * the lines of the controls inside it (a heading around its link): then
   * it is left out of the element's line, and its text still shows in the
   * lines under it. Not for a name given by aria-label, labelledby or title.
   */
  function nameRepeated(el, role) {
    if (!NAME_FROM_CONTENT.has(role)) return false;
    if (el.hasAttribute('aria-label') || el.hasAttribute('aria-labelledby') || el.hasAttribute('title')) return false;
    return el.querySelector(CONTROLS) !== null;
  }

  /**
   * What an expanded control shows, to be read under it rather than as its
   * siblings: the elements its aria-controls names, apart from its own
   * ancestors and descendants. Empty unless aria-expanded is true.
   */
  function controlled(el) {
    if (el.getAttribute('aria-expanded') !== 'true') return [];
    const ids = (el.getAttribute('aria-controls') || '').split(/\s+/).filter(Boolean);
    return ids
      .map((id) => document.getElementById(id))
      .filter((c) => c && c !== el && !c.contains(el) && !el.contains(c));
  }

  // --- Output formatting: what a line leaves out because another says it. ---

  /** A heading's level, said on the line of the one control it wraps. */
  const headingMark = (el) => `h${(/^H([1-6])$/.exec(el.tagName) || [])[1] || el.getAttribute('aria-level') || 2}`;

  // An address as a person reads it: no scheme or www., segments joined by
  // "/" (a search result's "example.org › docs › page"), lower case.
  const plainAddress = (s) =>
    s
      .toLowerCase()
      .replace(/^[a-z][a-z0-9+.-]*:\/\//, '')
      .replace(/^www\./, '')
      .replace(/\s*[›»/]\s*/g, '/')
      .replace(/[/…\s]+$/, '');

  /**
   * Whether text only restates the address of the link said on the line
   * before it (href): a host, and path segments, all in that address (or
   * in a redirect's parameter, %-encoded, that holds it).
   */
  function restatesAddress(text, href) {
    if (!href) return false;
    const t = plainAddress(text);
    if (!/^[a-z0-9-]+(\.[a-z0-9-]+)+(\/|$)/.test(t)) return false;
    return [String, decodeURI, decodeURIComponent].some((decode) => {
      try {
        return plainAddress(decode(href)).includes(t);
      } catch {
        return false; // not %-encoded this way
      }
    });
  }

  /**
   * A link's address in its shortest faithful form, when a visible text
   * after the link (a search result's cite) names where it goes and that
   * name is in the address: the address up to the end of the part naming
   * it (the whole path; a redirect's parameter holding the destination),
   * "…" for the rest (tracking and ranking parameters). Otherwise the
   * address as it is.
   */
  function addressUpTo(href, text) {
    const t = plainAddress(text);
    if (!t) return href;
    for (const decode of [String, decodeURI, decodeURIComponent]) {
      let h;
      try {
        h = decode(href);
      } catch {
        continue; // not %-encoded this way
      }
      const at = h.toLowerCase().indexOf(t);
      if (at < 0) continue;
      const end = at + t.length;
      const q = h.search(/[?#]/);
      // In the path: keep it whole; in the query: up to the end of that parameter.
      let cut = q;
      if (q >= 0 && end > q) {
        const stop = h.slice(end).search(/[&#]/);
        cut = stop < 0 ? -1 : end + stop;
      }
      return cut > 0 && h.length - cut > 1 ? `${h.slice(0, cut)}…` : href;
    }
    return href;
  }

  /**
   * The first text after el that is not inside it (within a few nodes): a
   * search result's cite after its title's link. '' when none is near.
   */
  function textAfter(el) {
    const w = el.ownerDocument.createTreeWalker(el.getRootNode(), NodeFilter.SHOW_TEXT);
    w.currentNode = el;
    for (let n = w.nextNode(), seen = 0; n && seen < 8; n = w.nextNode()) {
      if (el.contains(n)) continue;
      seen++;
      const p = n.parentElement;
      if (p && SKIP.has(p.tagName)) continue;
      if (/\S/.test(n.data)) return whole(n.data);
    }
    return '';
  }

  /**
   * The props a link's line shows (describe's, all: the outline shows text
   * too): no href for an address within this page ("#results", "#" for a
   * script: the link keeps the reader here and its name says what it
   * shows; a hash route "#/inbox" is a destination and stays); the href
   * shortened by addressUpTo when the text after the link says where it
   * goes. undefined for none.
   */
  function linkProps(el, props, all) {
    const i = props ? props.findIndex((p) => p.startsWith('href=')) : -1;
    if (i < 0) return props;
    const href = el.href;
    if (typeof href === 'string') {
      const hash = href.indexOf('#');
      // No fragment: not within this page, and with nothing to shorten left as it is (whether it parses or not).
      if (hash < 0 && (!all || !/[?#]/.test(props[i]))) return props;
      // This page's address and a fragment: within this page (a serialized address has '#' only before its
      // fragment), unless the fragment is a route ("#/inbox", "#!/inbox").
      if (hash >= 0 && href.slice(0, hash) === pageAddress(el.ownerDocument.location || location)) {
        const c = href.charCodeAt(hash + 1);
        if (c !== 0x2f && c !== 0x21) return props.length > 1 ? props.filter((_, k) => k !== i) : undefined;
      }
    }
    let u;
    try {
      u = new URL(href);
    } catch {
      return props; // not a URL: shown as written
    }
    const here = el.ownerDocument.location || location; // a frame's links are within the frame's page
    const inPage =
      (u.hash || u.href.endsWith('#')) &&
      u.origin === here.origin &&
      u.pathname === here.pathname &&
      u.search === here.search;
    if (inPage && !/^#[/!]/.test(u.hash)) return props.length > 1 ? props.filter((_, k) => k !== i) : undefined;
    // Only a query or fragment is ever cut: an address without one is shown whole, unread further.
    if (!all || !/[?#]/.test(props[i])) return props;
    const after = textAfter(el);
    if (!after || !restatesAddress(after, el.href)) return props;
    const shown = addressUpTo(props[i].slice(5), after);
    return shown === props[i].slice(5) ? props : props.map((p, k) => (k === i ? `href=${shown}` : p));
  }

  // Each page's address without its fragment, read once per read (a Location's getters cost microseconds).
  let pageAddresses = new Map();
  function pageAddress(loc) {
    let a = pageAddresses.get(loc);
    if (a === undefined) {
      const h = loc.href;
      const at = h.indexOf('#');
      a = at < 0 ? h : h.slice(0, at);
      pageAddresses.set(loc, a);
    }
    return a;
  }

  // An input type its role already says (type=search is a searchbox): not said again.
  const TYPE_OF_ROLE = { searchbox: 'type=search', spinbutton: 'type=number', slider: 'type=range' };
  const withoutRoleType = (d) => {
    const said = TYPE_OF_ROLE[d.role];
    if (!said || !d.props || !d.props.includes(said)) return d;
    const props = d.props.filter((p) => p !== said);
    return { ...d, props: props.length ? props : undefined };
  };

  // The shortest name whose repetition is said as "…": a shorter one is read as easily as "…".
  const MIN_REPEATED = 12;

  /**
   * A control's name as its line shows it: the part that repeats the whole
   * name of the control before it, with only text between ("About this
   * result: <the result's title>" after the result's link and snippet),
   * said as "…". The name
   * itself, whole, is what find matches. Not for equal names (two "Reply"
   * buttons) or a name that would be left as "…" alone.
   */
  function elideRepeated(name, prev) {
    if (!name || !prev || prev.length < MIN_REPEATED || prev.endsWith('…') || name === prev) return name;
    if (name.endsWith(prev)) {
      const rest = name.slice(0, -prev.length);
      return /[\p{L}\p{N}]/u.test(rest) ? `${rest}…` : name;
    }
    if (name.startsWith(prev)) {
      const rest = name.slice(prev.length);
      return /[\p{L}\p{N}]/u.test(rest) ? `…${rest}` : name;
    }
    return name;
  }

  // Blocks that hold only text: nothing in them to act on, so their line
  // has no ref (find gives one for a block to scroll to or read alone). A
  // paragraph's or list item's line is its text alone, as a text node's is:
  // the role word says nothing a model acts on (the list above says it is
  // a list); a quote keeps its word, which says whose words these are.
  const TEXT_BLOCKS = new Set(['paragraph', 'listitem', 'blockquote']);
  const textAlone = (d) => TEXT_BLOCKS.has(d.role) && !d.name && !d.props;
  const blockLine = (d, indent) => (textAlone(d) ? `${'  '.repeat(indent)}- ${d.role}` : line(d, indent));
  /** A line of text alone: `- "the text"`, then its hidden mark. */
  const textLine = (t, indent, marked) => `${'  '.repeat(indent)}- "${quote(t)}"${marked}`;

  // A link's line with nothing but its name and ref, and its indent.
  const LINK_ALONE = /^( *)- link ("(?:[^"\\]|\\.)*") \[(ref_\d+)\]$/;
  // The widest a line of joined links grows; the next link starts a line.
  const RUN_WIDTH = 100;
  const indentOf = (l) => l.length - l.trimStart().length;

  /**
   * Outline lines with each run of side-by-side links (same indent, nothing
   * under them, no address or state shown: pages "2" … "10", tabs, a
   * footer's) on one line, `- link "2" [ref_66], "3" [ref_67]`, up to
   * RUN_WIDTH characters: the row they are, each with its name and ref, for
   * a line's prefix fewer per link. A link with lines under it, or anything
   * else between, ends the run.
   */
  function joinLinkRuns(lines) {
    const out = [];
    let run = -1; // the index in out of the run's line, -1 when none is open
    let runIndent = 0;
    for (let i = 0; i < lines.length; i++) {
      const m = LINK_ALONE.exec(lines[i]);
      const leaf = m && !(i + 1 < lines.length && indentOf(lines[i + 1]) > m[1].length);
      const more = leaf ? `, ${m[2]} [${m[3]}]` : '';
      if (leaf && run >= 0 && runIndent === m[1].length && out[run].length + more.length <= RUN_WIDTH) {
        out[run] += more;
        continue;
      }
      out.push(lines[i]);
      run = leaf ? out.length - 1 : -1;
      runIndent = leaf ? m[1].length : 0;
    }
    return out;
  }

  P.outline = { plainAddress, restatesAddress, addressUpTo, elideRepeated, joinLinkRuns };

  // --- End of output formatting helpers. ---

  /**
   * args: {filter: 'all'|'interactive', ref?, depth? (40), maxChars? (50,000), includeHidden?}.
   * Returns {url, origin, title, filter, nodes, truncated, cut, viewport, text, hidden};
   * hidden is {count, reasons} of the hidden elements (hidden.js), left out,
   * or with includeHidden kept and marked "[hidden: why]".
   *
   * cut, when truncated, is {chars, inside: [{ref, role, name}]}: the
   * elements (outermost first) whose content the budget cut.
   */
  P.ops.snapshot = (args) => {
    const filter = args.filter === 'interactive' ? 'interactive' : 'all';
    const maxDepth = args.depth || 40;
    const out = lineBuffer(args.maxChars || DEFAULT_MAX_CHARS);
    // args.root: warm.js's detached sample (args from the worker are JSON, never an element).
    const root = args.root || (args.ref ? needEl(args.ref) : document.body || document.documentElement);
    const open = []; // the emitted elements the walk is inside, outermost first
    let count = 0;
    let cut = null;
    const includeHidden = !!args.includeHidden;
    const hiddenFound = [];
    const mark = (why) => (why ? ` [hidden: ${why}]` : '');
    // Elements read under the control that expands them (controlled above),
    // and so skipped where they stand; walked: the elements already read.
    const nested = new Set();
    const walked = new Set();
    // The control a heading wraps alone (wrapsOne) → the heading's mark for its line.
    const headingOf = new Map();
    // The address of the link on the line just pushed, for a text that restates it.
    let lastHref = '';
    // The name of the last control read, for a control whose name repeats it (elideRepeated);
    // '' after a line of structure (a heading, a list, a landmark): only text may come between.
    let lastControl = '';
    // A control's line as shown: its link's address shortened, a name repeating the last control's elided.
    const shownControl = (el, d, all) => {
      let s = withoutRoleType(d);
      if (d.role === 'link') s = { ...s, props: linkProps(el, d.props, all) };
      const name = elideRepeated(d.name, lastControl);
      lastControl = d.name;
      return name === d.name ? s : { ...s, name };
    };
    if (filter === 'all') {
      for (const c of root.querySelectorAll('[aria-expanded=true][aria-controls]')) {
        for (const x of controlled(c)) if (!x.contains(root)) nested.add(x);
      }
    }
    P.hidden.fresh();
    P.a11y.remember();
    pageAddresses = new Map();
    // self: the element a line is of, when the budget may cut inside that line (a paragraph's text).
    const push = (s, self) => {
      lastHref = '';
      if (out.push(s)) return true;
      if (!cut) {
        const inside = self ? [...open, self] : open;
        cut = { chars: out.chars, inside: inside.map((d) => ({ ref: d.ref, role: d.role, name: clean(d.name, 60) })) };
      }
      return false;
    };

    // hiddenWhy: why an ancestor is hidden, when includeHidden keeps it;
    // underControl: node is walked under the control that expands it.
    const walk = (node, indent, depth, suppressText, hiddenWhy, underControl) => {
      if (out.truncated) return;
      if (node.nodeType === 3) {
        // White space alone (most text between elements) says nothing: whole() would make it ''.
        if (filter === 'all' && !suppressText && NOT_SPACE.test(node.data)) {
          const t = whole(node.data);
          if (t && !restatesAddress(t, lastHref)) push(textLine(t, indent, mark(hiddenWhy)));
        }
        return;
      }
      if (node.nodeType === 11) {
        for (const k of node.childNodes) walk(k, indent, depth, suppressText, hiddenWhy);
        return;
      }
      if (node.nodeType !== 1) return;
      const el = node;
      const tag = el.tagName;
      if (SKIP.has(tag)) return;
      if (nested.has(el) && !underControl) return;
      let why = hiddenWhy;
      if (!why) {
        const r = P.hidden.reason(el);
        if (r) {
          hiddenFound.push({ el, why: r });
          if (!includeHidden) return;
          why = r;
        }
      }
      if (depth > maxDepth) {
        push(`${'  '.repeat(indent)}- … (deeper content omitted; read_page with ref=${refOf(el)})`);
        return;
      }
      const role = roleOf(el);
      let emitted = null;
      let childSuppress = suppressText;
      if (filter === 'interactive') {
        if (isInteractive(el, role)) {
          count++;
          push(line(shownControl(el, describe(el, { valueMax: Infinity }), false), 0) + mark(why));
        }
        if (role === 'combobox' && tag === 'SELECT') return;
      } else {
        if (tag === 'LABEL' && labelInName(el)) {
          // The control's name says the label: no line for it, its text not again (its links and control still).
          for (const k of childNodesOf(el)) walk(k, indent, depth + 1, true, why);
          return;
        }
        if (tag === 'DETAILS' && el.open && el.querySelector(':scope > summary') && !nameOf(el, role)) {
          // The summary says expanded; what it opens is read under it.
          const summary = el.querySelector(':scope > summary');
          walk(summary, indent, depth + 1, suppressText, why);
          for (const k of childNodesOf(el)) if (k !== summary) walk(k, indent + 1, depth + 1, suppressText, why);
          return;
        }
        const interactive = isInteractive(el, role);
        const meaningful =
          role !== 'generic' &&
          role !== 'none' &&
          role !== 'presentation' &&
          !(tag === 'DETAILS' && !nameOf(el, role)) &&
          !(!interactive && el !== root && wrapsOne(el, role));
        if (role === 'heading' && !meaningful) headingOf.set(el.firstElementChild, headingMark(el));
        if (
          !interactive &&
          INLINE_ROLES.has(role) &&
          !el.firstElementChild &&
          !el.shadowRoot &&
          !whole(el.textContent)
        ) {
          return; // an empty paragraph, list item or cell says nothing
        }
        const rowText = role === 'row' && !suppressText ? textRow(el, why) : null;
        if (rowText !== null) {
          if (!rowText.replace(/[ |]/g, '')) return;
          count++;
          push(`${line(describe(el, { valueMax: Infinity }), indent)}${mark(why)}: "${quote(rowText)}"`);
          return;
        }
        if (
          !interactive &&
          !suppressText &&
          INLINE_ROLES.has(role) &&
          el.firstChild &&
          !el.shadowRoot &&
          (!el.firstElementChild || (!el.querySelector(RICH) && (why || !hiddenInside(el))))
        ) {
          // Only inline text inside (or only text): one line instead of the element's and one per text node.
          const raw = why ? el.textContent : el.innerText;
          const t = whole(raw);
          if (!t) return;
          if (meaningful) {
            const d = describe(el, { valueMax: Infinity });
            count++;
            // Code keeps its line breaks and indentation, escaped as JSON, so it can be quoted verbatim.
            const shown = role === 'code' ? JSON.stringify(raw.replace(/\s+$/, '')) : `"${quote(t)}"`;
            // A name taken from the text (a cell's) is the text: said once, whole.
            if (role !== 'code' && d.name && d.name === t) push(line(d, indent) + mark(why), d);
            else {
              const fromText = NAME_FROM_CONTENT.has(role) && d.name && t.startsWith(d.name.replace(/…$/, ''));
              const b = fromText ? { ...d, name: '' } : d;
              if (role !== 'blockquote' && textAlone(b)) push(textLine(t, indent, mark(why)), d);
              else push(`${blockLine(b, indent)}${mark(why)}: ${shown}`, d);
            }
          } else if (!restatesAddress(t, lastHref)) push(textLine(t, indent, mark(why)));
          return;
        }
        if (meaningful || interactive || (el === root && args.ref)) {
          let d = describe(el, { valueMax: Infinity });
          if (!interactive && d.name && nameRepeated(el, role)) {
            // A heading or cell around a link or button: the control's line says the text, with its ref.
            d = { ...d, name: '' };
          }
          if (headingOf.has(el)) d = { ...d, props: [...(d.props || []), headingOf.get(el)] };
          count++;
          if (!interactive) lastControl = '';
          push(line(interactive ? shownControl(el, d, true) : d, indent) + mark(why));
          if (role === 'link' && typeof el.href === 'string') lastHref = el.href;
          emitted = d;
          const missing = missingRows(el, role);
          if (missing) push(`${'  '.repeat(indent + 1)}- note: ${missing}`);
          // The name already says the text, unless it had to be cut.
          if (NAME_FROM_CONTENT.has(role) && d.name && !cutName(d.name)) childSuppress = true;
          if (tag === 'SELECT') {
            for (const o of el.options) {
              if (out.truncated) break;
              // An option hidden by its own style is not in the list the person opens.
              const ow = why ? '' : P.hidden.reason(o);
              if (ow) {
                hiddenFound.push({ el: o, why: ow });
                if (!includeHidden) continue;
              }
              const od = { ref: refOf(o), role: 'option', name: clean(o.label || o.text) };
              if (o.selected) od.props = ['selected'];
              if (o.disabled) od.props = [...(od.props || []), 'disabled'];
              count++;
              push(line(od, indent + 1) + mark(why || ow));
            }
            return;
          }
          if (tag === 'TEXTAREA' || tag === 'IMG' || (tag && tag.toUpperCase() === 'SVG')) return;
        }
      }
      const nextIndent = emitted && filter === 'all' ? indent + 1 : indent;
      if (emitted) open.push(emitted);
      if (el.shadowRoot || tag === 'SLOT') {
        for (const k of childNodesOf(el)) walk(k, nextIndent, depth + 1, childSuppress, why);
      } else {
        // childNodesOf's answer without a shadow root or slot, walked by sibling: no iterator over a NodeList.
        for (let k = el.firstChild; k; k = k.nextSibling) walk(k, nextIndent, depth + 1, childSuppress, why);
      }
      if (emitted && filter === 'all' && nested.size) {
        walked.add(el);
        for (const c of controlled(el)) {
          if (nested.has(c) && !walked.has(c)) {
            walked.add(c);
            walk(c, indent + 1, depth + 1, false, why, true);
          }
        }
      }
      if (tag === 'IFRAME' && emitted && filter === 'all') {
        try {
          const doc = el.contentDocument;
          if (doc && doc.body) walk(doc.body, nextIndent, depth + 1, false, why);
        } catch {
          /* cross-origin */
        }
      }
      if (emitted) open.pop();
    };
    walk(root, 0, 0, false, '');
    // What a control expands that was not read under it (the control hidden, say) is read at the end.
    for (const x of nested) if (!walked.has(x)) walk(x, 0, 0, false, '', true);
    if (args.root) return null; // the warm-up reads nothing of the page
    return {
      url: location.href,
      origin: location.origin,
      hidden: P.hidden.summary(hiddenFound),
      title: document.title,
      filter,
      nodes: count,
      truncated: out.truncated,
      cut,
      viewport: {
        width: innerWidth,
        height: innerHeight,
        scrollX: Math.round(scrollX),
        scrollY: Math.round(scrollY),
        pageWidth: document.documentElement.scrollWidth,
        pageHeight: document.documentElement.scrollHeight,
      },
      text: filter === 'all' ? joinLinkRuns(out.text().split('\n')).join('\n') : out.text(),
    };
  };
})();
