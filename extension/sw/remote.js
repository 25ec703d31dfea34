// Remote MCP servers (spec 000 and 002) on the service worker's side: the
// server list, one RemoteServer (remote/client.js) per enabled server, the
// chrome platform those servers run on, token refresh by alarms, and the
// JSON-RPC methods the bridge calls.
//
// Bridge → extension (registered in background.js):
//   remote.list  {}                                  → {servers: [{name, title, url, state, message, tools}]}
//                enabled servers only; tools without those the user turned off;
//                name is a DNS-label slug ([a-z0-9-], ≤ 63, unique) of the server id.
//   remote.call  {server, name, arguments, _meta?}   → the remote's CallToolResult;
//                -32602 for an unknown server or a tool turned off, -32000 with a
//                sentence when the server needs sign-in, is down or the call fails.
// Extension → bridge: the notification remote.changed (no params) whenever
// what remote.list would answer changes (servers, states, messages, tools,
// including the remote's own tools/list_changed); the bridge lists again.
//
// The options page and the MCP Apps page send runtime messages
// {type: 'remote.<verb>', …} that background.js hands to pageMessage().
//
// Storage:
//   local   remoteServers          {custom: [{id, title, url, headers?, scopes?, clientId?, clientSecret?}],
//                                   enabled: {id: true}, disabledTools: {id: [tool names]}, developerMode: bool}
//                                   clientId/clientSecret: credentials the user's authorization server
//                                   issued (built-ins have none); the secret goes to the RemoteServer
//                                   only, never into status, remote.list or logs
//   local   remote.auth.<id>.<key> what a RemoteServer keeps (tokens, client registration, e.g.
//                                   remote.auth.notion.oauth.notion.tokens) through its platform's
//                                   storage; removed with a custom server
//   session remoteStates           {[id]: {state, message, tools, at}}: the last state and tools
//                                   of each enabled server, for the pages and after a worker restart
//   session remoteAppResults       [{id, uri, result, at}]: recent tool results that carry an
//                                   MCP App (ui:// resource), newest first, for apps.html
// RemoteServer instances live in memory only: a restarted worker creates them
// again lazily (on remote.list, remote.call, a refresh alarm or a page's
// request) and they reload their tokens from storage.
//
// Alarms: one per server with a token that expires, named
// REFRESH_ALARM_PREFIX + id, set REFRESH_AHEAD_MS before the expiry. Chrome
// only delivers alarms to listeners registered at top level, so background.js
// registers chrome.alarms.onAlarm and passes every alarm to onAlarm() here,
// which ignores the ones that are not its own.
//
// background.js must call init({RemoteServer}) at top level before the
// handlers run: the class is passed in (not imported here) so that this
// module and its tests do not depend on the remote core being loadable.

import * as rpc from './rpc.js';
import * as store from './store.js';

/** Key in chrome.storage.local of the server list and its switches. */
export const CONFIG_KEY = 'remoteServers';
/** Key in chrome.storage.session of each enabled server's last state and tools. */
export const STATES_KEY = 'remoteStates';
/** Key in chrome.storage.session of recent tool results that carry an MCP App. */
export const APP_RESULTS_KEY = 'remoteAppResults';
/** Prefix of the chrome.storage.local keys a RemoteServer keeps: AUTH_PREFIX + id + '.' + key. */
export const AUTH_PREFIX = 'remote.auth.';
/** Prefix of the token-refresh alarms: REFRESH_ALARM_PREFIX + server id. */
export const REFRESH_ALARM_PREFIX = 'remote-refresh:';
/** How long before a token expires it is refreshed (spec 002: a 5-minute buffer). */
export const REFRESH_AHEAD_MS = 5 * 60_000;
/** When a refresh fails while the token is still valid, the next try comes this much later. */
export const REFRESH_RETRY_MS = 60_000;
/** How long remote.call and the pages wait for a connection in progress. */
export const CONNECT_WAIT_MS = 20_000;
/** Delay that gathers a burst of changes into one remote.changed. */
export const NOTIFY_DELAY_MS = 50;
/** How many MCP App tool results are kept, and the largest one kept (characters of JSON). */
export const APP_RESULTS_MAX = 10;
export const APP_RESULT_MAX_CHARS = 256 * 1024;
/** Largest MCP App document the apps page accepts. */
export const APP_HTML_MAX_CHARS = 5 * 1024 * 1024;

/** The JSON-RPC code of a remote server that cannot answer (sign-in needed, down, failed). */
export const UNAVAILABLE = -32000;

/**
 * Servers offered without configuration (the ones spec 000 names). They hold
 * no secrets: each signs in with OAuth (discovery and dynamic client
 * registration) or needs no sign-in at all. All start disabled.
 */
export const BUILTIN_SERVERS = Object.freeze([
  { id: 'notion', title: 'Notion', url: 'https://mcp.notion.com/mcp' },
  { id: 'linear', title: 'Linear', url: 'https://mcp.linear.app/mcp' },
  { id: 'ahrefs', title: 'Ahrefs', url: 'https://api.ahrefs.com/mcp/mcp' },
  { id: 'supabase', title: 'Supabase', url: 'https://mcp.supabase.com/mcp' },
  { id: 'context7', title: 'Context7', url: 'https://mcp.context7.com/mcp' },
  { id: 'deepwiki', title: 'DeepWiki', url: 'https://mcp.deepwiki.com/mcp' },
].map((s) => Object.freeze(s)));

