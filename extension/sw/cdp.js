// chrome.debugger helpers: one attachment per tab (protocol "1.3"), commands
// with a timeout, input dispatch (mouse, keys, text) and per-tab capture of
// console messages and network requests from the moment a tool first uses a
// tab. Buffers are bounded and in memory; a summary goes to
// chrome.storage.session so a service-worker restart keeps what it can.

export const PROTOCOL_VERSION = '1.3';
export const BUFFER_LIMIT = 1000;
const PERSIST_LIMIT = 200; // entries per kind kept in storage.session
const PERSIST_DELAY_MS = 1000;
const STORAGE_PREFIX = 'bb.capture.';

const hasChrome = typeof chrome !== 'undefined' && chrome && chrome.debugger;

/** tabId -> Promise<void> of an attachment in progress or done. */
const attached = new Map();
/** tabId -> {console: [], network: [], byRequest: Map, restored: bool, dropped: {console, network}} */
const captures = new Map();
const persistTimers = new Map();
/**
 * tabId -> the main frame's last committed document as Page.frameNavigated
 * told it, {seq, loaderId, url, unreachableUrl}: what mainDocument would
 * otherwise ask the page for (Page.getFrameTree, a round trip to a renderer
 * that is often busy right after a load). seq orders the records of all tabs.
 */
const mainFrames = new Map();
let frameSeq = 0;
/**
 * webNavigation documentId -> its record of mainFrames, paired when the
 * document commits: a document restored from the back/forward cache is
 * told of (Page.frameNavigated) only after the tab says it loaded, but it
 * keeps its documentId. The newest DOCUMENTS_KEPT documents.
 */
const documents = new Map();
const DOCUMENTS_KEPT = 200;

// ---------------------------------------------------------------------------
// Attachment and commands

function lastErrorMessage() {
  return (
    (typeof chrome !== 'undefined' && chrome.runtime && chrome.runtime.lastError && chrome.runtime.lastError.message) ||
    ''
  );
}

/**
 * When the debugger's bar last appeared: our first attachment while none
 * was (Chrome then shows the bar above every tab, sliding it in).
 */
let barShownAt = 0;

/** Whether the debugger's bar has been up for ms at least (sw/steadyview.js). */
export function barUpFor(ms) {
  return attached.size > 0 && Date.now() - barShownAt >= ms;
}

/** Attaches the debugger to a tab once and enables the capture domains. */
export function attach(tabId) {
  let p = attached.get(tabId);
  if (p) return p;
  if (attached.size === 0) barShownAt = Date.now();
  p = (async () => {
    try {
      await chrome.debugger.attach({ tabId }, PROTOCOL_VERSION);
    } catch (e) {
      const msg = String((e && e.message) || e);
      // Another attach of ours may have raced us (worker restart keeps attachments).
      if (!/already attached/i.test(msg)) {
        throw new Error(`cannot control tab ${tabId} with the debugger: ${msg}`, { cause: e });
      }
    }
    await restoreCapture(tabId);
    // Capture domains. Failures here must not make the tab unusable.
    await Promise.allSettled([
      rawSend(tabId, 'Runtime.enable', {}, 5000),
      rawSend(tabId, 'Log.enable', {}, 5000),
      rawSend(tabId, 'Network.enable', { maxTotalBufferSize: 0, maxResourceBufferSize: 0 }, 5000),
      rawSend(tabId, 'Page.enable', {}, 5000),
    ]);
  })();
  attached.set(tabId, p);
  p.catch(() => attached.delete(tabId));
  return p;
}

/** Starts capturing console and network for a tab (idempotent). */
export function trackTab(tabId) {
  return attach(tabId);
}

export function isAttached(tabId) {
  return attached.has(tabId);
}

export async function detach(tabId) {
  const was = attached.has(tabId);
  attached.delete(tabId);
  if (!was) return;
  try {
    await chrome.debugger.detach({ tabId });
  } catch {
    /* already gone */
  }
}

function rawSend(tabId, method, params = {}, timeoutMs = 30000) {
  return new Promise((resolve, reject) => {
    let done = false;
    const timer = setTimeout(() => {
      if (done) return;
      done = true;
      reject(new Error(`${method} timed out after ${timeoutMs} ms`));
    }, timeoutMs);
    try {
      const maybe = chrome.debugger.sendCommand({ tabId }, method, params, (result) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        const err = lastErrorMessage();
        if (err) reject(new Error(`${method}: ${err}`));
        else resolve(result || {});
      });
      // Promise-style fakes.
      if (maybe && typeof maybe.then === 'function') {
        maybe.then(
          (result) => {
            if (done) return;
            done = true;
            clearTimeout(timer);
            resolve(result || {});
          },
          (e) => {
            if (done) return;
            done = true;
            clearTimeout(timer);
            reject(new Error(`${method}: ${(e && e.message) || e}`));
          },
        );
      }
    } catch (e) {
      done = true;
      clearTimeout(timer);
      reject(new Error(`${method}: ${(e && e.message) || e}`));
    }
  });
}

