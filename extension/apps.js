// MCP Apps (spec 002, "MCP Apps (Rich UI)"): shows the ui:// resource of a
// remote server's tool as an interactive page. Opened as
// apps.html?server=<name>&uri=ui://…, it asks the service worker to read the
// resource (remote.openApp) and renders the HTML in a sandboxed iframe.
//
// Frames: apps.html (this page, extension origin, talks to the worker)
//   └ apps-frame.html (a manifest "sandbox" page: opaque origin and its own
//     CSP, so the app's inline scripts may run; no extension APIs)
//       └ <iframe sandbox="allow-scripts allow-forms" srcdoc="…the app…">
// apps-frame.html relays JSON-RPC messages between this page and the app,
// and announces itself with sandbox/ready and sandbox/loaded (which the app
// cannot send: the relay drops sandbox/* from it).
//
// The bridge (spec 002's postMessage names):
//   page → app, once the app has loaded: {jsonrpc, method: "toolResult", params: CallToolResult}
//     (the latest result of a tool of this server that pointed at this resource, if any)
//   app → page: {jsonrpc, id, method: "tools/call", params: {name, arguments}}
//     → the CallToolResult, or an error; only tools of the app's own server
//     that are not turned off (the worker checks again, remote.appCall)
//   app → page: {jsonrpc, id, method: "context/update", params} → {ok: true}
// Everything else with an id is answered -32601; malformed messages -32600.

/** JSON-RPC methods an app may send. */
export const APP_METHODS = Object.freeze(['tools/call', 'context/update']);
/** Largest message accepted from an app (characters of JSON). */
export const MAX_APP_MESSAGE_CHARS = 1 << 20;
/** Tool calls one app may have in flight. */
export const MAX_IN_FLIGHT = 8;

const isPlainObject = (v) => !!v && typeof v === 'object' && !Array.isArray(v);
const validId = (id) => typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id));

/**
 * Checks one message from an app.
 * @param {*} msg the event's data
 * @returns {{ignore: true} | {id: *, error: {code: number, message: string}} | {id: *, method: string, params: object}}
 */
export function checkAppMessage(msg) {
  if (!isPlainObject(msg) || msg.jsonrpc !== '2.0') {
    return {
      id: validId(msg?.id) ? msg.id : null,
      error: { code: -32600, message: 'message is not a JSON-RPC 2.0 request' },
    };
  }
  if (typeof msg.method !== 'string') return { ignore: true }; // a reply: the page sends no requests
  if (msg.id === undefined || msg.id === null) return { ignore: true }; // notifications need no answer
  if (!validId(msg.id)) {
    return { id: null, error: { code: -32600, message: 'request id must be a string or a number' } };
  }
  let size;
  try {
    size = JSON.stringify(msg).length;
  } catch {
    return { id: msg.id, error: { code: -32600, message: 'message is not JSON' } };
  }
  if (size > MAX_APP_MESSAGE_CHARS) {
    return {
      id: msg.id,
      error: { code: -32600, message: `message of ${size} characters exceeds the ${MAX_APP_MESSAGE_CHARS} limit` },
    };
  }
  if (!APP_METHODS.includes(msg.method)) {
    return { id: msg.id, error: { code: -32601, message: `method not available to MCP Apps: ${msg.method}` } };
  }
  const params = msg.params === undefined ? {} : msg.params;
  if (!isPlainObject(params)) return { id: msg.id, error: { code: -32602, message: 'params: must be an object' } };
  if (msg.method === 'tools/call') {
    if (typeof params.name !== 'string' || !params.name || params.name.length > 128) {
      return { id: msg.id, error: { code: -32602, message: 'params.name: the tool name is required' } };
    }
    if (params.arguments !== undefined && !isPlainObject(params.arguments)) {
      return { id: msg.id, error: { code: -32602, message: 'params.arguments: must be an object' } };
    }
  }
  return { id: msg.id, method: msg.method, params };
}