/** States in which only the user signing in again helps. */
const SIGN_IN_STATES = new Set(['needs-auth', 'invalid-token']);

// ---------------------------------------------------------------------------
// Pure helpers: names, validation of what the options page sends.

/**
 * A DNS-label-safe slug: lowercase [a-z0-9-], no leading or trailing '-',
 * at most `max` characters, never empty ("server").
 * @param {string} s
 * @param {number} [max]
 * @returns {string}
 */
export function slug(s, max = 63) {
  const out = String(s ?? '').toLowerCase().normalize('NFKD').replace(/[^a-z0-9]+/g, '-')
    .slice(0, max).replace(/^-+|-+$/g, '');
  return out || 'server';
}

/**
 * The bridge-facing names of servers, in order: slug(id), made unique with
 * "-2", "-3"… (cut so that the result stays within 63 characters).
 * @param {Array<{id: string}>} servers
 * @returns {Map<string, string>} id → name
 */
export function serverNames(servers) {
  const taken = new Set();
  const out = new Map();
  for (const { id } of servers) {
    const base = slug(id);
    let name = base;
    for (let n = 2; taken.has(name); n++) {
      const suffix = `-${n}`;
      name = `${base.slice(0, 63 - suffix.length).replace(/-+$/, '')}${suffix}`;
    }
    taken.add(name);
    out.set(id, name);
  }
  return out;
}

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * Checks the URL of a custom server: https only, except http://localhost,
 * 127.0.0.1 and [::1] in developer mode; no credentials or fragment; and no
 * literal address spec 002 blocks (loopback outside developer mode, private
 * and link-local ranges, cloud metadata). Names that resolve to such
 * addresses are the remote core's business (platform.resolve).
 * @param {string} raw
 * @param {{developerMode?: boolean}} [opts]
 * @returns {string} the normalised URL
 * @throws {Error} with a sentence saying what is wrong
 */
export function validateServerUrl(raw, { developerMode = false } = {}) {
  let u;
  try {
    u = new URL(String(raw ?? '').trim());
  } catch {
    throw new Error(`"${String(raw ?? '').slice(0, 200)}" is not a URL; give the server's full address, e.g. https://mcp.example.com/mcp.`);
  }
  const host = u.hostname.toLowerCase();
  const loopback = LOOPBACK_HOSTS.has(host) || /^127\./.test(host);
  if (u.protocol === 'http:') {
    if (!(developerMode && LOOPBACK_HOSTS.has(host))) {
      throw new Error(developerMode
        ? 'Plain http is allowed only for localhost, 127.0.0.1 and [::1]; use https for other servers.'
        : 'The URL must start with https:// (http://localhost and 127.0.0.1 are allowed in developer mode).');
    }
  } else if (u.protocol !== 'https:') {
    throw new Error(`The URL must start with https://, not ${u.protocol}//.`);
  }
  if (u.username || u.password) throw new Error('Put credentials in a header, not in the URL.');
  if (u.hash) throw new Error('The URL must not have a #fragment.');
  if (loopback || host.endsWith('.localhost')) {
    if (!developerMode) throw new Error('Servers on this computer (localhost, 127.x, ::1) are allowed only in developer mode.');
  } else if (isBlockedHost(host)) {
    throw new Error(`${host} is a private, link-local or metadata address; remote servers must be on the public internet.`);
  }
  return u.href;
}