/** Sends a CDP command to a tab, attaching first. */
export async function send(tabId, method, params = {}, { timeoutMs = 30000 } = {}) {
  await attach(tabId);
  try {
    return await rawSend(tabId, method, params, timeoutMs);
  } catch (e) {
    // The attachment may have been lost (tab navigated to a chrome:// page,
    // the user closed the infobar): attach again once and retry.
    if (/not attached|detached|No target/i.test(e.message)) {
      attached.delete(tabId);
      await attach(tabId);
      return rawSend(tabId, method, params, timeoutMs);
    }
    throw e;
  }
}

// ---------------------------------------------------------------------------
// Capture buffers

function captureFor(tabId) {
  let c = captures.get(tabId);
  if (!c) {
    c = {
      console: [],
      network: [],
      byRequest: new Map(),
      restored: false,
      dropped: { console: 0, network: 0 },
      since: Date.now(),
    };
    captures.set(tabId, c);
  }
  return c;
}

function pushBounded(list, entry, c, kind) {
  list.push(entry);
  if (list.length > BUFFER_LIMIT) {
    const removed = list.splice(0, list.length - BUFFER_LIMIT);
    c.dropped[kind] += removed.length;
    if (kind === 'network') for (const r of removed) c.byRequest.delete(r.requestId);
  }
}

function remoteObjectToText(o) {
  if (!o) return '';
  if (o.type === 'string') return o.value;
  if ('unserializableValue' in o) return o.unserializableValue;
  if ('value' in o) {
    return o.value === null ? 'null' : typeof o.value === 'object' ? JSON.stringify(o.value) : String(o.value);
  }
  if (o.type === 'undefined') return 'undefined';
  if (o.preview && o.preview.properties) {
    const props = o.preview.properties.map((p) => `${p.name}: ${p.value ?? p.type}`).join(', ');
    return o.subtype === 'array'
      ? `[${props}${o.preview.overflow ? ', …' : ''}]`
      : `{${props}${o.preview.overflow ? ', …' : ''}}`;
  }
  return o.description || o.className || o.type;
}

const CONSOLE_LEVEL = {
  log: 'log',
  info: 'info',
  warning: 'warning',
  warn: 'warning',
  error: 'error',
  debug: 'debug',
  trace: 'debug',
  assert: 'error',
  dir: 'log',
  table: 'log',
  verbose: 'debug',
};