/**
 * The page's side of the bridge.
 * @param {{post: (msg: object) => void, callTool: (name: string, args: object) => Promise<object>, maxInFlight?: number}} opts
 *   post sends a message to the app; callTool runs a tool of the app's server
 * @returns {{receive: (data: *) => Promise<void>}}
 */
export function createAppBridge({ post, callTool, maxInFlight = MAX_IN_FLIGHT }) {
  let inFlight = 0;
  const answer = (id, result) => post({ jsonrpc: '2.0', id, result });
  const fail = (id, code, message) => post({ jsonrpc: '2.0', id, error: { code, message } });
  return {
    async receive(data) {
      const m = checkAppMessage(data);
      if (m.ignore) return;
      if (m.error) return fail(m.id, m.error.code, m.error.message);
      if (m.method === 'context/update') return answer(m.id, { ok: true });
      if (inFlight >= maxInFlight) return fail(m.id, -32000, `at most ${maxInFlight} tool calls at once`);
      inFlight++;
      try {
        answer(m.id, await callTool(m.params.name, m.params.arguments ?? {}));
      } catch (err) {
        fail(m.id, Number.isInteger(err?.code) ? err.code : -32000, err?.message || String(err));
      } finally {
        inFlight--;
      }
    },
  };
}

// ---------------------------------------------------------------------------
// The page.

async function ask(msg) {
  const res = await chrome.runtime.sendMessage(msg);
  if (!res?.ok) throw new Error(res?.error || 'the service worker did not answer');
  return res.result;
}

function main() {
  const $ = (id) => document.getElementById(id);
  const q = new URLSearchParams(location.search);
  const server = q.get('server') || '';
  const uri = q.get('uri') || '';
  const status = (text, cls = '') => {
    $('status').textContent = text;
    $('status').className = cls;
  };
  $('uri').textContent = uri || '(none)';
  $('server').textContent = server || '(none)';

  let frame = null;
  let bridge = null;
  let app = null;

  window.addEventListener('message', (ev) => {
    if (!frame || ev.source !== frame.contentWindow) return; // only the relay of our own frame
    const d = ev.data;
    if (d?.jsonrpc === '2.0' && d.method === 'sandbox/ready' && d.id === undefined) {
      frame.contentWindow.postMessage({ jsonrpc: '2.0', method: 'sandbox/render', params: { html: app.html } }, '*');
      return;
    }
    if (d?.jsonrpc === '2.0' && d.method === 'sandbox/loaded' && d.id === undefined) {
      status('');
      $('frame').setAttribute('aria-busy', 'false');
      if (app.toolResult) {
        const { content = [], structuredContent, isError = false, _meta } = app.toolResult;
        const params = { content, isError: !!isError };
        if (structuredContent !== undefined) params.structuredContent = structuredContent;
        if (_meta !== undefined) params._meta = _meta;
        frame.contentWindow.postMessage({ jsonrpc: '2.0', method: 'toolResult', params }, '*');
      }
      return;
    }
    bridge.receive(d);
  });

  async function load() {
    frame?.remove();
    frame = null;
    $('frame').setAttribute('aria-busy', 'true');
    if (!server || !uri.startsWith('ui://')) {
      status('Open this page as apps.html?server=<name>&uri=ui://… (the options page links each app).', 'bad');
      return;
    }
    status('Loading the app…', 'muted');
    try {
      app = await ask({ type: 'remote.openApp', server, uri });
    } catch (err) {
      status(err.message, 'bad');
      return;
    }
    document.title = `${app.title}: ${uri}`;
    $('server').textContent = app.title;
    const f = document.createElement('iframe');
    f.src = 'apps-frame.html';
    f.setAttribute('sandbox', 'allow-scripts allow-forms');
    f.title = `MCP App ${uri} of ${app.title}`;
    bridge = createAppBridge({
      post: (msg) => f.contentWindow?.postMessage(msg, '*'),
      callTool: (name, args) => ask({ type: 'remote.appCall', server, uri, name, arguments: args }),
    });
    frame = f;
    $('frame').replaceChildren(f);
  }

  $('reload').addEventListener('click', () => load());
  load();
}

if (typeof document !== 'undefined' && globalThis.chrome?.runtime?.id) main();
