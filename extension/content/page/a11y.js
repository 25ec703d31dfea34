// Roles, accessible names, values, states and visibility of elements: what
// read_page, find and the actions say about an element.
(() => {
  'use strict';
  const P = globalThis.__browserBridgePage;
  const { clean } = P.util;
  const { refOf } = P.refs;

  /** What a password field that holds something shows as its value. */
  const SECRET_SHOWN = '••••••••';

  const INPUT_ROLES = {
    button: 'button',
    submit: 'button',
    reset: 'button',
    image: 'button',
    checkbox: 'checkbox',
    radio: 'radio',
    range: 'slider',
    number: 'spinbutton',
    search: 'searchbox',
    email: 'textbox',
    tel: 'textbox',
    text: 'textbox',
    url: 'textbox',
    password: 'textbox',
    date: 'textbox',
    'datetime-local': 'textbox',
    month: 'textbox',
    time: 'textbox',
    week: 'textbox',
    color: 'textbox',
    file: 'button',
  };
  const TAG_ROLES = {
    BUTTON: 'button',
    SELECT: 'combobox',
    TEXTAREA: 'textbox',
    IMG: 'img',
    H1: 'heading',
    H2: 'heading',
    H3: 'heading',
    H4: 'heading',
    H5: 'heading',
    H6: 'heading',
    NAV: 'navigation',
    MAIN: 'main',
    ASIDE: 'complementary',
    FORM: 'form',
    TABLE: 'table',
    TR: 'row',
    TD: 'cell',
    TH: 'columnheader',
    UL: 'list',
    OL: 'list',
    LI: 'listitem',
    DIALOG: 'dialog',
    OPTION: 'option',
    P: 'paragraph',
    SUMMARY: 'button',
    FIELDSET: 'group',
    PROGRESS: 'progressbar',
    METER: 'meter',
    IFRAME: 'iframe',
    VIDEO: 'video',
    AUDIO: 'audio',
    LABEL: 'label',
    ARTICLE: 'article',
    DETAILS: 'group',
    HR: 'separator',
    BLOCKQUOTE: 'blockquote',
    CODE: 'code',
    PRE: 'code',
    FIGURE: 'figure',
    CAPTION: 'caption',
    LEGEND: 'legend',
    DL: 'list',
    DT: 'term',
    DD: 'definition',
    SVG: 'img',
    CANVAS: 'canvas',
  };
  const INTERACTIVE_ROLES = new Set([
    'button',
    'link',
    'textbox',
    'searchbox',
    'checkbox',
    'radio',
    'combobox',
    'listbox',
    'slider',
    'spinbutton',
    'switch',
    'tab',
    'menuitem',
    'menuitemcheckbox',
    'menuitemradio',
    'option',
    'treeitem',
  ]);
  const NAME_FROM_CONTENT = new Set([
    'button',
    'link',
    'heading',
    'option',
    'menuitem',
    'menuitemcheckbox',
    'menuitemradio',
    'tab',
    'checkbox',
    'radio',
    'switch',
    'cell',
    'gridcell',
    'columnheader',
    'rowheader',
    'treeitem',
    'label',
    'legend',
    'caption',
    'term',
    'tooltip',
  ]);

  /** The element's role (its own role attribute's first word, else its tag's and type's); once per element and read. */
  function roleOf(el) {
    if (!memo) return roleFrom(el);
    let role = memo.roles.get(el);
    if (role === undefined) {
      role = roleFrom(el);
      memo.roles.set(el, role);
    }
    return role;
  }

  function roleFrom(el) {
    const explicit = el.getAttribute && el.getAttribute('role');
    if (explicit) return explicit.trim().split(/\s+/)[0];
    const tag = el.tagName;
    if (tag === 'A' || tag === 'AREA') return el.hasAttribute('href') ? 'link' : 'generic';
    if (tag === 'INPUT') {
      const t = (el.getAttribute('type') || 'text').toLowerCase();
      if (t === 'hidden') return 'none';
      if ((t === 'text' || t === 'search' || t === 'email' || t === 'tel' || t === 'url') && el.hasAttribute('list')) {
        return 'combobox';
      }
      return INPUT_ROLES[t] || 'textbox';
    }
    if (tag === 'SELECT') return el.multiple || el.size > 1 ? 'listbox' : 'combobox';
    if (tag === 'SECTION') {
      return el.hasAttribute('aria-label') || el.hasAttribute('aria-labelledby') ? 'region' : 'generic';
    }
    if (tag === 'HEADER') return el.closest('article,aside,main,nav,section') ? 'generic' : 'banner';
    if (tag === 'FOOTER') return el.closest('article,aside,main,nav,section') ? 'generic' : 'contentinfo';
    if (tag === 'IMG' && el.getAttribute('alt') === '') return 'presentation';
    if (el.isContentEditable && !(el.parentElement && el.parentElement.isContentEditable)) return 'textbox';
    return TAG_ROLES[tag] || (tag && tag.toUpperCase() === 'SVG' ? 'img' : 'generic');
  }

  function textOf(el, max = 120) {
    let t = '';
    try {
      t = el.innerText;
    } catch {
      /* not an HTMLElement */
    }
    if (t == null || t === '') t = el.textContent || '';
    return clean(t, max);
  }

  // The strings of a pseudo-element's CSS content ('"*" "required"' -> '*required'); '' for none, counters, images.
  function pseudoText(el, which) {
    const c = getComputedStyle(el, which).content;
    if (!c || c === 'none' || c === 'normal') return '';
    return [...c.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1].replace(/\\(.)/g, '$1')).join('');
  }

  // What one read_page remembers of names and roles (remember below): a
  // label is read for its own line, for its control's name and for the test
  // whether that name says it, so three times, each with the pseudo-elements'
  // styles; an element's role is asked by the walk, describe and the tests
  // around its parent and children.
  let memo = null;

  /**
   * From now until the end of the task (the op; the page does not change
   * during it), each label's text and each element's name and role are
   * worked out once. Only for an op that only reads: one that changes the page between
   * two questions must not be told the answer from before the change.
   */
  function remember() {
    const m = { labels: new Map(), names: new Map(), roles: new Map() };
    memo = m;
    queueMicrotask(() => {
      if (memo === m) memo = null;
    });
  }

  /**
   * A label's text as drawn: its text with what CSS draws before and after
   * it and its parts (a "*required" from ::after is part of what a person
   * reads), without the controls inside it. Plain text when CSS adds nothing.
   */
  function labelText(label, max = 200) {
    if (!memo || max !== 200) return labelTextOf(label, max);
    let t = memo.labels.get(label);
    if (t === undefined) {
      t = labelTextOf(label, max);
      memo.labels.set(label, t);
    }
    return t;
  }

  function labelTextOf(label, max) {
    const parts = [label, ...label.querySelectorAll('*')].slice(0, 50);
    // A select's or textarea's text (its options, its content) is no part of the label: the control says it.
    const plain = !label.querySelector('select,textarea');
    if (plain && !parts.some((e) => pseudoText(e, '::before') || pseudoText(e, '::after'))) return textOf(label, max);
    const walkText = (node) => {
      if (node.nodeType === 3) return node.textContent;
      if (node.nodeType !== 1 || /^(INPUT|SELECT|TEXTAREA|SCRIPT|STYLE)$/.test(node.tagName)) return '';
      if (P.hidden.reason(node)) return '';
      const inner = [...node.childNodes].map(walkText).join('');
      const block = P.hidden.styleOf(node).display.startsWith('inline') ? '' : ' ';
      return block + pseudoText(node, '::before') + inner + pseudoText(node, '::after') + block;
    };
    return clean(walkText(label), max);
  }

  function nameOf(el, role) {
    if (!memo) return nameFrom(el, role);
    const known = memo.names.get(el);
    if (known && known.role === role) return known.name;
    const name = nameFrom(el, role);
    memo.names.set(el, { role, name });
    return name;
  }

  function nameFrom(el, role) {
    const al = el.getAttribute('aria-label');
    if (al && al.trim()) return clean(al);
    const lb = el.getAttribute('aria-labelledby');
    if (lb) {
      const t = lb
        .split(/\s+/)
        .map((id) => document.getElementById(id))
        .filter(Boolean)
        .map((e) => textOf(e, 200))
        .join(' ');
      if (t.trim()) return clean(t);
    }
    const tag = el.tagName;
    if (tag === 'INPUT' || tag === 'SELECT' || tag === 'TEXTAREA' || tag === 'METER' || tag === 'PROGRESS') {
      const type = (el.getAttribute('type') || '').toLowerCase();
      if (tag === 'INPUT' && (type === 'button' || type === 'submit' || type === 'reset')) {
        return clean(el.value || (type === 'submit' ? 'Submit' : type === 'reset' ? 'Reset' : ''));
      }
      if (tag === 'INPUT' && type === 'image') return clean(el.getAttribute('alt') || el.value || 'Submit');
      if (el.labels && el.labels.length) {
        const t = [...el.labels].map((l) => labelText(l)).join(' ');
        if (t.trim()) return clean(t);
      }
      const wrap = el.closest('label');
      if (wrap) {
        const t = labelText(wrap);
        if (t) return t;
      }
      if (el.getAttribute('title')) return clean(el.getAttribute('title'));
      if (el.getAttribute('placeholder')) return clean(el.getAttribute('placeholder'));
      return '';
    }
    if (tag === 'IMG' || tag === 'AREA') return clean(el.getAttribute('alt') || el.getAttribute('title') || '');
    if (tag === 'FIELDSET') {
      const l = el.querySelector(':scope > legend');
      if (l) return textOf(l);
    }
    if (tag === 'TABLE') {
      const c = el.querySelector(':scope > caption');
      if (c) return textOf(c);
    }
    if (tag === 'FIGURE') {
      const c = el.querySelector(':scope > figcaption');
      if (c) return textOf(c);
    }
    if (tag && tag.toUpperCase() === 'SVG') {
      const t = el.querySelector('title');
      if (t) return clean(t.textContent);
    }
    if (NAME_FROM_CONTENT.has(role)) {
      const t = textOf(el);
      if (t) return t;
      const img = el.querySelector && el.querySelector('img[alt],svg title,[aria-label]');
      if (img) return clean(img.getAttribute('alt') || img.getAttribute('aria-label') || img.textContent);
    }
    if (el.getAttribute('title')) return clean(el.getAttribute('title'));
    return '';
  }

  /** The element's value as a form shows it (passwords masked), or undefined for none; max cuts editor text. */
  function valueOf(el, role, max = 200) {
    const tag = el.tagName;
    if (tag === 'INPUT') {
      const type = (el.getAttribute('type') || 'text').toLowerCase();
      if (
        type === 'checkbox' ||
        type === 'radio' ||
        type === 'button' ||
        type === 'submit' ||
        type === 'reset' ||
        type === 'image'
      ) {
        return undefined;
      }
      // A password field says whether it holds something, never what, nor how long it is.
      if (P.hidden.isSecret(el)) return el.value ? SECRET_SHOWN : '';
      if (type === 'file') return el.files && el.files.length ? [...el.files].map((f) => f.name).join(', ') : '';
      return el.value;
    }
    if (tag === 'TEXTAREA') return el.value;
    if (tag === 'SELECT') return [...el.selectedOptions].map((o) => clean(o.label || o.text)).join(', ');
    if (role === 'textbox' && el.isContentEditable) return clean(el.innerText, max);
    if (el.hasAttribute && el.hasAttribute('aria-valuenow')) return el.getAttribute('aria-valuenow');
    return undefined;
  }

  /** Whether el itself shows (hidden.js says why not); ancestors are the caller's walk's. */
  function isVisible(el) {
    return !P.hidden.reason(el);
  }

  function isInteractive(el, role) {
    // A sortable column's header is what a person clicks to sort.
    if (role === 'columnheader' && el.hasAttribute('aria-sort')) return true;
    if (INTERACTIVE_ROLES.has(role)) return !(el.tagName === 'OPTION' && el.closest('select:not([multiple])'));
    if (el.tagName === 'INPUT' && role !== 'none') return true;
    if (el.isContentEditable && role === 'textbox') return true;
    if (el.hasAttribute('onclick')) return true;
    const ti = el.getAttribute('tabindex');
    // Highlighters make a code block focusable so keys can scroll it: that is no control.
    if (ti !== null && Number(ti) >= 0 && el !== document.body && role !== 'code') return true;
    if (role === 'generic' && el.tagName !== 'BODY' && el.tagName !== 'HTML') {
      if (P.hidden.styleOf(el).cursor === 'pointer') {
        const p = el.parentElement;
        if (!p || P.hidden.styleOf(p).cursor !== 'pointer') return true;
      }
    }
    return false;
  }

  function props(el, role) {
    const out = [];
    const tag = el.tagName;
    if (role === 'heading') out.push(`level=${/^H[1-6]$/.test(tag) ? tag[1] : el.getAttribute('aria-level') || 2}`);
    if (tag === 'INPUT') {
      const type = (el.getAttribute('type') || 'text').toLowerCase();
      if (type !== 'text' && type !== 'checkbox' && type !== 'radio') out.push(`type=${type}`);
      if (type === 'checkbox' || type === 'radio') out.push(el.checked ? 'checked' : 'unchecked');
      if (el.indeterminate) out.push('mixed');
    }
    const ac = el.getAttribute('aria-checked');
    if (ac && tag !== 'INPUT') out.push(ac === 'true' ? 'checked' : ac === 'mixed' ? 'mixed' : 'unchecked');
    const ap = el.getAttribute('aria-pressed');
    if (ap) out.push(ap === 'true' ? 'pressed' : 'not pressed');
    const ae = el.getAttribute('aria-expanded');
    if (ae) out.push(ae === 'true' ? 'expanded' : 'collapsed');
    if (tag === 'DETAILS') out.push(el.open ? 'expanded' : 'collapsed');
    // A details' summary is what a person clicks to open or close it.
    if (tag === 'SUMMARY' && !ae && el.parentElement && el.parentElement.tagName === 'DETAILS') {
      out.push(el.parentElement.open ? 'expanded' : 'collapsed');
    }
    if (el.getAttribute('aria-selected') === 'true' || (tag === 'OPTION' && el.selected)) out.push('selected');
    if (el.disabled || el.getAttribute('aria-disabled') === 'true') out.push('disabled');
    if (el.required || el.getAttribute('aria-required') === 'true') out.push('required');
    if (el.readOnly && (tag === 'INPUT' || tag === 'TEXTAREA')) out.push('readonly');
    if (el === document.activeElement && el !== document.body) out.push('focused');
    if (role === 'link') {
      let h = el.getAttribute('href') || '';
      if (h && !h.startsWith('javascript:')) {
        // The page's own origin says nothing. A model follows a link by its ref, but it may
        // also be asked for the address: cut only beyond 200 characters (tracking and data
        // URLs), not a search result's address with its query (issue 32's page set).
        if (/^https?:/i.test(h)) {
          try {
            const u = new URL(h);
            if (u.origin === location.origin) h = u.pathname + u.search + u.hash;
          } catch {
            /* not a URL: shown as written */
          }
        }
        out.push(`href=${clean(h, 200)}`);
      }
    }
    if ((role === 'textbox' || role === 'searchbox' || role === 'combobox') && el.getAttribute('placeholder')) {
      out.push(`placeholder="${clean(el.getAttribute('placeholder'), 60)}"`);
    }
    return out;
  }

  /** The nodes a walk reads under el: its shadow root's, a slot's assigned ones, then its own (live: walk, do not keep). */
  function childNodesOf(el) {
    if (el.tagName === 'SLOT' && el.assignedNodes) {
      const a = el.assignedNodes({ flatten: true });
      if (a.length) return a;
    }
    // Most elements have neither: their own NodeList, not a copy (the copies were 7% of a snapshot).
    if (!el.shadowRoot) return el.childNodes;
    return [...el.shadowRoot.childNodes, ...el.childNodes];
  }

  /**
   * {ref, role, name, tag, value?, props?} of an element. valueMax cuts the
   * value (200 characters by default; read_page passes Infinity).
   */
  function describe(el, { valueMax = 200 } = {}) {
    const role = roleOf(el);
    const d = { ref: refOf(el), role, name: nameOf(el, role), tag: el.tagName.toLowerCase() };
    const v = valueOf(el, role, valueMax);
    if (v !== undefined) d.value = clean(v, valueMax);
    const p = props(el, role);
    if (p.length) d.props = p;
    return d;
  }

  function line(d, indent) {
    let s = `${'  '.repeat(indent)}- ${d.role}`;
    if (d.name) s += ` "${d.name.replace(/"/g, '\\"')}"`;
    if (d.value !== undefined && d.value !== '') s += ` value="${String(d.value).replace(/"/g, '\\"')}"`;
    if (d.props) s += ` ${d.props.map((p) => `[${p}]`).join(' ')}`;
    s += ` [${d.ref}]`;
    return s;
  }

  function rectOf(el) {
    const r = el.getBoundingClientRect();
    return { x: Math.round(r.x), y: Math.round(r.y), width: Math.round(r.width), height: Math.round(r.height) };
  }

  function inViewport(r) {
    return r.x + r.width > 0 && r.y + r.height > 0 && r.x < innerWidth && r.y < innerHeight;
  }

  P.a11y = {
    NAME_FROM_CONTENT,
    roleOf,
    textOf,
    nameOf,
    valueOf,
    isVisible,
    isInteractive,
    props,
    childNodesOf,
    describe,
    labelText,
    remember,
    line,
    rectOf,
    inViewport,
  };
})();