export function handleEvent(tabId, method, params) {
  if (method === 'Page.frameNavigated') {
    const f = params.frame;
    if (f && !f.parentId) {
      const restored = params.type === 'BackForwardCacheRestore';
      mainFrames.set(tabId, {
        seq: ++frameSeq,
        loaderId: f.loaderId,
        url: f.url,
        unreachableUrl: f.unreachableUrl,
        // A restored document was paired when it first committed.
        paired: restored,
      });
    }
    return;
  }
  const c = captureFor(tabId);
  switch (method) {
    case 'Runtime.consoleAPICalled': {
      const frame = params.stackTrace && params.stackTrace.callFrames && params.stackTrace.callFrames[0];
      pushBounded(
        c.console,
        {
          ts: params.timestamp ? Math.round(params.timestamp) : Date.now(),
          level: CONSOLE_LEVEL[params.type] || 'log',
          source: 'console',
          text: (params.args || []).map(remoteObjectToText).join(' '),
          url: frame ? frame.url : undefined,
          line: frame ? frame.lineNumber + 1 : undefined,
        },
        c,
        'console',
      );
      break;
    }
    case 'Runtime.exceptionThrown': {
      const d = params.exceptionDetails || {};
      pushBounded(
        c.console,
        {
          ts: params.timestamp ? Math.round(params.timestamp) : Date.now(),
          level: 'error',
          source: 'exception',
          text: (d.exception && d.exception.description) || d.text || 'Uncaught exception',
          url: d.url,
          line: d.lineNumber !== undefined ? d.lineNumber + 1 : undefined,
        },
        c,
        'console',
      );
      break;
    }
    case 'Log.entryAdded': {
      const e = params.entry || {};
      pushBounded(
        c.console,
        {
          ts: e.timestamp ? Math.round(e.timestamp) : Date.now(),
          level: CONSOLE_LEVEL[e.level] || 'log',
          source: e.source || 'log',
          text: e.text || '',
          url: e.url,
          line: e.lineNumber !== undefined ? e.lineNumber + 1 : undefined,
        },
        c,
        'console',
      );
      break;
    }
    case 'Network.requestWillBeSent': {
      const r = params.request || {};
      const prev = c.byRequest.get(params.requestId);
      if (prev && params.redirectResponse) {
        // A redirect: close the previous hop and start a new entry.
        prev.status = params.redirectResponse.status;
        prev.statusText = params.redirectResponse.statusText;
        prev.redirectedTo = r.url;
        prev.requestId = `${prev.requestId}#r`;
        c.byRequest.delete(params.requestId);
      }
      const entry = {
        requestId: params.requestId,
        ts: params.wallTime ? Math.round(params.wallTime * 1000) : Date.now(),
        started: params.timestamp,
        method: r.method,
        url: r.url,
        type: params.type || 'Other',
        status: undefined,
        statusText: undefined,
        mimeType: undefined,
        failed: false,
      };
      c.byRequest.set(params.requestId, entry);
      pushBounded(c.network, entry, c, 'network');
      break;
    }
    case 'Network.responseReceived': {
      const entry = c.byRequest.get(params.requestId);
      const resp = params.response || {};
      if (entry) {
        entry.status = resp.status;
        entry.statusText = resp.statusText;
        entry.mimeType = resp.mimeType;
        entry.fromCache = !!(resp.fromDiskCache || resp.fromServiceWorker || resp.fromPrefetchCache) || undefined;
        entry.remoteAddress = resp.remoteIPAddress ? `${resp.remoteIPAddress}:${resp.remotePort}` : undefined;
        if (params.type) entry.type = params.type;
      }
      break;
    }
    case 'Network.loadingFinished': {
      const entry = c.byRequest.get(params.requestId);
      if (entry) {
        entry.encodedBytes = params.encodedDataLength;
        if (entry.started !== undefined && params.timestamp) {
          entry.durationMs = Math.round((params.timestamp - entry.started) * 1000);
        }
      }
      break;
    }
    case 'Network.loadingFailed': {
      const entry = c.byRequest.get(params.requestId);
      if (entry) {
        entry.failed = true;
        entry.errorText = params.errorText || (params.canceled ? 'canceled' : 'failed');
        if (params.blockedReason) entry.blockedReason = params.blockedReason;
        if (entry.started !== undefined && params.timestamp) {
          entry.durationMs = Math.round((params.timestamp - entry.started) * 1000);
        }
      }
      break;
    }
    default:
      return;
  }
  schedulePersist(tabId);
}

function schedulePersist(tabId) {
  if (persistTimers.has(tabId)) return;
  if (typeof chrome === 'undefined' || !chrome.storage || !chrome.storage.session) return;
  persistTimers.set(
    tabId,
    setTimeout(() => {
      persistTimers.delete(tabId);
      const c = captures.get(tabId);
      if (!c) return;
      const strip = ({ started, ...rest }) => rest;
      chrome.storage.session
        .set({
          [STORAGE_PREFIX + tabId]: {
            console: c.console.slice(-PERSIST_LIMIT),
            network: c.network.slice(-PERSIST_LIMIT).map(strip),
            dropped: c.dropped,
            since: c.since,
          },
        })
        .catch(() => {});
    }, PERSIST_DELAY_MS),
  );
}

async function restoreCapture(tabId) {
  const c = captureFor(tabId);
  if (c.restored) return;
  c.restored = true;
  if (typeof chrome === 'undefined' || !chrome.storage || !chrome.storage.session) return;
  try {
    const key = STORAGE_PREFIX + tabId;
    const got = await chrome.storage.session.get(key);
    const saved = got && got[key];
    if (!saved) return;
    // Saved entries are older than anything captured since the restart.
    c.console = [...(saved.console || []), ...c.console].slice(-BUFFER_LIMIT);
    const restoredNet = (saved.network || []).map((e) => ({ ...e, requestId: `${e.requestId}#saved` }));
    c.network = [...restoredNet, ...c.network].slice(-BUFFER_LIMIT);
    c.dropped = saved.dropped || c.dropped;
    c.since = Math.min(saved.since || c.since, c.since);
  } catch {
    /* storage unavailable */
  }
}

/** Drops a tab's captured data (memory and storage). */
export function forgetTab(tabId) {
  captures.delete(tabId);
  mainFrames.delete(tabId);
  attached.delete(tabId);
  const t = persistTimers.get(tabId);
  if (t) clearTimeout(t);
  persistTimers.delete(tabId);
  if (typeof chrome !== 'undefined' && chrome.storage && chrome.storage.session) {
    chrome.storage.session.remove(STORAGE_PREFIX + tabId).catch(() => {});
  }
}

