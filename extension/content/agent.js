// The page agent: one self-contained function injected with
// chrome.scripting.executeScript({func: pageAgent, args: [op, args]}) into
// the extension's ISOLATED world. It must not refer to anything outside its
// own body (executeScript serialises it). Its state (element refs) lives on
// the isolated world's globalThis, which persists for the document's
// lifetime, so the same element keeps the same "ref_N" across calls.

export function pageAgent(op, args) {
  // Results travel as {ok: true, value} or {ok: false, error}, because an
  // exception thrown by an injected function does not reach the caller.
  const wrapErr = (e) => ({ ok: false, error: String((e && e.message) || e) });
  try {
    const v = agentImpl(op, args || {});
    if (v && typeof v.then === 'function') return v.then((value) => ({ ok: true, value }), wrapErr);
    return { ok: true, value: v };
  } catch (e) {
    return wrapErr(e);
  }

  function agentImpl(op, args) {
  const G = globalThis;
  const S = G.__browserBridgeAgent || (G.__browserBridgeAgent = { next: 1, byEl: new WeakMap(), byRef: new Map() });

  // ---- refs --------------------------------------------------------------
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
  function elOf(ref) {
    const w = S.byRef.get(ref);
    const el = w && w.deref();
    if (!el) { S.byRef.delete(ref); return null; }
    if (el.isConnected === false) return null;
    return el;
  }
  function needEl(ref) {
    const el = elOf(ref);
    if (!el) throw new Error(`element ${ref} not found: the page changed or navigated since it was read; call read_page or find again`);
    return el;
  }

  if (op === 'refOf') return (args.elements || []).map(refOf);
  if (op === 'elOf') return elOf(args.ref);

  // ---- roles and names ---------------------------------------------------
  const clean = (s, max = 120) => {
    s = String(s == null ? '' : s).replace(/\s+/g, ' ').trim();
    return s.length > max ? s.slice(0, max - 1) + '…' : s;
  };
  const INPUT_ROLES = {
    button: 'button', submit: 'button', reset: 'button', image: 'button', checkbox: 'checkbox', radio: 'radio',
    range: 'slider', number: 'spinbutton', search: 'searchbox', email: 'textbox', tel: 'textbox', text: 'textbox',
    url: 'textbox', password: 'textbox', date: 'textbox', 'datetime-local': 'textbox', month: 'textbox',
    time: 'textbox', week: 'textbox', color: 'textbox', file: 'button',
  };
  const TAG_ROLES = {
    BUTTON: 'button', SELECT: 'combobox', TEXTAREA: 'textbox', IMG: 'img', H1: 'heading', H2: 'heading', H3: 'heading',
    H4: 'heading', H5: 'heading', H6: 'heading', NAV: 'navigation', MAIN: 'main', ASIDE: 'complementary',
    FORM: 'form', TABLE: 'table', TR: 'row', TD: 'cell', TH: 'columnheader', UL: 'list', OL: 'list', LI: 'listitem',
    DIALOG: 'dialog', OPTION: 'option', P: 'paragraph', SUMMARY: 'button', FIELDSET: 'group', PROGRESS: 'progressbar',
    METER: 'meter', IFRAME: 'iframe', VIDEO: 'video', AUDIO: 'audio', LABEL: 'label', ARTICLE: 'article',
    DETAILS: 'group', HR: 'separator', BLOCKQUOTE: 'blockquote', CODE: 'code', PRE: 'code', FIGURE: 'figure',
    CAPTION: 'caption', LEGEND: 'legend', DL: 'list', DT: 'term', DD: 'definition', SVG: 'img', CANVAS: 'canvas',
  };
  const INTERACTIVE_ROLES = new Set(['button', 'link', 'textbox', 'searchbox', 'checkbox', 'radio', 'combobox', 'listbox',
    'slider', 'spinbutton', 'switch', 'tab', 'menuitem', 'menuitemcheckbox', 'menuitemradio', 'option', 'treeitem']);
  const NAME_FROM_CONTENT = new Set(['button', 'link', 'heading', 'option', 'menuitem', 'menuitemcheckbox', 'menuitemradio',
    'tab', 'checkbox', 'radio', 'switch', 'cell', 'columnheader', 'rowheader', 'treeitem', 'label', 'legend', 'caption', 'term', 'tooltip']);

  function roleOf(el) {
    const explicit = el.getAttribute && el.getAttribute('role');
    if (explicit) return explicit.trim().split(/\s+/)[0];
    const tag = el.tagName;
    if (tag === 'A' || tag === 'AREA') return el.hasAttribute('href') ? 'link' : 'generic';
    if (tag === 'INPUT') {
      const t = (el.getAttribute('type') || 'text').toLowerCase();
      if (t === 'hidden') return 'none';
      if ((t === 'text' || t === 'search' || t === 'email' || t === 'tel' || t === 'url') && el.hasAttribute('list')) return 'combobox';
      return INPUT_ROLES[t] || 'textbox';
    }
    if (tag === 'SELECT') return el.multiple || el.size > 1 ? 'listbox' : 'combobox';
    if (tag === 'SECTION') return el.hasAttribute('aria-label') || el.hasAttribute('aria-labelledby') ? 'region' : 'generic';
    if (tag === 'HEADER') return el.closest('article,aside,main,nav,section') ? 'generic' : 'banner';
    if (tag === 'FOOTER') return el.closest('article,aside,main,nav,section') ? 'generic' : 'contentinfo';
    if (tag === 'IMG' && el.getAttribute('alt') === '') return 'presentation';
    if (el.isContentEditable && !(el.parentElement && el.parentElement.isContentEditable)) return 'textbox';
    return TAG_ROLES[tag] || (tag && tag.toUpperCase() === 'SVG' ? 'img' : 'generic');
  }

  function textOf(el, max = 120) {
    let t = '';
    try { t = el.innerText; } catch { /* not an HTMLElement */ }
    if (t == null || t === '') t = el.textContent || '';
    return clean(t, max);
  }

  function nameOf(el, role) {
    const al = el.getAttribute('aria-label');
    if (al && al.trim()) return clean(al);
    const lb = el.getAttribute('aria-labelledby');
    if (lb) {
      const t = lb.split(/\s+/).map((id) => document.getElementById(id)).filter(Boolean).map((e) => textOf(e, 200)).join(' ');
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
        const t = [...el.labels].map((l) => textOf(l, 200)).join(' ');
        if (t.trim()) return clean(t);
      }
      const wrap = el.closest('label');
      if (wrap) { const t = textOf(wrap, 200); if (t) return t; }
      if (el.getAttribute('title')) return clean(el.getAttribute('title'));
      if (el.getAttribute('placeholder')) return clean(el.getAttribute('placeholder'));
      return '';
    }
    if (tag === 'IMG' || tag === 'AREA') return clean(el.getAttribute('alt') || el.getAttribute('title') || '');
    if (tag === 'FIELDSET') { const l = el.querySelector(':scope > legend'); if (l) return textOf(l); }
    if (tag === 'TABLE') { const c = el.querySelector(':scope > caption'); if (c) return textOf(c); }
    if (tag === 'FIGURE') { const c = el.querySelector(':scope > figcaption'); if (c) return textOf(c); }
    if (tag && tag.toUpperCase() === 'SVG') { const t = el.querySelector('title'); if (t) return clean(t.textContent); }
    if (NAME_FROM_CONTENT.has(role)) {
      const t = textOf(el);
      if (t) return t;
      const img = el.querySelector && el.querySelector('img[alt],svg title,[aria-label]');
      if (img) return clean(img.getAttribute('alt') || img.getAttribute('aria-label') || img.textContent);
    }
    if (el.getAttribute('title')) return clean(el.getAttribute('title'));
    return '';
  }

  function valueOf(el, role) {
    const tag = el.tagName;
    if (tag === 'INPUT') {
      const type = (el.getAttribute('type') || 'text').toLowerCase();
      if (type === 'checkbox' || type === 'radio' || type === 'button' || type === 'submit' || type === 'reset' || type === 'image') return undefined;
      if (type === 'password') return el.value ? '•'.repeat(Math.min(el.value.length, 12)) : '';
      if (type === 'file') return el.files && el.files.length ? [...el.files].map((f) => f.name).join(', ') : '';
      return el.value;
    }
    if (tag === 'TEXTAREA') return el.value;
    if (tag === 'SELECT') return [...el.selectedOptions].map((o) => clean(o.label || o.text)).join(', ');
    if (role === 'textbox' && el.isContentEditable) return clean(el.innerText, 200);
    if (el.hasAttribute && el.hasAttribute('aria-valuenow')) return el.getAttribute('aria-valuenow');
    return undefined;
  }

  function isVisible(el) {
    if (typeof el.checkVisibility === 'function') {
      if (!el.checkVisibility({ checkVisibilityCSS: true })) return false;
    } else {
      const cs = getComputedStyle(el);
      if (cs.display === 'none' || cs.visibility === 'hidden') return false;
    }
    if (el.getAttribute('aria-hidden') === 'true') return false;
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0 && el.tagName !== 'OPTION') {
      // display: contents and zero-size wrappers can still hold visible children.
      return getComputedStyle(el).display === 'contents' || el.children.length > 0;
    }
    return true;
  }

  function isInteractive(el, role) {
    if (INTERACTIVE_ROLES.has(role)) return !(el.tagName === 'OPTION' && el.closest('select:not([multiple])'));
    if (el.tagName === 'INPUT' && role !== 'none') return true;
    if (el.isContentEditable && role === 'textbox') return true;
    if (el.hasAttribute('onclick')) return true;
    const ti = el.getAttribute('tabindex');
    if (ti !== null && Number(ti) >= 0 && el !== document.body) return true;
    if (role === 'generic' && el.tagName !== 'BODY' && el.tagName !== 'HTML') {
      const cs = getComputedStyle(el);
      if (cs.cursor === 'pointer') {
        const p = el.parentElement;
        if (!p || getComputedStyle(p).cursor !== 'pointer') return true;
      }
    }
    return false;
  }

  function props(el, role) {
    const out = [];
    const tag = el.tagName;
    if (role === 'heading') out.push(`level=${/^H[1-6]$/.test(tag) ? tag[1] : (el.getAttribute('aria-level') || 2)}`);
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
    if (el.getAttribute('aria-selected') === 'true' || (tag === 'OPTION' && el.selected)) out.push('selected');
    if (el.disabled || el.getAttribute('aria-disabled') === 'true') out.push('disabled');
    if (el.required || el.getAttribute('aria-required') === 'true') out.push('required');
    if (el.readOnly && (tag === 'INPUT' || tag === 'TEXTAREA')) out.push('readonly');
    if (el === document.activeElement && el !== document.body) out.push('focused');
    if (role === 'link') {
      const h = el.getAttribute('href') || '';
      if (h && !h.startsWith('javascript:')) out.push(`href=${clean(h, 100)}`);
    }
    if ((role === 'textbox' || role === 'searchbox' || role === 'combobox') && el.getAttribute('placeholder')) {
      out.push(`placeholder="${clean(el.getAttribute('placeholder'), 60)}"`);
    }
    return out;
  }

  function childNodesOf(el) {
    const kids = [];
    if (el.shadowRoot) kids.push(...el.shadowRoot.childNodes);
    if (el.tagName === 'SLOT' && el.assignedNodes) {
      const a = el.assignedNodes({ flatten: true });
      if (a.length) return a;
    }
    kids.push(...el.childNodes);
    return kids;
  }

  function describe(el) {
    const role = roleOf(el);
    const d = { ref: refOf(el), role, name: nameOf(el, role), tag: el.tagName.toLowerCase() };
    const v = valueOf(el, role);
    if (v !== undefined) d.value = clean(v, 200);
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

  // ---- ops ---------------------------------------------------------------
  const RICH = 'a[href],button,input,select,textarea,img,svg,canvas,video,audio,iframe,h1,h2,h3,h4,h5,h6,ul,ol,dl,table,form,nav,main,'
    + 'section,article,aside,header,footer,p,li,details,summary,label,fieldset,dialog,[role],[tabindex],[contenteditable],[onclick],[aria-label]';

  if (op === 'snapshot') {
    const filter = args.filter === 'interactive' ? 'interactive' : 'all';
    const maxDepth = args.depth || 40;
    const maxChars = args.maxChars || 40000;
    const root = args.ref ? needEl(args.ref) : document.body || document.documentElement;
    const lines = [];
    let chars = 0, truncated = false, count = 0;
    const push = (s) => {
      if (truncated) return false;
      if (chars + s.length + 1 > maxChars) { truncated = true; return false; }
      lines.push(s); chars += s.length + 1; return true;
    };
    const walk = (node, indent, depth, suppressText) => {
      if (truncated) return;
      if (node.nodeType === 3) {
        if (filter === 'all' && !suppressText) {
          const t = clean(node.textContent, 200);
          if (t) push(`${'  '.repeat(indent)}- text "${t.replace(/"/g, '\\"')}"`);
        }
        return;
      }
      if (node.nodeType === 11) { for (const k of node.childNodes) walk(k, indent, depth, suppressText); return; }
      if (node.nodeType !== 1) return;
      const el = node;
      const tag = el.tagName;
      if (tag === 'SCRIPT' || tag === 'STYLE' || tag === 'NOSCRIPT' || tag === 'TEMPLATE' || tag === 'HEAD' || tag === 'META' || tag === 'LINK') return;
      if (!isVisible(el)) return;
      if (depth > maxDepth) { push(`${'  '.repeat(indent)}- … (deeper content omitted; read_page with ref=${refOf(el)})`); return; }
      const role = roleOf(el);
      let emitted = false;
      let childSuppress = suppressText;
      if (filter === 'interactive') {
        if (isInteractive(el, role)) { count++; push(line(describe(el), 0)); emitted = true; }
        if (role === 'combobox' && tag === 'SELECT') return;
      } else {
        const meaningful = role !== 'generic' && role !== 'none' && role !== 'presentation';
        const interactive = isInteractive(el, role);
        if (!interactive && !suppressText && (role === 'generic' || role === 'paragraph' || role === 'listitem' || role === 'cell' || role === 'code' || role === 'blockquote')
          && el.children.length && !el.shadowRoot && !el.querySelector(RICH)) {
          // Only inline text inside: one line instead of a line per text node.
          const t = clean(el.innerText, 300);
          if (!t) return;
          if (meaningful) {
            const d = describe(el);
            count++; push(`${line(d, indent)}: "${t.replace(/"/g, '\\"')}"`);
          } else push(`${'  '.repeat(indent)}- text "${t.replace(/"/g, '\\"')}"`);
          return;
        }
        if (meaningful || interactive || (el === root && args.ref)) {
          const d = describe(el);
          count++; push(line(d, indent)); emitted = true;
          if (NAME_FROM_CONTENT.has(role) && d.name) childSuppress = true;
          if (tag === 'SELECT') {
            for (const o of el.options) {
              if (truncated) break;
              const od = { ref: refOf(o), role: 'option', name: clean(o.label || o.text) };
              if (o.selected) od.props = ['selected'];
              if (o.disabled) od.props = [...(od.props || []), 'disabled'];
              count++; push(line(od, indent + 1));
            }
            return;
          }
          if (tag === 'TEXTAREA' || tag === 'IMG' || (tag && tag.toUpperCase() === 'SVG')) return;
        }
      }
      const nextIndent = emitted && filter === 'all' ? indent + 1 : indent;
      for (const k of childNodesOf(el)) walk(k, nextIndent, depth + 1, childSuppress);
      if (tag === 'IFRAME' && emitted && filter === 'all') {
        try {
          const doc = el.contentDocument;
          if (doc && doc.body) walk(doc.body, nextIndent, depth + 1, false);
        } catch { /* cross-origin */ }
      }
    };
    walk(root, 0, 0, false);
    return {
      url: location.href, title: document.title, filter, nodes: count, truncated,
      viewport: { width: innerWidth, height: innerHeight, scrollX: Math.round(scrollX), scrollY: Math.round(scrollY),
        pageWidth: document.documentElement.scrollWidth, pageHeight: document.documentElement.scrollHeight },
      text: lines.join('\n'),
    };
  }

  if (op === 'find') {
    const query = String(args.query || '').trim();
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
    let bySelector = null;
    try { bySelector = document.querySelectorAll(query); } catch { bySelector = null; }
    if (bySelector && bySelector.length) {
      const vis = [...bySelector].filter(isVisible);
      for (const el of vis.slice(0, limit)) pushEl(el, 100);
      return { mode: 'selector', matches: out, total: vis.length };
    }
    const ROLE_WORDS = {
      button: ['button'], btn: ['button'], link: ['link'], links: ['link'], input: ['textbox', 'searchbox', 'combobox', 'spinbutton'],
      field: ['textbox', 'searchbox', 'combobox', 'spinbutton'], textbox: ['textbox', 'searchbox'], box: ['textbox', 'searchbox', 'checkbox'],
      textarea: ['textbox'], search: ['searchbox'], checkbox: ['checkbox'], radio: ['radio'], dropdown: ['combobox', 'listbox'],
      select: ['combobox', 'listbox'], combobox: ['combobox'], menu: ['menu', 'menuitem', 'combobox'], image: ['img'], img: ['img'],
      picture: ['img'], icon: ['img', 'button'], logo: ['img', 'link'], heading: ['heading'], header: ['heading', 'banner'],
      title: ['heading'], tab: ['tab'], slider: ['slider'], switch: ['switch', 'checkbox'], toggle: ['switch', 'checkbox', 'button'],
      table: ['table'], row: ['row'], list: ['list'], item: ['listitem', 'option', 'menuitem'], option: ['option'],
      dialog: ['dialog'], modal: ['dialog'], form: ['form'], navigation: ['navigation'], nav: ['navigation'], paragraph: ['paragraph'],
    };
    const STOP = new Set(['the', 'a', 'an', 'to', 'for', 'of', 'on', 'in', 'with', 'that', 'which', 'is', 'and', 'or', 'at', 'by', 'element', 'elements', 'called', 'named', 'labeled', 'labelled', 'saying', 'says', 'containing', 'contains', 'text', 'this', 'page', 'near', 'all']);
    const tokens = query.toLowerCase().replace(/["'“”‘’]/g, ' ').split(/[^\p{L}\p{N}_@.-]+/u).filter((t) => t && !STOP.has(t));
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
        const own = [...el.childNodes].filter((n) => n.nodeType === 3).map((n) => n.textContent).join(' ').trim();
        if (!own) continue;
      }
      let score = 0;
      const name = nameOf(el, role).toLowerCase();
      const hay = [name, el.getAttribute('placeholder'), el.getAttribute('name'), el.id, el.getAttribute('title'),
        el.getAttribute('alt'), el.getAttribute('aria-label'), el.getAttribute('data-testid'), typeof el.className === 'string' ? el.className : '',
        role === 'generic' || role === 'paragraph' || role === 'listitem' || role === 'cell' ? textOf(el, 300) : ''].filter(Boolean).join(' ').toLowerCase();
      if (quoted && name.includes(quoted.toLowerCase())) score += 8;
      if (name && name === ql) score += 10;
      for (const w of words) {
        if (!hay.includes(w)) continue;
        score += name.includes(w) ? 3 : 1;
        if (new RegExp(`(^|[^\\p{L}\\p{N}])${w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}($|[^\\p{L}\\p{N}])`, 'u').test(name)) score += 1;
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
  }

  if (op === 'locate') {
    const el = needEl(args.ref);
    let r = el.getBoundingClientRect();
    if (args.scroll !== false && !(r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth)) {
      el.scrollIntoView({ block: 'center', inline: 'center', behavior: 'instant' });
      r = el.getBoundingClientRect();
    }
    if (r.width === 0 && r.height === 0) throw new Error(`element ${args.ref} has no size on screen (hidden?)`);
    const x = Math.round(r.left + r.width / 2), y = Math.round(r.top + r.height / 2);
    let hit = document.elementFromPoint(x, y);
    while (hit && hit.shadowRoot && hit.shadowRoot.elementFromPoint) {
      const inner = hit.shadowRoot.elementFromPoint(x, y);
      if (!inner || inner === hit) break;
      hit = inner;
    }
    const role = roleOf(el);
    const res = { x, y, rect: rectOf(el), role, name: nameOf(el, role) };
    if (hit && hit !== el && !el.contains(hit) && !hit.contains(el)) {
      const hr = roleOf(hit);
      res.obscuredBy = { ref: refOf(hit), role: hr, name: nameOf(hit, hr), tag: hit.tagName.toLowerCase() };
    }
    return res;
  }

  if (op === 'elementAt') {
    const el = document.elementFromPoint(args.x, args.y);
    if (!el) return null;
    const role = roleOf(el);
    return { ref: refOf(el), role, name: nameOf(el, role), tag: el.tagName.toLowerCase() };
  }

  if (op === 'describe') return describe(needEl(args.ref));

  if (op === 'formInput') {
    const el = needEl(args.ref);
    const role = roleOf(el);
    const tag = el.tagName;
    const type = tag === 'INPUT' ? (el.getAttribute('type') || 'text').toLowerCase() : '';
    const fire = (target, names) => { for (const n of names) target.dispatchEvent(new Event(n, { bubbles: true, composed: true })); };
    const value = args.value;
    const before = valueOf(el, role);
    if (el.disabled) throw new Error(`${args.ref} (${role} "${nameOf(el, role)}") is disabled`);
    el.scrollIntoView({ block: 'center', behavior: 'instant' });
    if (tag === 'INPUT' && type === 'file') throw new Error('this is a file input: use upload_image to put a file into it');
    if (tag === 'INPUT' && (type === 'checkbox' || type === 'radio') || role === 'checkbox' || role === 'radio' || role === 'switch') {
      const want = typeof value === 'boolean' ? value : !/^(false|0|off|no|unchecked|)$/i.test(String(value));
      const isNative = tag === 'INPUT';
      const current = isNative ? el.checked : el.getAttribute('aria-checked') === 'true';
      if (current !== want) {
        if (isNative && type === 'radio' && !want) { el.checked = false; fire(el, ['input', 'change']); }
        else el.click();
      }
      const now = isNative ? el.checked : el.getAttribute('aria-checked') === 'true';
      if (now !== want && isNative) { el.checked = want; fire(el, ['input', 'change']); }
      return { ref: args.ref, role, name: nameOf(el, role), checked: isNative ? el.checked : el.getAttribute('aria-checked') === 'true' };
    }
    if (tag === 'SELECT') {
      const wanted = (Array.isArray(value) ? value : [value]).map((v) => String(v));
      const opts = [...el.options];
      const pick = (v) => opts.find((o) => o.value === v) || opts.find((o) => clean(o.label || o.text).toLowerCase() === v.trim().toLowerCase())
        || opts.find((o) => clean(o.label || o.text).toLowerCase().includes(v.trim().toLowerCase()));
      const chosen = wanted.map((v) => { const o = pick(v); if (!o) throw new Error(`no option "${v}" in ${args.ref}; options: ${opts.slice(0, 30).map((o) => JSON.stringify(clean(o.label || o.text, 40))).join(', ')}`); return o; });
      if (!el.multiple && chosen.length > 1) throw new Error(`${args.ref} is a single-choice select; give one value`);
      el.focus();
      if (el.multiple) for (const o of opts) o.selected = chosen.includes(o);
      else el.value = chosen[0].value;
      fire(el, ['input', 'change']);
      return { ref: args.ref, role, name: nameOf(el, role), before, value: valueOf(el, role), selectedValues: [...el.selectedOptions].map((o) => o.value) };
    }
    if (tag === 'INPUT' || tag === 'TEXTAREA') {
      if (el.readOnly) throw new Error(`${args.ref} is read-only`);
      const v = value === null || value === undefined ? '' : String(value);
      el.focus();
      const proto = tag === 'INPUT' ? HTMLInputElement.prototype : HTMLTextAreaElement.prototype;
      const setter = Object.getOwnPropertyDescriptor(proto, 'value').set;
      setter.call(el, v);
      fire(el, ['input', 'change']);
      const after = el.value;
      const res = { ref: args.ref, role, name: nameOf(el, role), before, value: type === 'password' ? '•'.repeat(Math.min(after.length, 12)) : after };
      if (after !== v) res.note = `the field holds "${after}" after setting "${v}" (the input type or the page normalised it)`;
      return res;
    }
    if (el.isContentEditable) {
      el.focus();
      const sel = getSelection();
      sel.removeAllRanges();
      const range = document.createRange();
      range.selectNodeContents(el);
      sel.addRange(range);
      const v = value == null ? '' : String(value);
      if (!document.execCommand('insertText', false, v)) { el.textContent = v; fire(el, ['input']); }
      return { ref: args.ref, role, name: nameOf(el, role), before, value: clean(el.innerText, 200) };
    }
    throw new Error(`${args.ref} is a ${role} (<${tag.toLowerCase()}>), not a form field; use computer to click or type into it`);
  }

  if (op === 'text') {
    let root = null, source = 'body';
    if (args.ref) { root = needEl(args.ref); source = args.ref; }
    else if (args.selector) {
      root = document.querySelector(args.selector);
      if (!root) throw new Error(`no element matches ${args.selector}`);
      source = args.selector;
    } else if (!args.whole) {
      const arts = [...document.querySelectorAll('article')].filter(isVisible);
      const main = document.querySelector('main,[role=main]');
      const bodyLen = (document.body && document.body.innerText || '').length;
      if (arts.length === 1 && arts[0].innerText.length > 0.4 * bodyLen) { root = arts[0]; source = 'article'; }
      else if (main && isVisible(main) && main.innerText.length > 0.4 * bodyLen) { root = main; source = 'main'; }
    }
    root = root || document.body || document.documentElement;
    let text = root.innerText !== undefined ? root.innerText : root.textContent;
    text = String(text || '').replace(/[ \t\u00a0]+\n/g, '\n').replace(/\n{3,}/g, '\n\n').trim();
    return { url: location.href, title: document.title, source, text };
  }

  if (op === 'upload') {
    const el = needEl(args.ref);
    const files = (args.files || []).map((f) => {
      const bin = atob(f.base64);
      const bytes = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
      return new File([bytes], f.name, { type: f.mimeType, lastModified: Date.now() });
    });
    const dt = new DataTransfer();
    for (const f of files) dt.items.add(f);
    if (el.tagName === 'INPUT' && (el.getAttribute('type') || '').toLowerCase() === 'file') {
      if (el.disabled) throw new Error(`${args.ref} is disabled`);
      el.files = dt.files;
      el.dispatchEvent(new Event('input', { bubbles: true, composed: true }));
      el.dispatchEvent(new Event('change', { bubbles: true, composed: true }));
      return { ref: args.ref, mode: 'file-input', files: [...el.files].map((f) => ({ name: f.name, size: f.size, type: f.type })) };
    }
    el.scrollIntoView({ block: 'center', behavior: 'instant' });
    const r = el.getBoundingClientRect();
    const clientX = args.point ? args.point[0] : r.left + r.width / 2;
    const clientY = args.point ? args.point[1] : r.top + r.height / 2;
    const ev = (type) => new DragEvent(type, { bubbles: true, cancelable: true, composed: true, dataTransfer: dt, clientX, clientY });
    el.dispatchEvent(ev('dragenter'));
    el.dispatchEvent(ev('dragover'));
    const dropEv = ev('drop');
    const notCancelled = el.dispatchEvent(dropEv);
    return { ref: args.ref, mode: 'drop', accepted: !notCancelled || dropEv.defaultPrevented, files: files.map((f) => ({ name: f.name, size: f.size, type: f.type })) };
  }

  if (op === 'permissions') {
    const names = args.names || [];
    return Promise.all(names.map(async (name) => {
      try {
        const st = await navigator.permissions.query({ name });
        return [name, st.state];
      } catch (e) {
        return [name, 'unsupported'];
      }
    })).then((pairs) => ({ origin: location.origin, secureContext: isSecureContext, states: Object.fromEntries(pairs) }));
  }

  if (op === 'scrollInfo') {
    return { scrollX: Math.round(scrollX), scrollY: Math.round(scrollY), width: innerWidth, height: innerHeight,
      pageWidth: document.documentElement.scrollWidth, pageHeight: document.documentElement.scrollHeight };
  }

  throw new Error(`unknown page agent op ${op}`);
  }
}

/**
 * Runs pageAgent(op, args) in a tab's top frame (ISOLATED world) and returns
 * its value, or throws an Error with the agent's message.
 */
export async function runAgent(tabId, op, args = {}, { frameId = 0 } = {}) {
  let results;
  try {
    results = await chrome.scripting.executeScript({
      target: { tabId, frameIds: [frameId] },
      world: 'ISOLATED',
      func: pageAgent,
      args: [op, args],
    });
  } catch (e) {
    const msg = String((e && e.message) || e);
    if (/showing error page/i.test(msg)) {
      // Chrome's error page: the load failed (usePage in sw/pageload.js names the error when it knows it).
      throw new Error(`tab ${tabId} shows Chrome's error page: its page did not load. Call navigate with a working URL first`);
    }
    if (/Cannot access|cannot be scripted|chrome:\/\/|extensions gallery|Missing host permission/i.test(msg)) {
      throw new Error(`this page cannot be read or scripted by extensions (${msg})`);
    }
    throw new Error(msg);
  }
  const r = results && results[0] && results[0].result;
  if (!r) throw new Error('the page did not answer (it may be navigating; try again)');
  if (!r.ok) throw new Error(r.error);
  return r.value;
}