function isBlockedHost(host) {
  if (host === 'metadata.google.internal' || host === 'metadata') return true;
  const v4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(host);
  if (v4) {
    const [a, b] = [Number(v4[1]), Number(v4[2])];
    return a === 0 || a === 10 || a === 127 || (a === 169 && b === 254) || (a === 172 && b >= 16 && b <= 31)
      || (a === 192 && b === 168) || (a === 100 && b >= 64 && b <= 127);
  }
  if (host.startsWith('[')) {
    const h = host.slice(1, -1);
    return h === '::' || h === '::1' || /^f[cd][0-9a-f]{0,2}:/.test(h) || /^fe[89ab][0-9a-f]?:/.test(h)
      || /^::ffff:/.test(h);
  }
  return false;
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
// Headers the transport sets itself (or fetch refuses): a custom value would break the session.
const RESERVED_HEADERS = new Set(['accept', 'content-type', 'content-length', 'host', 'connection', 'cookie',
  'mcp-session-id', 'mcp-protocol-version', 'last-event-id', 'transfer-encoding', 'origin']);

/**
 * Parses headers written one per line as "Name: value" (blank lines ignored).
 * @param {string|object} text the lines, or an object already parsed
 * @returns {Record<string, string>}
 * @throws {Error} naming the line that is wrong
 */
export function parseHeaders(text) {
  const entries = text && typeof text === 'object'
    ? Object.entries(text).map(([k, v]) => [k, String(v)])
    : String(text ?? '').split(/\r?\n/).map((line, i) => {
      if (!line.trim()) return null;
      const colon = line.indexOf(':');
      if (colon <= 0) throw new Error(`Header line ${i + 1} must look like "Name: value".`);
      return [line.slice(0, colon).trim(), line.slice(colon + 1).trim(), i + 1];
    }).filter(Boolean);
  const out = {};
  for (const [name, value, line] of entries) {
    const where = line ? `line ${line}` : JSON.stringify(name);
    if (!TOKEN.test(name)) throw new Error(`Header ${where}: "${name}" is not a valid header name.`);
    if (RESERVED_HEADERS.has(name.toLowerCase())) throw new Error(`Header ${where}: ${name} is set by Browser Bridge itself.`);
    if (/[\r\n\0]/.test(value)) throw new Error(`Header ${where}: the value must be on one line.`);
    if (value.length > 8192) throw new Error(`Header ${where}: the value is longer than 8192 characters.`);
    out[name] = value;
  }
  if (Object.keys(out).length > 32) throw new Error('At most 32 headers.');
  return out;
}

/**
 * Parses OAuth scopes separated by spaces or commas (RFC 6749 scope tokens).
 * @param {string|string[]} text
 * @returns {string[]}
 */
export function parseScopes(text) {
  const list = (Array.isArray(text) ? text : String(text ?? '').split(/[\s,]+/)).map((s) => String(s).trim()).filter(Boolean);
  for (const s of list) {
    if (!/^[\x21\x23-\x5B\x5D-\x7E]+$/.test(s)) throw new Error(`"${s}" is not a valid OAuth scope.`);
  }
  return [...new Set(list)];
}

/**
 * Checks an optional pre-registered client ID and secret (RFC 6749 VSCHAR,
 * surrounding spaces trimmed). A secret needs its client ID. Errors never
 * repeat the secret.
 * @param {unknown} clientId
 * @param {unknown} clientSecret
 * @returns {{clientId?: string, clientSecret?: string}}
 */
export function parseClientCredentials(clientId, clientSecret) {
  const id = String(clientId ?? '').trim();
  const secret = String(clientSecret ?? '').trim();
  const out = {};
  if (id) {
    if (!/^[\x20-\x7E]+$/.test(id) || id.length > 512) throw new Error('The client ID must be at most 512 printable ASCII characters.');
    out.clientId = id;
  }
  if (secret) {
    if (!id) throw new Error('A client secret needs the client ID it was issued with.');
    if (!/^[\x20-\x7E]+$/.test(secret) || secret.length > 1024) throw new Error('The client secret must be at most 1024 printable ASCII characters.');
    out.clientSecret = secret;
  }
  return out;
}

/**
 * The ui:// resource of an MCP App a tool result or a tool declares
 * (`_meta.ui.resourceUri`, or the older `_meta["ui/resourceUri"]`).
 * @param {...object} objs tool results and tool definitions, first match wins
 * @returns {string|null}
 */
export function appResourceUri(...objs) {
  for (const o of objs) {
    const uri = o?._meta?.ui?.resourceUri ?? o?._meta?.['ui/resourceUri'];
    if (typeof uri === 'string' && uri.startsWith('ui://')) return uri;
  }
  return null;
}

// ---------------------------------------------------------------------------
// The chrome platform a RemoteServer runs on (remote/platform.js).

/**
 * A platform object for remote/client.js on chrome.* APIs.
 * @param {{prefix: string, developerMode?: () => boolean, log?: Function}} opts
 *   prefix: namespace of the storage keys in chrome.storage.local;
 *   developerMode: read on every access (the setting can change)
 * @returns {object}
 */
export function chromePlatform({ prefix, developerMode = () => false, log = defaultLog } = {}) {
  if (!prefix) throw new Error('chromePlatform: a storage prefix is required');
  return {
    fetch: (input, init) => globalThis.fetch(input, init),
    now: () => Date.now(),
    storage: {
      async get(key) {
        const k = prefix + key;
        return (await chrome.storage.local.get(k))[k];
      },
      async set(key, value) {
        await chrome.storage.local.set({ [prefix + key]: value });
      },
      async remove(key) {
        await chrome.storage.local.remove(prefix + key);
      },
    },
    launchWebAuthFlow: ({ url, interactive }) => chrome.identity.launchWebAuthFlow({ url, interactive: !!interactive }),
    redirectUri: chrome.identity.getRedirectURL('oauth'),
    randomBytes: (n) => crypto.getRandomValues(new Uint8Array(n)),
    sha256: async (bytes) => new Uint8Array(await crypto.subtle.digest('SHA-256', bytes)),
    log,
    clientInfo: { name: 'Browser Bridge', version: chrome.runtime.getManifest?.().version || '0.0.0' },
    get developerMode() {
      return !!developerMode();
    },
  };
}

function defaultLog(level, msg, fields) {
  const fn = console[level] || console.log;
  if (fields && Object.keys(fields).length) fn.call(console, `remote: ${msg}`, fields);
  else fn.call(console, `remote: ${msg}`);
}

// ---------------------------------------------------------------------------
// The manager: one per worker (module state). Tests make several to stand
// for restarts.

const emptyConfig = () => ({ custom: [], enabled: {}, disabledTools: {}, developerMode: false });

function normalizeConfig(c) {
  const cfg = { ...emptyConfig(), ...(c && typeof c === 'object' ? c : {}) };
  cfg.custom = Array.isArray(cfg.custom) ? cfg.custom.filter((s) => s && typeof s.id === 'string' && typeof s.url === 'string') : [];
  for (const k of ['enabled', 'disabledTools']) if (!cfg[k] || typeof cfg[k] !== 'object') cfg[k] = {};
  cfg.developerMode = !!cfg.developerMode;
  return cfg;
}

function allServers(cfg) {
  return [
    ...BUILTIN_SERVERS.map((s) => ({ ...s, builtin: true })),
    ...cfg.custom.map((s) => ({ ...s, builtin: false })),
  ];
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function cleanTools(tools) {
  return Array.isArray(tools) ? tools.filter((t) => t && typeof t.name === 'string' && t.name) : [];
}

/**
 * Creates the remote-server manager.
 * @param {object} deps
 * @param {Function} deps.RemoteServer the class of remote/client.js (or a fake)
 * @param {(id: string, developerMode: () => boolean) => object} [deps.platformFor] the platform of one server
 * @param {(method: string) => void} [deps.notify] sends a notification to the bridge
 * @param {() => number} [deps.now]
 */
export function createRemoteManager({
  RemoteServer,
  platformFor = (id, developerMode) => chromePlatform({ prefix: `${AUTH_PREFIX}${id}.`, developerMode }),
  notify = (method) => rpc.notify(method),
  now = () => Date.now(),
} = {}) {
  if (typeof RemoteServer !== 'function') throw new Error('remote: init needs the RemoteServer class');

  /** @type {Map<string, {id: string, server: any, ready: Promise<void>, title: string}>} */
  const live = new Map();
  const scheduled = new Map(); // id → the token expiry its refresh alarm was set for
  let developerMode = false; // last value read from the config, for platform.developerMode
  let notifyTimer = null;
  let lastSent = null; // signature of the last view announced with remote.changed
  const work = new Set(); // promises of background work, for idle()

  const track = (p) => {
    const q = Promise.resolve(p).catch((err) => console.warn(`remote: ${err?.message || err}`));
    work.add(q);
    q.finally(() => work.delete(q));
    return q;
  };

  async function loadConfig() {
    const cfg = normalizeConfig(await store.get('local', CONFIG_KEY));
    developerMode = cfg.developerMode;
    return cfg;
  }

  function updateConfig(fn) {
    return store.update('local', CONFIG_KEY, async (c) => {
      const cfg = normalizeConfig(c);
      await fn(cfg);
      developerMode = cfg.developerMode;
      return cfg;
    });
  }

  const states = () => store.get('session', STATES_KEY, {});
  const updateStates = (fn) => store.update('session', STATES_KEY, (m) => {
    const next = m && typeof m === 'object' ? m : {};
    fn(next);
    return next;
  });

  /** The configured server with this id, or null. */
  function find(cfg, id) {
    return allServers(cfg).find((s) => s.id === id) || null;
  }

  /** The enabled server a bridge-facing name (or an id) stands for. */
  function byName(cfg, name) {
    const list = allServers(cfg).filter((s) => cfg.enabled[s.id]);
    const names = serverNames(allServers(cfg));
    return list.find((s) => names.get(s.id) === name) || list.find((s) => s.id === name) || null;
  }

  /**
   * The live RemoteServer of an enabled server, created (and connected
   * without user interaction) on first use.
   */
  async function ensure(id) {
    const have = live.get(id);
    if (have) return have;
    const cfg = await loadConfig();
    const conf = find(cfg, id);
    if (!conf || !cfg.enabled[id]) return null;
    if (live.has(id)) return live.get(id); // created while we read the config
    return create(conf);
  }

  function create(conf) {
    const { id } = conf;
    let server;
    const entry = { id, server: null, ready: Promise.resolve(), title: conf.title || id };
    try {
      server = new RemoteServer(serverConfig(conf), platformFor(id, () => developerMode), {
        onChange: () => changed(id, server),
      });
    } catch (err) {
      track(updateStates((m) => {
        m[id] = { state: 'error', message: `${entry.title}: ${err.message}`, tools: m[id]?.tools || [], at: now() };
      }).then(scheduleNotify));
      return null;
    }
    entry.server = server;
    live.set(id, entry);
    entry.ready = connectQuietly(id, entry);
    return entry;
  }

  function serverConfig(conf) {
    const c = { id: conf.id, url: conf.url };
    if (conf.headers && Object.keys(conf.headers).length) c.headers = { ...conf.headers };
    if (conf.scopes?.length) c.scopes = [...conf.scopes];
    if (conf.clientId) c.clientId = conf.clientId;
    if (conf.clientId && conf.clientSecret && !conf.builtin) c.clientSecret = conf.clientSecret;
    return c;
  }

  function connectQuietly(id, entry) {
    return track(Promise.resolve()
      .then(() => entry.server.connect({ interactive: false }))
      .catch((err) => console.info(`remote: ${id} did not connect: ${err?.message || err}`))
      .then(() => changed(id, entry.server)));
  }

  /** The RemoteServer told us something changed (state, message, tools, token). */
  function changed(id, server) {
    const entry = live.get(id);
    if (!entry || entry.server !== server) return Promise.resolve(); // an instance we dropped
    return track(recordState(id, server).then(() => scheduleRefresh(id, server)).then(scheduleNotify));
  }

  function recordState(id, server, { clearTools = false } = {}) {
    return updateStates((m) => {
      const prev = m[id];
      const tools = cleanTools(server.tools);
      m[id] = {
        state: server.state || 'disconnected',
        message: server.message || '',
        // Keep the last known tools through reconnections and outages, so
        // that the bridge's list does not flicker; replace them when the
        // server has said what it has.
        tools: clearTools ? [] : server.state === 'connected' || tools.length ? tools : prev?.tools || [],
        at: now(),
      };
    });
  }

  async function scheduleRefresh(id, server) {
    let expiry = 0;
    try {
      expiry = Number(server.tokenExpiry?.()) || 0;
    } catch {
      expiry = 0;
    }
    const name = REFRESH_ALARM_PREFIX + id;
    if (expiry <= 0 || SIGN_IN_STATES.has(server.state)) {
      if (scheduled.has(id)) {
        scheduled.delete(id);
        await chrome.alarms.clear(name);
      }
      return;
    }
    const when = Math.max(expiry - REFRESH_AHEAD_MS, now() + 1000);
    if (scheduled.get(id) === expiry) return;
    scheduled.set(id, expiry);
    await chrome.alarms.create(name, { when });
  }

  async function dropAlarm(id) {
    scheduled.delete(id);
    await chrome.alarms.clear(REFRESH_ALARM_PREFIX + id);
  }

  // remote.changed: at most one per NOTIFY_DELAY_MS, and only when the answer
  // of remote.list differs from the last one announced.
  function scheduleNotify() {
    if (notifyTimer) return;
    notifyTimer = setTimeout(() => {
      track(flushNotify());
    }, NOTIFY_DELAY_MS);
  }

  async function flushNotify() {
    notifyTimer = null;
    const sig = JSON.stringify(await view());
    if (sig === lastSent) return;
    // Dropped while the bridge is away: it lists again after the next hello.
    if (notify('remote.changed') !== false) lastSent = sig;
  }

  /** What remote.list answers, without creating any server. */
  async function view() {
    const [cfg, recs] = await Promise.all([loadConfig(), states()]);
    const all = allServers(cfg);
    const names = serverNames(all);
    return all.filter((s) => cfg.enabled[s.id]).map((s) => {
      const rec = recs[s.id];
      const srv = live.get(s.id)?.server;
      const off = new Set(cfg.disabledTools[s.id] || []);
      const tools = srv && srv.state === 'connected' ? cleanTools(srv.tools) : rec?.tools || [];
      return {
        name: names.get(s.id),
        title: s.title || s.id,
        url: s.url,
        state: srv?.state || rec?.state || 'disconnected',
        message: (srv ? srv.message : rec?.message) || '',
        tools: tools.filter((t) => !off.has(t.name)),
      };
    });
  }

  /** Starts every enabled server that is not running yet (after a worker restart). */
  async function startEnabled() {
    const cfg = await loadConfig();
    for (const s of allServers(cfg)) {
      if (cfg.enabled[s.id] && !live.has(s.id)) create(s);
    }
  }

  /** remote.list: the enabled servers; starts any not yet running. */
  async function list() {
    await startEnabled();
    const servers = await view();
    lastSent = JSON.stringify(servers); // the bridge has this view now
    return { servers };
  }

  /** Waits for a connection in progress (bounded), then reconnects once if it is down for a reason other than sign-in. */
  async function usable(entry, signal) {
    const wait = (p) => Promise.race([p, sleep(CONNECT_WAIT_MS), aborted(signal)]);
    await wait(entry.ready);
    const st = entry.server.state;
    if (st === 'connected' || SIGN_IN_STATES.has(st)) return;
    if (['disconnected', 'error'].includes(st)) {
      entry.ready = connectQuietly(entry.id, entry);
      await wait(entry.ready);
    }
  }

  function unavailable(title, server) {
    const st = server?.state;
    const why = server?.message ? ` ${String(server.message).replace(/\.?$/, '.')}` : '';
    if (SIGN_IN_STATES.has(st)) {
      return new rpc.RpcError(UNAVAILABLE, `${title} needs you to sign in: open Browser Bridge's options page, "Remote MCP servers", and click Sign in.${why}`, { state: st });
    }
    return new rpc.RpcError(UNAVAILABLE, `${title} is not connected (${st || 'not started'}).${why}`, { state: st });
  }

  async function notStarted(conf) {
    const rec = (await states())[conf.id];
    return unavailable(conf.title || conf.id, { state: rec?.state || 'error', message: rec?.message || 'it could not be started' });
  }

  /**
   * Resolves an enabled server and a tool that is not turned off, waits
   * until the server is usable and calls the tool.
   */
  async function callOn(cfg, conf, name, args, { signal, meta } = {}) {
    const title = conf.title || conf.id;
    if (typeof name !== 'string' || !name) throw new rpc.RpcError(rpc.CODES.invalidParams, 'name: the tool name is required');
    if (args !== undefined && (args === null || typeof args !== 'object' || Array.isArray(args))) {
      throw new rpc.RpcError(rpc.CODES.invalidParams, 'arguments: must be an object');
    }
    if ((cfg.disabledTools[conf.id] || []).includes(name)) {
      throw new rpc.RpcError(rpc.CODES.invalidParams, `the tool ${name} of ${title} is turned off in Browser Bridge's options`);
    }
    const entry = await ensure(conf.id);
    if (!entry) throw await notStarted(conf);
    await usable(entry, signal);
    if (entry.server.state !== 'connected') throw unavailable(title, entry.server);
    let result;
    try {
      result = await entry.server.callTool(name, args ?? {}, { signal, meta });
    } catch (err) {
      if (signal?.aborted) throw err;
      if (SIGN_IN_STATES.has(entry.server.state)) throw unavailable(title, entry.server);
      throw new rpc.RpcError(UNAVAILABLE, `${title}: ${err?.message || err}`, err?.category ? { category: err.category } : undefined);
    }
    const tool = cleanTools(entry.server.tools).find((t) => t.name === name);
    const uri = appResourceUri(result, tool);
    if (uri) track(rememberAppResult(conf.id, uri, result));
    return result;
  }

  /** remote.call: {server, name, arguments, _meta?} → CallToolResult. */
  async function call(params, ctx = {}) {
    const { server, name } = params || {};
    if (typeof server !== 'string' || !server) throw new rpc.RpcError(rpc.CODES.invalidParams, 'server: the remote server name is required');
    const cfg = await loadConfig();
    const conf = byName(cfg, server);
    if (!conf) {
      const names = (await view()).map((s) => s.name);
      throw new rpc.RpcError(rpc.CODES.invalidParams, `no enabled remote server is named ${JSON.stringify(server)}${names.length ? `; enabled: ${names.join(', ')}` : ''}`);
    }
    return callOn(cfg, conf, name, params.arguments, { signal: ctx.signal, meta: remoteMeta(params._meta) });
  }

  async function rememberAppResult(id, uri, result) {
    let json;
    try {
      json = JSON.stringify(result);
    } catch {
      return;
    }
    if (json.length > APP_RESULT_MAX_CHARS) return;
    await store.update('session', APP_RESULTS_KEY, (list) => [
      { id, uri, result: JSON.parse(json), at: now() },
      ...(Array.isArray(list) ? list : []).filter((r) => !(r.id === id && r.uri === uri)),
    ].slice(0, APP_RESULTS_MAX));
  }

  /** Handles one chrome.alarms event; returns whether it was a refresh alarm. */
  function onAlarm(alarm) {
    const name = alarm?.name;
    if (typeof name !== 'string' || !name.startsWith(REFRESH_ALARM_PREFIX)) return false;
    const id = name.slice(REFRESH_ALARM_PREFIX.length);
    scheduled.delete(id);
    track(refresh(id));
    return true;
  }

  async function refresh(id) {
    const entry = await ensure(id);
    if (!entry) {
      await chrome.alarms.clear(REFRESH_ALARM_PREFIX + id); // disabled or removed meanwhile
      return;
    }
    await Promise.race([entry.ready, sleep(CONNECT_WAIT_MS)]);
    const { server } = entry;
    const expiry = Number(server.tokenExpiry?.()) || 0;
    if (expiry > 0 && expiry - now() > REFRESH_AHEAD_MS) {
      await scheduleRefresh(id, server); // connecting already refreshed it
      return;
    }
    if (expiry <= 0 || SIGN_IN_STATES.has(server.state)) return;
    try {
      await server.refreshToken();
    } catch (err) {
      console.warn(`remote: refreshing the token of ${id} failed: ${err?.message || err}`);
    }
    await changed(id, server);
    const after = Number(server.tokenExpiry?.()) || 0;
    if (after > 0 && after - now() <= REFRESH_AHEAD_MS && after > now() && !SIGN_IN_STATES.has(server.state)) {
      // Still due and still valid: try again a little later.
      scheduled.set(id, after);
      await chrome.alarms.create(REFRESH_ALARM_PREFIX + id, { when: now() + REFRESH_RETRY_MS });
    }
  }

  // --- what the options page asks -----------------------------------------

  async function status() {
    await startEnabled();
    const [cfg, recs] = await Promise.all([loadConfig(), states()]);
    const all = allServers(cfg);
    const names = serverNames(all);
    return {
      developerMode: cfg.developerMode,
      redirectUri: chrome.identity?.getRedirectURL?.('oauth') || '',
      servers: all.map((s) => {
        const rec = recs[s.id];
        const srv = live.get(s.id)?.server;
        const enabled = !!cfg.enabled[s.id];
        const off = new Set(cfg.disabledTools[s.id] || []);
        const tools = srv && srv.state === 'connected' ? cleanTools(srv.tools) : rec?.tools || [];
        return {
          id: s.id,
          name: names.get(s.id),
          title: s.title || s.id,
          url: s.url,
          builtin: s.builtin,
          enabled,
          state: enabled ? srv?.state || rec?.state || 'disconnected' : 'disabled',
          message: enabled ? (srv ? srv.message : rec?.message) || '' : '',
          headerNames: Object.keys(s.headers || {}),
          scopes: s.scopes || [],
          tools: tools.map((t) => ({
            name: t.name,
            title: t.title || t.annotations?.title || '',
            description: typeof t.description === 'string' ? t.description.slice(0, 300) : '',
            enabled: !off.has(t.name),
            app: appResourceUri(t),
          })),
        };
      }),
    };
  }

  async function setEnabled(id, enabled) {
    let conf = null;
    await updateConfig((cfg) => {
      conf = find(cfg, id);
      if (!conf) throw new Error(`There is no remote server ${JSON.stringify(id)}.`);
      if (enabled) cfg.enabled[id] = true;
      else delete cfg.enabled[id];
    });
    if (enabled) {
      if (!live.has(id)) create(conf);
    } else {
      await stop(id);
    }
    scheduleNotify();
    return {};
  }

  /** Drops the live server (disconnecting it), its alarm and its state record. */
  async function stop(id) {
    const entry = live.get(id);
    live.delete(id);
    if (entry) await Promise.resolve().then(() => entry.server.disconnect()).catch((err) => console.warn(`remote: disconnecting ${id}: ${err?.message || err}`));
    await dropAlarm(id);
    await updateStates((m) => { delete m[id]; });
  }

  async function signIn(id) {
    const cfg = await loadConfig();
    if (!find(cfg, id)) throw new Error(`There is no remote server ${JSON.stringify(id)}.`);
    if (!cfg.enabled[id]) await setEnabled(id, true);
    const entry = await ensure(id);
    if (!entry) throw new Error(`${id} could not be started; see its message.`);
    await Promise.race([entry.ready, sleep(CONNECT_WAIT_MS)]);
    const { server } = entry;
    if (server.state !== 'connected') {
      try {
        await server.signIn();
        if (server.state === 'authenticated') await server.connect({ interactive: false });
      } finally {
        await changed(id, server);
      }
    }
    return { state: server.state, message: server.message || '' };
  }

  async function signOut(id) {
    const cfg = await loadConfig();
    const conf = find(cfg, id);
    if (!conf) throw new Error(`There is no remote server ${JSON.stringify(id)}.`);
    const entry = live.get(id);
    // A disabled server has no live instance: a short-lived one forgets its tokens.
    const server = entry?.server ?? new RemoteServer(serverConfig(conf), platformFor(id, () => developerMode), {});
    await server.signOut();
    await dropAlarm(id);
    if (entry) await recordState(id, server, { clearTools: true });
    scheduleNotify();
    return {};
  }

  async function reconnect(id) {
    const entry = await ensure(id);
    if (!entry) throw new Error(`${id} is not enabled.`);
    entry.ready = connectQuietly(id, entry);
    await Promise.race([entry.ready, sleep(CONNECT_WAIT_MS)]);
    return { state: entry.server.state, message: entry.server.message || '' };
  }

  async function setToolEnabled(id, tool, enabled) {
    if (typeof tool !== 'string' || !tool) throw new Error('A tool name is required.');
    await updateConfig((cfg) => {
      if (!find(cfg, id)) throw new Error(`There is no remote server ${JSON.stringify(id)}.`);
      const off = new Set(cfg.disabledTools[id] || []);
      if (enabled) off.delete(tool);
      else off.add(tool);
      if (off.size) cfg.disabledTools[id] = [...off].sort();
      else delete cfg.disabledTools[id];
    });
    scheduleNotify();
    return {};
  }

  async function addServer({ url, title, headers, scopes, clientId, clientSecret } = {}) {
    let added;
    await updateConfig((cfg) => {
      const href = validateServerUrl(url, { developerMode: cfg.developerMode });
      if (allServers(cfg).some((s) => s.url === href)) throw new Error(`${href} is already in the list.`);
      const label = String(title ?? '').trim().slice(0, 64);
      const host = new URL(href).hostname.replace(/^(www|mcp|api)\./, '').replace(/\.[a-z]+$/, '');
      const taken = new Set(allServers(cfg).map((s) => s.id));
      const base = slug(label || host, 56);
      let id = base;
      for (let n = 2; taken.has(id); n++) id = `${base}-${n}`;
      added = { id, title: label || new URL(href).hostname, url: href };
      const h = parseHeaders(headers);
      if (Object.keys(h).length) added.headers = h;
      const sc = parseScopes(scopes);
      if (sc.length) added.scopes = sc;
      Object.assign(added, parseClientCredentials(clientId, clientSecret));
      cfg.custom.push(added);
      cfg.enabled[id] = true;
    });
    create({ ...added, builtin: false });
    scheduleNotify();
    return { id: added.id };
  }

  async function removeServer(id) {
    const cfg = await loadConfig();
    const conf = cfg.custom.find((s) => s.id === id);
    if (!conf) {
      throw new Error(find(cfg, id) ? `${id} is built in: disable it instead.` : `There is no remote server ${JSON.stringify(id)}.`);
    }
    try {
      await signOut(id); // revokes what can be revoked
    } catch (err) {
      console.warn(`remote: signing out of ${id} before removing it: ${err?.message || err}`);
    }
    await stop(id);
    await updateConfig((c) => {
      c.custom = c.custom.filter((s) => s.id !== id);
      delete c.enabled[id];
      delete c.disabledTools[id];
    });
    const prefix = `${AUTH_PREFIX}${id}.`;
    const keys = Object.keys(await chrome.storage.local.get(null)).filter((k) => k.startsWith(prefix));
    if (keys.length) await chrome.storage.local.remove(keys);
    await store.update('session', APP_RESULTS_KEY, (list) => (Array.isArray(list) ? list : []).filter((r) => r.id !== id));
    scheduleNotify();
    return {};
  }

  async function setDeveloperMode(on) {
    await updateConfig((cfg) => { cfg.developerMode = !!on; });
    return {};
  }

  // --- MCP Apps (apps.html) -------------------------------------------------

  /** The HTML of a ui:// resource, with the latest tool result that pointed at it. */
  async function openApp({ server, uri } = {}) {
    if (typeof uri !== 'string' || !uri.startsWith('ui://')) throw new Error('The app address must be a ui:// resource URI.');
    const cfg = await loadConfig();
    const conf = byName(cfg, server);
    if (!conf) throw new Error(`No enabled remote server is named ${JSON.stringify(server)}.`);
    const title = conf.title || conf.id;
    const entry = await ensure(conf.id);
    if (!entry) throw await notStarted(conf);
    await usable(entry);
    if (entry.server.state !== 'connected') throw unavailable(title, entry.server);
    const res = await entry.server.readResource(uri);
    const item = (res?.contents || []).find((c) => c?.uri === uri) || res?.contents?.[0];
    if (!item) throw new Error(`${title} returned nothing for ${uri}.`);
    const mime = String(item.mimeType || 'text/html');
    if (!/^text\/html\b/i.test(mime)) throw new Error(`${uri} is ${mime}, not an HTML app.`);
    let html;
    if (typeof item.text === 'string') html = item.text;
    else if (typeof item.blob === 'string') html = new TextDecoder().decode(Uint8Array.from(atob(item.blob), (ch) => ch.charCodeAt(0)));
    else throw new Error(`${uri} has neither text nor blob content.`);
    if (html.length > APP_HTML_MAX_CHARS) throw new Error(`${uri} is larger than ${APP_HTML_MAX_CHARS} characters.`);
    const recent = await store.get('session', APP_RESULTS_KEY, []);
    const hit = (Array.isArray(recent) ? recent : []).find((r) => r.id === conf.id && r.uri === uri);
    return { server: serverNames(allServers(cfg)).get(conf.id), title, uri, mimeType: mime, html, toolResult: hit?.result ?? null };
  }

  /** A tools/call from an MCP App, on the app's own server only. */
  async function appCall({ server, name, arguments: args } = {}) {
    const cfg = await loadConfig();
    const conf = byName(cfg, server);
    if (!conf) throw new Error(`No enabled remote server is named ${JSON.stringify(server)}.`);
    return callOn(cfg, conf, name, args ?? {});
  }

  /**
   * Requests from the options and apps pages ({type: 'remote.<verb>', …}).
   * @returns {Promise<object>} the answer, or rejects with a sentence
   */
  async function pageMessage(msg) {
    switch (msg?.type) {
      case 'remote.status': return status();
      case 'remote.setEnabled': return setEnabled(msg.id, !!msg.enabled);
      case 'remote.signIn': return signIn(msg.id);
      case 'remote.signOut': return signOut(msg.id);
      case 'remote.reconnect': return reconnect(msg.id);
      case 'remote.setToolEnabled': return setToolEnabled(msg.id, msg.tool, !!msg.enabled);
      case 'remote.addServer': return addServer(msg);
      case 'remote.removeServer': return removeServer(msg.id);
      case 'remote.setDeveloperMode': return setDeveloperMode(!!msg.enabled);
      case 'remote.openApp': return openApp(msg);
      case 'remote.appCall': return appCall(msg);
      default: throw new Error(`unknown request ${JSON.stringify(msg?.type)}`);
    }
  }

  /** Resolves when no background work (state records, alarms, notifications) is pending. For tests. */
  async function idle() {
    for (let i = 0; i < 100 && (work.size || notifyTimer); i++) {
      if (notifyTimer) await sleep(NOTIFY_DELAY_MS + 5);
      await Promise.all([...work]);
    }
  }

  return { list, call, onAlarm, pageMessage, status, idle, live };
}

// The `_meta` the bridge sends names the local session and progress token;
// neither means anything to the remote server.
function remoteMeta(meta) {
  if (!meta || typeof meta !== 'object') return undefined;
  const out = {};
  for (const [k, v] of Object.entries(meta)) {
    if (k === 'progressToken' || k.startsWith('browserbridge/')) continue;
    out[k] = v;
  }
  return Object.keys(out).length ? out : undefined;
}

function aborted(signal) {
  if (!signal) return new Promise(() => {});
  return new Promise((_, reject) => {
    const fail = () => reject(signal.reason instanceof Error ? signal.reason : new Error('cancelled'));
    if (signal.aborted) fail();
    else signal.addEventListener('abort', fail, { once: true });
  });
}

// ---------------------------------------------------------------------------
// The worker's manager and the functions background.js wires.

let manager = null;

/**
 * Sets up the worker's manager. Call once at top level of background.js.
 * @param {Parameters<typeof createRemoteManager>[0]} deps
 */
export function init(deps) {
  manager = createRemoteManager(deps);
}

function m() {
  if (!manager) throw new rpc.RpcError(rpc.CODES.internal, 'remote servers are not set up in this worker (remote.init was not called)');
  return manager;
}

/** remote.list handler. */
export const list = () => m().list();
/** remote.call handler. */
export const call = (params, ctx) => m().call(params, ctx);
/**
 * chrome.alarms.onAlarm dispatch: background.js's top-level listener passes
 * every alarm; refresh alarms (REFRESH_ALARM_PREFIX) are handled, others
 * ignored. Returns whether the alarm was ours.
 * @param {{name: string}} alarm
 * @returns {boolean}
 */
export const onAlarm = (alarm) => (manager ? manager.onAlarm(alarm) : false);
/** Runtime messages of type "remote.*" from the options and apps pages. */
export const pageMessage = (msg) => m().pageMessage(msg);