/** Compiles a user pattern: "/re/flags" or a plain regex source; an invalid regex becomes a substring match. */
export function compilePattern(pattern) {
  if (pattern === undefined || pattern === null || pattern === '') return null;
  const m = /^\/(.*)\/([gimsuy]*)$/s.exec(pattern);
  try {
    if (m) return new RegExp(m[1], m[2].replace('g', ''));
    return new RegExp(pattern, 'i');
  } catch {
    const needle = String(pattern).toLowerCase();
    return { test: (s) => String(s).toLowerCase().includes(needle) };
  }
}

const LEVEL_RANK = { debug: 0, log: 1, info: 1, warning: 2, error: 3 };

/** Filters console entries: {pattern, level (exact list or minimum with "+" suffix), limit}. Newest last. */
export function filterConsole(entries, { pattern, level, limit = 100 } = {}) {
  const re = compilePattern(pattern);
  let levels = null,
    minRank = null;
  if (Array.isArray(level)) levels = new Set(level.map((l) => CONSOLE_LEVEL[l] || l));
  else if (typeof level === 'string' && level.endsWith('+')) {
    minRank = LEVEL_RANK[CONSOLE_LEVEL[level.slice(0, -1)] || level.slice(0, -1)] ?? 0;
  } else if (typeof level === 'string' && level !== 'all') levels = new Set([CONSOLE_LEVEL[level] || level]);
  const out = entries.filter((e) => {
    if (levels && !levels.has(e.level)) return false;
    if (minRank !== null && (LEVEL_RANK[e.level] ?? 1) < minRank) return false;
    if (re && !re.test(e.text) && !(e.url && re.test(e.url))) return false;
    return true;
  });
  return limit > 0 ? out.slice(-limit) : out;
}

/** Matches a status filter: 200, "404", "4xx", "400-499", "failed", "pending", ">=400". */
export function statusMatches(filter, entry) {
  if (filter === undefined || filter === null || filter === '') return true;
  const f = String(filter).trim().toLowerCase();
  const s = entry.status;
  if (f === 'failed' || f === 'error') return entry.failed || (s !== undefined && s >= 400);
  if (f === 'pending') return s === undefined && !entry.failed;
  if (s === undefined) return false;
  let m;
  if ((m = /^(\d)xx$/.exec(f))) return Math.floor(s / 100) === Number(m[1]);
  if ((m = /^(\d{3})\s*-\s*(\d{3})$/.exec(f))) return s >= Number(m[1]) && s <= Number(m[2]);
  if ((m = /^(>=|<=|>|<)\s*(\d{3})$/.exec(f))) {
    const n = Number(m[2]);
    return m[1] === '>=' ? s >= n : m[1] === '<=' ? s <= n : m[1] === '>' ? s > n : s < n;
  }
  if (/^\d{3}$/.test(f)) return s === Number(f);
  return true;
}

/** Filters network entries: {urlPattern, method, status, type, limit}. Newest last. */
export function filterNetwork(entries, { urlPattern, method, status, type, limit = 100 } = {}) {
  const re = compilePattern(urlPattern);
  const meth = method ? String(method).toUpperCase() : null;
  const typ = type ? String(type).toLowerCase() : null;
  const out = entries.filter((e) => {
    if (re && !re.test(e.url || '')) return false;
    if (meth && String(e.method).toUpperCase() !== meth) return false;
    if (typ && String(e.type).toLowerCase() !== typ) return false;
    return statusMatches(status, e);
  });
  return limit > 0 ? out.slice(-limit) : out;
}

export async function readConsole(tabId, filters = {}) {
  await restoreCapture(tabId);
  const c = captureFor(tabId);
  const entries = filterConsole(c.console, filters);
  const info = { total: c.console.length, dropped: c.dropped.console, since: c.since };
  if (filters.clear) {
    c.console = [];
    c.dropped.console = 0;
    schedulePersist(tabId);
  }
  return { entries, ...info };
}

export async function readNetwork(tabId, filters = {}) {
  await restoreCapture(tabId);
  const c = captureFor(tabId);
  const entries = filterNetwork(c.network, filters).map(({ started, ...rest }) => rest);
  const info = { total: c.network.length, dropped: c.dropped.network, since: c.since };
  if (filters.clear) {
    c.network = [];
    c.byRequest.clear();
    c.dropped.network = 0;
    schedulePersist(tabId);
  }
  return { entries, ...info };
}

/**
 * webNavigation.onCommitted: pairs a main-frame document's id with the
 * record Page.frameNavigated made of it (which comes first when the
 * document is new) when their URLs agree. A record is offered to the first
 * commit after it only, so that one the capture saw late is never taken
 * for a later document's.
 */
export function onCommitted(d) {
  if (!d || d.frameId !== 0 || !d.documentId) return;
  const rec = mainFrames.get(d.tabId);
  if (!rec || rec.paired) return;
  rec.paired = true;
  if (rec.url !== String(d.url || '').split('#')[0]) return;
  documents.set(d.documentId, rec);
  if (documents.size > DOCUMENTS_KEPT) documents.delete(documents.keys().next().value);
}

/**
 * Where the tab's main-frame documents stand, for mainDocument's since: a
 * number that grows with each main-frame document the capture sees commit.
 * @param {number} tabId
 * @returns {number}
 */
export function mainFrameMark(tabId) {
  return mainFrames.get(tabId)?.seq ?? 0;
}

/**
 * The response of the tab's main document, from the capture: the main
 * frame's loader id is the request id of the document request that loaded
 * it. The frame is the one Page.frameNavigated told of when a document
 * committed after since (a mainFrameMark taken before the navigation), or
 * the one it told of when the document named by documentId (a committed
 * document's webNavigation id) first committed, else the page is asked
 * (Page.getFrameTree). Null when the debugger is not
 * attached to the tab or the capture did not see that request (a page
 * restored from the back/forward cache makes none).
 * @param {number} tabId
 * @param {{since?: number, documentId?: string}} [opts] omitted, the page is asked
 * @returns {Promise<{url: string, unreachableUrl?: string, status?: number, statusText?: string, errorText?: string}|null>}
 */
export async function mainDocument(tabId, { since, documentId } = {}) {
  if (!attached.has(tabId)) return null;
  const seen = mainFrames.get(tabId);
  let frame = since !== undefined && seen && seen.seq > since ? seen : null;
  if (!frame && documentId) frame = documents.get(documentId) || null;
  if (!frame) {
    try {
      frame = (await send(tabId, 'Page.getFrameTree', {}, { timeoutMs: 5000 })).frameTree?.frame;
    } catch {
      return null;
    }
  }
  const entry = frame && captures.get(tabId)?.byRequest.get(frame.loaderId);
  if (!entry) return null;
  return {
    url: frame.url,
    unreachableUrl: frame.unreachableUrl,
    status: entry.status,
    statusText: entry.statusText,
    errorText: entry.failed ? entry.errorText : undefined,
  };
}

export function captureStats() {
  const out = {};
  for (const [tabId, c] of captures) {
    out[tabId] = { console: c.console.length, network: c.network.length, attached: attached.has(tabId) };
  }
  return out;
}

// ---------------------------------------------------------------------------
// Keys

export const MODIFIER_BITS = { Alt: 1, Control: 2, Meta: 4, Shift: 8 };

const MODIFIER_ALIASES = {
  alt: 'Alt',
  option: 'Alt',
  opt: 'Alt',
  ctrl: 'Control',
  control: 'Control',
  ctl: 'Control',
  meta: 'Meta',
  cmd: 'Meta',
  command: 'Meta',
  super: 'Meta',
  win: 'Meta',
  windows: 'Meta',
  os: 'Meta',
  shift: 'Shift',
};

// key -> [code, keyCode, text?]
const NAMED_KEYS = {
  Enter: ['Enter', 13, '\r'],
  Tab: ['Tab', 9],
  Backspace: ['Backspace', 8],
  Delete: ['Delete', 46],
  Escape: ['Escape', 27],
  ' ': ['Space', 32, ' '],
  ArrowUp: ['ArrowUp', 38],
  ArrowDown: ['ArrowDown', 40],
  ArrowLeft: ['ArrowLeft', 37],
  ArrowRight: ['ArrowRight', 39],
  Home: ['Home', 36],
  End: ['End', 35],
  PageUp: ['PageUp', 33],
  PageDown: ['PageDown', 34],
  Insert: ['Insert', 45],
  CapsLock: ['CapsLock', 20],
  ContextMenu: ['ContextMenu', 93],
  Pause: ['Pause', 19],
  PrintScreen: ['PrintScreen', 44],
  Alt: ['AltLeft', 18],
  Control: ['ControlLeft', 17],
  Meta: ['MetaLeft', 91],
  Shift: ['ShiftLeft', 16],
};
for (let i = 1; i <= 12; i++) NAMED_KEYS[`F${i}`] = [`F${i}`, 111 + i];

const KEY_ALIASES = {
  enter: 'Enter',
  return: 'Enter',
  tab: 'Tab',
  backspace: 'Backspace',
  back_space: 'Backspace',
  bksp: 'Backspace',
  delete: 'Delete',
  del: 'Delete',
  escape: 'Escape',
  esc: 'Escape',
  space: ' ',
  spacebar: ' ',
  up: 'ArrowUp',
  arrowup: 'ArrowUp',
  down: 'ArrowDown',
  arrowdown: 'ArrowDown',
  left: 'ArrowLeft',
  arrowleft: 'ArrowLeft',
  right: 'ArrowRight',
  arrowright: 'ArrowRight',
  home: 'Home',
  end: 'End',
  pageup: 'PageUp',
  page_up: 'PageUp',
  pgup: 'PageUp',
  pagedown: 'PageDown',
  page_down: 'PageDown',
  pgdn: 'PageDown',
  insert: 'Insert',
  ins: 'Insert',
  capslock: 'CapsLock',
  contextmenu: 'ContextMenu',
  menu: 'ContextMenu',
  pause: 'Pause',
  printscreen: 'PrintScreen',
  plus: '+',
  minus: '-',
};

// US layout punctuation: char -> [code, keyCode, shifted?]
const PUNCT = {
  '-': ['Minus', 189],
  '=': ['Equal', 187],
  '[': ['BracketLeft', 219],
  ']': ['BracketRight', 221],
  '\\': ['Backslash', 220],
  ';': ['Semicolon', 186],
  "'": ['Quote', 222],
  ',': ['Comma', 188],
  '.': ['Period', 190],
  '/': ['Slash', 191],
  '`': ['Backquote', 192],
  _: ['Minus', 189, 1],
  '+': ['Equal', 187, 1],
  '{': ['BracketLeft', 219, 1],
  '}': ['BracketRight', 221, 1],
  '|': ['Backslash', 220, 1],
  ':': ['Semicolon', 186, 1],
  '"': ['Quote', 222, 1],
  '<': ['Comma', 188, 1],
  '>': ['Period', 190, 1],
  '?': ['Slash', 191, 1],
  '~': ['Backquote', 192, 1],
  '!': ['Digit1', 49, 1],
  '@': ['Digit2', 50, 1],
  '#': ['Digit3', 51, 1],
  $: ['Digit4', 52, 1],
  '%': ['Digit5', 53, 1],
  '^': ['Digit6', 54, 1],
  '&': ['Digit7', 55, 1],
  '*': ['Digit8', 56, 1],
  '(': ['Digit9', 57, 1],
  ')': ['Digit0', 48, 1],
};

/** Describes one key (no modifiers) for Input.dispatchKeyEvent: {key, code, keyCode, text?}. */
export function describeKey(name, shift = false) {
  if (typeof name !== 'string' || name === '') throw new Error('empty key name');
  let key = name;
  if (name.length > 1) {
    const alias = KEY_ALIASES[name.toLowerCase()];
    if (alias) key = alias;
    else {
      const exact = Object.keys(NAMED_KEYS).find((k) => k.toLowerCase() === name.toLowerCase());
      if (exact) key = exact;
      else if (MODIFIER_ALIASES[name.toLowerCase()]) key = MODIFIER_ALIASES[name.toLowerCase()];
      else throw new Error(`unknown key "${name}"`);
    }
  }
  if (NAMED_KEYS[key]) {
    const [code, keyCode, text] = NAMED_KEYS[key];
    return text === undefined ? { key, code, keyCode } : { key, code, keyCode, text };
  }
  if (/^[a-zA-Z]$/.test(key)) {
    const upper = key.toUpperCase();
    const ch = shift || key !== key.toLowerCase() ? upper : key.toLowerCase();
    return { key: ch, code: `Key${upper}`, keyCode: upper.charCodeAt(0), text: ch };
  }
  if (/^[0-9]$/.test(key)) {
    return { key, code: `Digit${key}`, keyCode: key.charCodeAt(0), text: key };
  }
  if (PUNCT[key]) {
    const [code, keyCode] = PUNCT[key];
    return { key, code, keyCode, text: key };
  }
  if ([...key].length === 1) {
    // Any other character (non-US letters, symbols): no physical key.
    return { key, code: '', keyCode: 0, text: key };
  }
  throw new Error(`unknown key "${name}"`);
}

/**
 * Parses one chord such as "ctrl+shift+t", "Enter", "cmd+a", "ctrl++" or "+".
 * Returns {modifiers: bitmask, modifierKeys: ["Control", …], key: describeKey(…)}.
 */
export function parseChord(chord) {
  if (typeof chord !== 'string' || chord.trim() === '') throw new Error('empty key chord');
  const s = chord.trim();
  let parts;
  if (s === '+') parts = ['+'];
  else if (s.endsWith('++')) parts = [...s.slice(0, -2).split('+'), '+'];
  else parts = s.split('+');
  if (parts.some((p) => p === '')) throw new Error(`malformed key chord "${chord}"`);
  const modifierKeys = [];
  let modifiers = 0;
  for (const p of parts.slice(0, -1)) {
    const m = MODIFIER_ALIASES[p.toLowerCase()] || (MODIFIER_BITS[p] ? p : null);
    if (!m) throw new Error(`"${p}" in "${chord}" is not a modifier (use ctrl, alt, shift, meta/cmd)`);
    if (!modifierKeys.includes(m)) {
      modifierKeys.push(m);
      modifiers |= MODIFIER_BITS[m];
    }
  }
  const last = parts[parts.length - 1];
  const lastMod = MODIFIER_ALIASES[last.toLowerCase()];
  const key = describeKey(lastMod || last, !!(modifiers & MODIFIER_BITS.Shift));
  return { modifiers, modifierKeys, key };
}

/** Splits a key sequence ("ctrl+a Delete", "Tab Tab Enter") into chords. */
export function parseKeySequence(text) {
  if (typeof text !== 'string' || text.trim() === '') throw new Error('no keys given');
  return text.trim().split(/\s+/).map(parseChord);
}

const EDIT_COMMANDS = { a: 'selectAll', c: 'copy', v: 'paste', x: 'cut', z: 'undo', y: 'redo' };

/** The Input.dispatchKeyEvent parameter objects for one chord, in order. */
export function chordEvents(chord) {
  const events = [];
  let mods = 0;
  for (const m of chord.modifierKeys) {
    mods |= MODIFIER_BITS[m];
    const d = describeKey(m);
    events.push({ type: 'rawKeyDown', modifiers: mods, key: d.key, code: d.code, windowsVirtualKeyCode: d.keyCode });
  }
  const k = chord.key;
  const isModifierKey = MODIFIER_BITS[k.key] !== undefined;
  const printable =
    k.text !== undefined && !(chord.modifiers & (MODIFIER_BITS.Control | MODIFIER_BITS.Alt | MODIFIER_BITS.Meta));
  if (!isModifierKey) {
    const down = {
      type: printable ? 'keyDown' : 'rawKeyDown',
      modifiers: chord.modifiers,
      key: k.key,
      code: k.code,
      windowsVirtualKeyCode: k.keyCode,
    };
    if (printable) {
      down.text = k.text;
      down.unmodifiedText = k.text;
    }
    const cmd =
      chord.modifiers & (MODIFIER_BITS.Control | MODIFIER_BITS.Meta) && !(chord.modifiers & MODIFIER_BITS.Alt)
        ? EDIT_COMMANDS[k.key.toLowerCase()]
        : undefined;
    if (cmd && !(cmd === 'undo' && chord.modifiers & MODIFIER_BITS.Shift)) down.commands = [cmd];
    if (
      k.code === 'KeyZ' &&
      chord.modifiers & MODIFIER_BITS.Shift &&
      chord.modifiers & (MODIFIER_BITS.Control | MODIFIER_BITS.Meta)
    ) {
      down.commands = ['redo'];
    }
    events.push(down);
    events.push({
      type: 'keyUp',
      modifiers: chord.modifiers,
      key: k.key,
      code: k.code,
      windowsVirtualKeyCode: k.keyCode,
    });
  }
  for (const m of [...chord.modifierKeys].reverse()) {
    const d = describeKey(m);
    mods &= ~MODIFIER_BITS[m];
    events.push({ type: 'keyUp', modifiers: mods, key: d.key, code: d.code, windowsVirtualKeyCode: d.keyCode });
  }
  return events;
}

export async function pressKeys(tabId, text, { repeat = 1, signal } = {}) {
  const chords = parseKeySequence(text);
  for (let r = 0; r < repeat; r++) {
    for (const chord of chords) {
      if (signal && signal.aborted) throw new Error('cancelled');
      for (const ev of chordEvents(chord)) await send(tabId, 'Input.dispatchKeyEvent', ev);
    }
  }
  return chords.length * repeat;
}

/** Types text: Input.insertText for runs of characters, Enter/Tab key presses for "\n" and "\t". */
export async function typeText(tabId, text, { signal } = {}) {
  const parts = String(text).split(/(\r\n|\n|\t)/);
  for (const part of parts) {
    if (signal && signal.aborted) throw new Error('cancelled');
    if (part === '') continue;
    if (part === '\n' || part === '\r\n') await pressKeys(tabId, 'Enter');
    else if (part === '\t') await pressKeys(tabId, 'Tab');
    else await send(tabId, 'Input.insertText', { text: part });
  }
}

// ---------------------------------------------------------------------------
// Mouse

const BUTTON_BITS = { none: 0, left: 1, right: 2, middle: 4 };

export async function mouseMove(tabId, x, y, { buttons = 0, modifiers = 0 } = {}) {
  await send(tabId, 'Input.dispatchMouseEvent', { type: 'mouseMoved', x, y, buttons, modifiers });
}

export async function mouseClick(tabId, x, y, { button = 'left', clickCount = 1, modifiers = 0 } = {}) {
  await mouseMove(tabId, x, y, { modifiers });
  for (let i = 1; i <= clickCount; i++) {
    await send(tabId, 'Input.dispatchMouseEvent', {
      type: 'mousePressed',
      x,
      y,
      button,
      buttons: BUTTON_BITS[button] || 0,
      clickCount: i,
      modifiers,
    });
    await send(tabId, 'Input.dispatchMouseEvent', {
      type: 'mouseReleased',
      x,
      y,
      button,
      buttons: 0,
      clickCount: i,
      modifiers,
    });
  }
}

export async function mouseDrag(tabId, from, to, { steps = 10, modifiers = 0 } = {}) {
  await mouseMove(tabId, from[0], from[1], { modifiers });
  await send(tabId, 'Input.dispatchMouseEvent', {
    type: 'mousePressed',
    x: from[0],
    y: from[1],
    button: 'left',
    buttons: 1,
    clickCount: 1,
    modifiers,
  });
  for (let i = 1; i <= steps; i++) {
    const x = from[0] + ((to[0] - from[0]) * i) / steps;
    const y = from[1] + ((to[1] - from[1]) * i) / steps;
    await send(tabId, 'Input.dispatchMouseEvent', { type: 'mouseMoved', x, y, button: 'left', buttons: 1, modifiers });
  }
  await send(tabId, 'Input.dispatchMouseEvent', {
    type: 'mouseReleased',
    x: to[0],
    y: to[1],
    button: 'left',
    buttons: 0,
    clickCount: 1,
    modifiers,
  });
}

export async function mouseWheel(tabId, x, y, deltaX, deltaY, { modifiers = 0 } = {}) {
  await send(tabId, 'Input.dispatchMouseEvent', { type: 'mouseWheel', x, y, deltaX, deltaY, modifiers });
}

// ---------------------------------------------------------------------------
// Listeners (top level, so a restarted worker gets events at once)

if (hasChrome) {
  chrome.debugger.onEvent.addListener((source, method, params) => {
    if (source && source.tabId !== undefined) handleEvent(source.tabId, method, params || {});
  });
  chrome.webNavigation?.onCommitted.addListener(onCommitted);
  chrome.debugger.onDetach.addListener((source) => {
    if (source?.tabId === undefined) return;
    attached.delete(source.tabId);
    // Detached, the tab's next documents go unseen: its record would grow stale.
    mainFrames.delete(source.tabId);
  });
  if (chrome.tabs && chrome.tabs.onRemoved) {
    chrome.tabs.onRemoved.addListener((tabId) => forgetTab(tabId));
  }
}

/**
 * Resolves the tab a tool acts on (the session's current tab unless tabId is
 * given; opts.create as in sessions.resolveTab) and starts capturing its
 * console and network traffic. A page the debugger cannot attach to
 * (chrome://, the web store) is still returned.
 */
export async function useTab(ctx, tabId, opts) {
  const tab = await ctx.resolveTab(tabId, opts);
  try {
    await trackTab(tab.id);
  } catch {
    /* tools that need CDP will say why */
  }
  return bringToFrontIfOwn(ctx, tab);
}

/**
 * A tab behind another in its window is hidden, and Chromium throttles
 * hidden tabs: screenshots stall and input lags by seconds. So a session's
 * own tab is brought to the front of its window before it is used. Each
 * session works in its own window once another session is active, so this
 * never changes what another session sees; a tab of another session (named
 * by id) is used where it is.
 */
async function bringToFrontIfOwn(ctx, tab) {
  if (tab.active || !ctx.sessions?.sessionTabs) return tab;
  const own = await ctx.sessions.sessionTabs(ctx.session).catch(() => []);
  if (!own.some((t) => t.id === tab.id)) return tab;
  try {
    return await chrome.tabs.update(tab.id, { active: true });
  } catch {
    return tab;
  }
}
