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
// The manager is a RemoteManager (below), one per worker. background.js must
// call init({RemoteServer}) at top level before the handlers run, and keeps
// every listener at its own top level: the class is passed in (not imported
// here) so that this module and its tests do not depend on the remote core
// being loadable. Only the core's URL check (remote/ssrf.js, no other
// imports but its errors) is imported, so that a server the options page
// adds is judged by the rules that apply when it connects.

import { checkUrl, classifyHost, hostOf } from '../remote/ssrf.js';
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
export const BUILTIN_SERVERS = Object.freeze(
  [
    { id: 'notion', title: 'Notion', url: 'https://mcp.notion.com/mcp' },
    { id: 'linear', title: 'Linear', url: 'https://mcp.linear.app/mcp' },
    { id: 'ahrefs', title: 'Ahrefs', url: 'https://api.ahrefs.com/mcp/mcp' },
    { id: 'supabase', title: 'Supabase', url: 'https://mcp.supabase.com/mcp' },
    { id: 'context7', title: 'Context7', url: 'https://mcp.context7.com/mcp' },
    { id: 'deepwiki', title: 'DeepWiki', url: 'https://mcp.deepwiki.com/mcp' },
  ].map((s) => Object.freeze(s)),
);

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
  const out = String(s ?? '')
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[^a-z0-9]+/g, '-')
    .slice(0, max)
    .replace(/^-+|-+$/g, '');
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
 * Checks the URL of a custom server when it is added, by the rules
 * remote/ssrf.js applies at every connect (so that a server the list accepts
 * is never refused later): https only; no credentials or fragment; no
 * loopback address outside developer mode; no private, link-local,
 * multicast, reserved or metadata address, IPv4 inside IPv6 (mapped, NAT64,
 * 6to4) included, and no single-label or internal-only name. Developer mode
 * allows servers on this computer, and plain http only for localhost,
 * 127.0.0.1 and [::1]. Names that resolve to such addresses are the remote
 * core's business (platform.resolve).
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
    throw new Error(
      `"${String(raw ?? '').slice(0, 200)}" is not a URL; give the server's full address, e.g. https://mcp.example.com/mcp.`,
    );
  }
  if (u.protocol === 'http:') {
    if (!(developerMode && LOOPBACK_HOSTS.has(u.hostname))) {
      throw new Error(
        developerMode
          ? 'Plain http is allowed only for localhost, 127.0.0.1 and [::1]; use https for other servers.'
          : 'The URL must start with https:// (http://localhost and 127.0.0.1 are allowed in developer mode).',
      );
    }
  } else if (u.protocol !== 'https:') {
    throw new Error(`The URL must start with https://, not ${u.protocol}//.`);
  }
  if (u.username || u.password) throw new Error('Put credentials in a header, not in the URL.');
  if (u.hash) throw new Error('The URL must not have a #fragment.');
  const kind = classifyHost(hostOf(u));
  if (kind === 'loopback') {
    if (!developerMode) {
      throw new Error('Servers on this computer (localhost, 127.x, ::1) are allowed only in developer mode.');
    }
  } else if (kind) {
    throw new Error(`${u.hostname} is ${kind}; remote servers must be on the public internet.`);
  }
  checkUrl(u, { developerMode, purpose: 'server' }); // the connect-time check itself, should the rules above fall behind it
  return u.href;
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
// Headers the transport sets itself (or fetch refuses): a custom value would break the session.
const RESERVED_HEADERS = new Set([
  'accept',
  'content-type',
  'content-length',
  'host',
  'connection',
  'cookie',
  'mcp-session-id',
  'mcp-protocol-version',
  'last-event-id',
  'transfer-encoding',
  'origin',
]);

/**
 * Parses headers written one per line as "Name: value" (blank lines ignored).
 * @param {string|object} text the lines, or an object already parsed
 * @returns {Record<string, string>}
 * @throws {Error} naming the line that is wrong
 */
export function parseHeaders(text) {
  const entries =
    text && typeof text === 'object'
      ? Object.entries(text).map(([k, v]) => [k, String(v)])
      : String(text ?? '')
          .split(/\r?\n/)
          .map((line, i) => {
            if (!line.trim()) return null;
            const colon = line.indexOf(':');
            if (colon <= 0) throw new Error(`Header line ${i + 1} must look like "Name: value".`);
            return [line.slice(0, colon).trim(), line.slice(colon + 1).trim(), i + 1];
          })
          .filter(Boolean);
  const out = {};
  for (const [name, value, line] of entries) {
    const where = line ? `line ${line}` : JSON.stringify(name);
    if (!TOKEN.test(name)) throw new Error(`Header ${where}: "${name}" is not a valid header name.`);
    if (RESERVED_HEADERS.has(name.toLowerCase())) {
      throw new Error(`Header ${where}: ${name} is set by Browser Bridge itself.`);
    }
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
  const list = (Array.isArray(text) ? text : String(text ?? '').split(/[\s,]+/))
    .map((s) => String(s).trim())
    .filter(Boolean);
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
    if (!/^[\x20-\x7E]+$/.test(id) || id.length > 512) {
      throw new Error('The client ID must be at most 512 printable ASCII characters.');
    }
    out.clientId = id;
  }
  if (secret) {
    if (!id) throw new Error('A client secret needs the client ID it was issued with.');
    if (!/^[\x20-\x7E]+$/.test(secret) || secret.length > 1024) {
      throw new Error('The client secret must be at most 1024 printable ASCII characters.');
    }
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
// The stored configuration and what is derived from it, without state.

const emptyConfig = () => ({ custom: [], enabled: {}, disabledTools: {}, developerMode: false });

function normalizeConfig(c) {
  const cfg = { ...emptyConfig(), ...(c && typeof c === 'object' ? c : {}) };
  cfg.custom = Array.isArray(cfg.custom)
    ? cfg.custom.filter((s) => s && typeof s.id === 'string' && typeof s.url === 'string')
    : [];
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

/** The configured server with this id, or null. */
function findServer(cfg, id) {
  return allServers(cfg).find((s) => s.id === id) || null;
}

/** Like findServer, but throws the options page's sentence when there is none. */
function mustFind(cfg, id) {
  const conf = findServer(cfg, id);
  if (!conf) throw new Error(`There is no remote server ${JSON.stringify(id)}.`);
  return conf;
}

/** The enabled server a bridge-facing name (or an id) stands for, or null. */
function enabledByName(cfg, name) {
  const all = allServers(cfg);
  const names = serverNames(all);
  const enabled = all.filter((s) => cfg.enabled[s.id]);
  return enabled.find((s) => names.get(s.id) === name) || enabled.find((s) => s.id === name) || null;
}

/** The config a RemoteServer gets of a configured server; a built-in never carries a secret. */
function serverConfig(conf) {
  const c = { id: conf.id, url: conf.url };
  if (conf.headers && Object.keys(conf.headers).length) c.headers = { ...conf.headers };
  if (conf.scopes?.length) c.scopes = [...conf.scopes];
  if (conf.clientId) c.clientId = conf.clientId;
  if (conf.clientId && conf.clientSecret && !conf.builtin) c.clientSecret = conf.clientSecret;
  return c;
}

/**
 * The entry of a custom server the options page adds, checked against the
 * servers already configured; its id is a slug of the title or host name,
 * made unique.
 */
function newCustomServer(cfg, { url, title, headers, scopes, clientId, clientSecret }) {
  const href = validateServerUrl(url, { developerMode: cfg.developerMode });
  const all = allServers(cfg);
  if (all.some((s) => s.url === href)) throw new Error(`${href} is already in the list.`);
  const label = String(title ?? '')
    .trim()
    .slice(0, 64);
  const { hostname } = new URL(href);
  const base = slug(label || hostname.replace(/^(www|mcp|api)\./, '').replace(/\.[a-z]+$/, ''), 56);
  const taken = new Set(all.map((s) => s.id));
  let id = base;
  for (let n = 2; taken.has(id); n++) id = `${base}-${n}`;
  const added = { id, title: label || hostname, url: href };
  const h = parseHeaders(headers);
  if (Object.keys(h).length) added.headers = h;
  const sc = parseScopes(scopes);
  if (sc.length) added.scopes = sc;
  return Object.assign(added, parseClientCredentials(clientId, clientSecret));
}

function cleanTools(tools) {
  return Array.isArray(tools) ? tools.filter((t) => t && typeof t.name === 'string' && t.name) : [];
}

/** The tools to show of a server: the live ones when connected, else the last recorded. */
function currentTools(server, record) {
  return server && server.state === 'connected' ? cleanTools(server.tools) : record?.tools || [];
}

/** The expiry of a server's access token in ms since the epoch, 0 for none or unknown. */
function tokenExpiry(server) {
  try {
    return Number(server.tokenExpiry?.()) || 0;
  } catch {
    return 0;
  }
}

/** The -32000 error of a server that cannot answer now, with what to do about it. */
function unavailable(title, server) {
  const st = server?.state;
  const why = server?.message ? ` ${String(server.message).replace(/\.?$/, '.')}` : '';
  if (SIGN_IN_STATES.has(st)) {
    return new rpc.RpcError(
      UNAVAILABLE,
      `${title} needs you to sign in: open Browser Bridge's options page, "Remote MCP servers", and click Sign in.${why}`,
      { state: st },
    );
  }
  return new rpc.RpcError(UNAVAILABLE, `${title} is not connected (${st || 'not started'}).${why}`, { state: st });
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

/** The HTML document of a resources/read answer for an MCP App. */
function appHtml(res, uri, title) {
  const item = (res?.contents || []).find((c) => c?.uri === uri) || res?.contents?.[0];
  if (!item) throw new Error(`${title} returned nothing for ${uri}.`);
  const mimeType = String(item.mimeType || 'text/html');
  if (!/^text\/html\b/i.test(mimeType)) throw new Error(`${uri} is ${mimeType}, not an HTML app.`);
  if (typeof item.text !== 'string' && typeof item.blob !== 'string') {
    throw new Error(`${uri} has neither text nor blob content.`);
  }
  const html =
    typeof item.text === 'string'
      ? item.text
      : new TextDecoder().decode(Uint8Array.from(atob(item.blob), (ch) => ch.charCodeAt(0)));
  if (html.length > APP_HTML_MAX_CHARS) throw new Error(`${uri} is larger than ${APP_HTML_MAX_CHARS} characters.`);
  return { mimeType, html };
}

/**
 * Waits for p, at most ms, and rejects when signal aborts. Its timer and
 * listener go when it settles, so a wait that ended leaves nothing behind.
 */
function within(p, ms, signal) {
  let timer;
  let onAbort;
  const bound = new Promise((resolve, reject) => {
    timer = setTimeout(resolve, ms);
    if (!signal) return;
    onAbort = () => reject(signal.reason instanceof Error ? signal.reason : new Error('cancelled'));
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  return Promise.race([p, bound]).finally(() => {
    clearTimeout(timer);
    if (onAbort) signal.removeEventListener('abort', onAbort);
  });
}

const defaultPlatformFor = (id, developerMode) => chromePlatform({ prefix: `${AUTH_PREFIX}${id}.`, developerMode });

// ---------------------------------------------------------------------------
// The manager: one per worker (module state below). Tests make several to
// stand for restarts.

/**
 * The remote servers of one service worker. What must outlive the worker is
 * in chrome.storage (the server list in local, the states and MCP App results
 * in session); what is in memory (the live RemoteServers, the alarms known to
 * be set, a pending remote.changed) is rebuilt lazily by a new worker.
 */
export class RemoteManager {
  #RemoteServer;
  #platformFor;
  #notify;
  #now;
  /** @type {Map<string, {id: string, server: any, ready: Promise<void>, title: string}>} */
  #live = new Map();
  #scheduled = new Map(); // id → the token expiry its refresh alarm was set for
  #developerMode = false; // last value read from the config, for platform.developerMode
  #notifyTimer = null;
  #lastSent = null; // signature of the last view announced with remote.changed
  #onWork;

  /**
   * @param {object} deps
   * @param {Function} deps.RemoteServer the class of remote/client.js (or a fake)
   * @param {(id: string, developerMode: () => boolean) => object} [deps.platformFor] the platform of one server
   * @param {(method: string) => (boolean|void)} [deps.notify] sends a notification to the bridge; false when it could not
   * @param {() => number} [deps.now]
   * @param {(work: Promise<void>) => void} [deps.onWork] told of each piece of background work (state
   *   records, alarms, a remote.changed waiting for its delay), a promise that settles, never rejects, when
   *   it is done: the tests wait for them (test/remote/work.js)
   */
  constructor({
    RemoteServer,
    platformFor = defaultPlatformFor,
    notify = (method) => rpc.notify(method),
    now = () => Date.now(),
    onWork = () => {},
  } = {}) {
    if (typeof RemoteServer !== 'function') throw new Error('remote: init needs the RemoteServer class');
    this.#RemoteServer = RemoteServer;
    this.#platformFor = platformFor;
    this.#notify = notify;
    this.#now = now;
    this.#onWork = onWork;
  }

  // --- what the bridge calls ------------------------------------------------

  /** remote.list: the enabled servers; starts any not yet running. */
  async list() {
    await this.#startEnabled();
    const servers = await this.#view();
    this.#lastSent = JSON.stringify(servers); // the bridge has this view now
    return { servers };
  }

  /** remote.call: {server, name, arguments, _meta?} → CallToolResult. */
  async call(params, ctx = {}) {
    const { server, name } = params || {};
    if (typeof server !== 'string' || !server) {
      throw new rpc.RpcError(rpc.CODES.invalidParams, 'server: the remote server name is required');
    }
    const cfg = await this.#loadConfig();
    const conf = enabledByName(cfg, server);
    if (!conf) {
      const names = (await this.#view()).map((s) => s.name);
      throw new rpc.RpcError(
        rpc.CODES.invalidParams,
        `no enabled remote server is named ${JSON.stringify(server)}${names.length ? `; enabled: ${names.join(', ')}` : ''}`,
      );
    }
    return this.#callOn(cfg, conf, name, params.arguments, { signal: ctx.signal, meta: remoteMeta(params._meta) });
  }

  /** Handles one chrome.alarms event; returns whether it was a refresh alarm. */
  onAlarm(alarm) {
    const name = alarm?.name;
    if (typeof name !== 'string' || !name.startsWith(REFRESH_ALARM_PREFIX)) return false;
    const id = name.slice(REFRESH_ALARM_PREFIX.length);
    this.#scheduled.delete(id);
    this.#track(this.#refresh(id));
    return true;
  }

  // --- what the options and apps pages ask ----------------------------------

  /**
   * Requests from the options and apps pages ({type: 'remote.<verb>', …}).
   * @returns {Promise<object>} the answer, or rejects with a sentence
   */
  async pageMessage(msg) {
    switch (msg?.type) {
      case 'remote.status':
        return this.status();
      case 'remote.setEnabled':
        return this.setEnabled(msg.id, !!msg.enabled);
      case 'remote.signIn':
        return this.signIn(msg.id);
      case 'remote.signOut':
        return this.signOut(msg.id);
      case 'remote.reconnect':
        return this.reconnect(msg.id);
      case 'remote.setToolEnabled':
        return this.setToolEnabled(msg.id, msg.tool, !!msg.enabled);
      case 'remote.addServer':
        return this.addServer(msg);
      case 'remote.removeServer':
        return this.removeServer(msg.id);
      case 'remote.setDeveloperMode':
        return this.setDeveloperMode(!!msg.enabled);
      case 'remote.openApp':
        return this.openApp(msg);
      case 'remote.appCall':
        return this.appCall(msg);
      default:
        throw new Error(`unknown request ${JSON.stringify(msg?.type)}`);
    }
  }

  /** Every server, enabled or not, with its state and all its tools (the options page). */
  async status() {
    await this.#startEnabled();
    const [cfg, recs] = await Promise.all([this.#loadConfig(), this.#states()]);
    const all = allServers(cfg);
    const names = serverNames(all);
    return {
      developerMode: cfg.developerMode,
      redirectUri: chrome.identity?.getRedirectURL?.('oauth') || '',
      servers: all.map((s) => {
        const rec = recs[s.id];
        const srv = this.#live.get(s.id)?.server;
        const enabled = !!cfg.enabled[s.id];
        const off = new Set(cfg.disabledTools[s.id] || []);
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
          tools: currentTools(srv, rec).map((t) => ({
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

  async setEnabled(id, enabled) {
    let conf = null;
    await this.#updateConfig((cfg) => {
      conf = mustFind(cfg, id);
      if (enabled) cfg.enabled[id] = true;
      else delete cfg.enabled[id];
    });
    if (!enabled) await this.#stop(id);
    else if (!this.#live.has(id)) this.#create(conf);
    this.#scheduleNotify();
    return {};
  }

  /** Enables the server if needed and signs in interactively unless it is connected already. */
  async signIn(id) {
    const cfg = await this.#loadConfig();
    mustFind(cfg, id);
    if (!cfg.enabled[id]) await this.setEnabled(id, true);
    const entry = await this.#ensure(id);
    if (!entry) throw new Error(`${id} could not be started; see its message.`);
    await within(entry.ready, CONNECT_WAIT_MS);
    const { server } = entry;
    if (server.state !== 'connected') {
      try {
        await server.signIn();
        if (server.state === 'authenticated') await server.connect({ interactive: false });
      } finally {
        await this.#changed(id, server);
      }
    }
    return { state: server.state, message: server.message || '' };
  }

  async signOut(id) {
    const conf = mustFind(await this.#loadConfig(), id);
    const entry = this.#live.get(id);
    // A disabled server has no live instance: a short-lived one forgets its tokens.
    const server =
      entry?.server ??
      new this.#RemoteServer(
        serverConfig(conf),
        this.#platformFor(id, () => this.#developerMode),
        {},
      );
    await server.signOut();
    await this.#dropAlarm(id);
    if (entry) await this.#recordState(id, server, { clearTools: true });
    this.#scheduleNotify();
    return {};
  }

  async reconnect(id) {
    const entry = await this.#ensure(id);
    if (!entry) throw new Error(`${id} is not enabled.`);
    entry.ready = this.#connectQuietly(entry);
    await within(entry.ready, CONNECT_WAIT_MS);
    return { state: entry.server.state, message: entry.server.message || '' };
  }

  async setToolEnabled(id, tool, enabled) {
    if (typeof tool !== 'string' || !tool) throw new Error('A tool name is required.');
    await this.#updateConfig((cfg) => {
      mustFind(cfg, id);
      const off = new Set(cfg.disabledTools[id] || []);
      if (enabled) off.delete(tool);
      else off.add(tool);
      if (off.size) cfg.disabledTools[id] = [...off].sort();
      else delete cfg.disabledTools[id];
    });
    this.#scheduleNotify();
    return {};
  }

  /** Adds a custom server, enabled, and starts it. */
  async addServer(fields = {}) {
    let added;
    await this.#updateConfig((cfg) => {
      added = newCustomServer(cfg, fields);
      cfg.custom.push(added);
      cfg.enabled[added.id] = true;
    });
    this.#create({ ...added, builtin: false });
    this.#scheduleNotify();
    return { id: added.id };
  }

  /** Removes a custom server with everything kept for it: tokens (revoked where possible), switches, app results. */
  async removeServer(id) {
    const cfg = await this.#loadConfig();
    if (!cfg.custom.some((s) => s.id === id)) {
      throw new Error(
        findServer(cfg, id)
          ? `${id} is built in: disable it instead.`
          : `There is no remote server ${JSON.stringify(id)}.`,
      );
    }
    try {
      await this.signOut(id); // revokes what can be revoked
    } catch (err) {
      console.warn(`remote: signing out of ${id} before removing it: ${err?.message || err}`);
    }
    await this.#stop(id);
    await this.#updateConfig((c) => {
      c.custom = c.custom.filter((s) => s.id !== id);
      delete c.enabled[id];
      delete c.disabledTools[id];
    });
    const prefix = `${AUTH_PREFIX}${id}.`;
    const keys = Object.keys(await chrome.storage.local.get(null)).filter((k) => k.startsWith(prefix));
    if (keys.length) await chrome.storage.local.remove(keys);
    await store.update('session', APP_RESULTS_KEY, (list) =>
      (Array.isArray(list) ? list : []).filter((r) => r.id !== id),
    );
    this.#scheduleNotify();
    return {};
  }

  async setDeveloperMode(on) {
    await this.#updateConfig((cfg) => {
      cfg.developerMode = !!on;
    });
    return {};
  }

  /** The HTML of a ui:// resource (apps.html), with the latest tool result that pointed at it. */
  async openApp({ server, uri } = {}) {
    if (typeof uri !== 'string' || !uri.startsWith('ui://')) {
      throw new Error('The app address must be a ui:// resource URI.');
    }
    const cfg = await this.#loadConfig();
    const conf = enabledByName(cfg, server);
    if (!conf) throw new Error(`No enabled remote server is named ${JSON.stringify(server)}.`);
    const title = conf.title || conf.id;
    const entry = await this.#usableEntry(conf);
    const { mimeType, html } = appHtml(await entry.server.readResource(uri), uri, title);
    const recent = await store.get('session', APP_RESULTS_KEY, []);
    const hit = (Array.isArray(recent) ? recent : []).find((r) => r.id === conf.id && r.uri === uri);
    return {
      server: serverNames(allServers(cfg)).get(conf.id),
      title,
      uri,
      mimeType,
      html,
      toolResult: hit?.result ?? null,
    };
  }

  /** A tools/call from an MCP App, on the app's own server only. */
  async appCall({ server, name, arguments: args } = {}) {
    const cfg = await this.#loadConfig();
    const conf = enabledByName(cfg, server);
    if (!conf) throw new Error(`No enabled remote server is named ${JSON.stringify(server)}.`);
    return this.#callOn(cfg, conf, name, args ?? {});
  }

  // --- storage --------------------------------------------------------------

  /** Background work: its failure is logged, and onWork is told of it. */
  #track(p) {
    const q = Promise.resolve(p).catch((err) => console.warn(`remote: ${err?.message || err}`));
    this.#onWork(q);
    return q;
  }

  async #loadConfig() {
    const cfg = normalizeConfig(await store.get('local', CONFIG_KEY));
    this.#developerMode = cfg.developerMode;
    return cfg;
  }

  #updateConfig(fn) {
    return store.update('local', CONFIG_KEY, async (c) => {
      const cfg = normalizeConfig(c);
      await fn(cfg);
      this.#developerMode = cfg.developerMode;
      return cfg;
    });
  }

  #states() {
    return store.get('session', STATES_KEY, {});
  }

  #updateStates(fn) {
    return store.update('session', STATES_KEY, (m) => {
      const next = m && typeof m === 'object' ? m : {};
      fn(next);
      return next;
    });
  }

  /** Records a server's state, message and tools in chrome.storage.session. */
  #recordState(id, server, { clearTools = false } = {}) {
    return this.#updateStates((m) => {
      const tools = cleanTools(server.tools);
      // Keep the last known tools through reconnections and outages, so that
      // the bridge's list does not flicker; replace them when the server has
      // said what it has.
      const keep = server.state === 'connected' || tools.length ? tools : m[id]?.tools || [];
      m[id] = {
        state: server.state || 'disconnected',
        message: server.message || '',
        tools: clearTools ? [] : keep,
        at: this.#now(),
      };
    });
  }

  async #rememberAppResult(id, uri, result) {
    let json;
    try {
      json = JSON.stringify(result);
    } catch {
      return;
    }
    if (json.length > APP_RESULT_MAX_CHARS) return;
    await store.update('session', APP_RESULTS_KEY, (list) =>
      [
        { id, uri, result: JSON.parse(json), at: this.#now() },
        ...(Array.isArray(list) ? list : []).filter((r) => !(r.id === id && r.uri === uri)),
      ].slice(0, APP_RESULTS_MAX),
    );
  }

  // --- live servers ---------------------------------------------------------

  /**
   * The live RemoteServer of an enabled server, created (and connected
   * without user interaction) on first use; null when it is not enabled.
   */
  async #ensure(id) {
    const have = this.#live.get(id);
    if (have) return have;
    const cfg = await this.#loadConfig();
    const conf = findServer(cfg, id);
    if (!conf || !cfg.enabled[id]) return null;
    return this.#live.get(id) ?? this.#create(conf); // another caller may have created it meanwhile
  }

  /** Creates and starts connecting the live server of conf; null (and an error state) if its config is refused. */
  #create(conf) {
    const { id } = conf;
    const entry = { id, server: null, ready: Promise.resolve(), title: conf.title || id };
    let server;
    try {
      server = new this.#RemoteServer(
        serverConfig(conf),
        this.#platformFor(id, () => this.#developerMode),
        {
          onChange: () => this.#changed(id, server),
        },
      );
    } catch (err) {
      this.#track(
        this.#updateStates((m) => {
          m[id] = {
            state: 'error',
            message: `${entry.title}: ${err.message}`,
            tools: m[id]?.tools || [],
            at: this.#now(),
          };
        }).then(() => this.#scheduleNotify()),
      );
      return null;
    }
    entry.server = server;
    this.#live.set(id, entry);
    entry.ready = this.#connectQuietly(entry);
    return entry;
  }

  #connectQuietly(entry) {
    return this.#track(
      Promise.resolve()
        .then(() => entry.server.connect({ interactive: false }))
        .catch((err) => console.info(`remote: ${entry.id} did not connect: ${err?.message || err}`))
        .then(() => this.#changed(entry.id, entry.server)),
    );
  }

  /** Starts every enabled server that is not running yet (after a worker restart). */
  async #startEnabled() {
    const cfg = await this.#loadConfig();
    for (const s of allServers(cfg)) {
      if (cfg.enabled[s.id] && !this.#live.has(s.id)) this.#create(s);
    }
  }

  /** Drops the live server (disconnecting it), its alarm and its state record. */
  async #stop(id) {
    const entry = this.#live.get(id);
    this.#live.delete(id);
    if (entry) {
      await Promise.resolve()
        .then(() => entry.server.disconnect())
        .catch((err) => console.warn(`remote: disconnecting ${id}: ${err?.message || err}`));
    }
    await this.#dropAlarm(id);
    await this.#updateStates((m) => {
      delete m[id];
    });
  }

  /** A RemoteServer told us something changed (state, message, tools, token). */
  #changed(id, server) {
    const entry = this.#live.get(id);
    if (!entry || entry.server !== server) return Promise.resolve(); // an instance we dropped
    return this.#track(
      this.#recordState(id, server)
        .then(() => this.#scheduleRefresh(id, server))
        .then(() => this.#scheduleNotify()),
    );
  }

  // --- tool calls -----------------------------------------------------------

  /**
   * Checks the tool name and arguments of a call on an enabled server, waits
   * until the server is usable and calls the tool.
   */
  async #callOn(cfg, conf, name, args, { signal, meta } = {}) {
    const title = conf.title || conf.id;
    if (typeof name !== 'string' || !name) {
      throw new rpc.RpcError(rpc.CODES.invalidParams, 'name: the tool name is required');
    }
    if (args !== undefined && (args === null || typeof args !== 'object' || Array.isArray(args))) {
      throw new rpc.RpcError(rpc.CODES.invalidParams, 'arguments: must be an object');
    }
    if ((cfg.disabledTools[conf.id] || []).includes(name)) {
      throw new rpc.RpcError(
        rpc.CODES.invalidParams,
        `the tool ${name} of ${title} is turned off in Browser Bridge's options`,
      );
    }
    const { server } = await this.#usableEntry(conf, signal);
    let result;
    try {
      result = await server.callTool(name, args ?? {}, { signal, meta });
    } catch (err) {
      if (signal?.aborted) throw err;
      if (SIGN_IN_STATES.has(server.state)) throw unavailable(title, server);
      throw new rpc.RpcError(
        UNAVAILABLE,
        `${title}: ${err?.message || err}`,
        err?.category ? { category: err.category } : undefined,
      );
    }
    const uri = appResourceUri(
      result,
      cleanTools(server.tools).find((t) => t.name === name),
    );
    if (uri) this.#track(this.#rememberAppResult(conf.id, uri, result));
    return result;
  }

  /**
   * The live entry of an enabled server once it is connected: waits for a
   * connection in progress (bounded), and reconnects once if it is down for a
   * reason other than sign-in. Throws the -32000 error that says why not.
   */
  async #usableEntry(conf, signal) {
    const entry = await this.#ensure(conf.id);
    if (!entry) {
      const rec = (await this.#states())[conf.id];
      throw unavailable(conf.title || conf.id, {
        state: rec?.state || 'error',
        message: rec?.message || 'it could not be started',
      });
    }
    await within(entry.ready, CONNECT_WAIT_MS, signal);
    if (['disconnected', 'error'].includes(entry.server.state)) {
      entry.ready = this.#connectQuietly(entry);
      await within(entry.ready, CONNECT_WAIT_MS, signal);
    }
    if (entry.server.state !== 'connected') throw unavailable(entry.title, entry.server);
    return entry;
  }

  // --- token refresh alarms -------------------------------------------------

  /** Sets (or moves) the refresh alarm of a server whose token expires, and clears it when there is none. */
  async #scheduleRefresh(id, server) {
    const expiry = tokenExpiry(server);
    if (expiry <= 0 || SIGN_IN_STATES.has(server.state)) {
      if (this.#scheduled.has(id)) await this.#dropAlarm(id);
      return;
    }
    if (this.#scheduled.get(id) === expiry) return;
    this.#scheduled.set(id, expiry);
    await chrome.alarms.create(REFRESH_ALARM_PREFIX + id, {
      when: Math.max(expiry - REFRESH_AHEAD_MS, this.#now() + 1000),
    });
  }

  async #dropAlarm(id) {
    this.#scheduled.delete(id);
    await chrome.alarms.clear(REFRESH_ALARM_PREFIX + id);
  }

  /** A refresh alarm fired: refreshes the token if it is still due. */
  async #refresh(id) {
    const entry = await this.#ensure(id);
    if (!entry) {
      await chrome.alarms.clear(REFRESH_ALARM_PREFIX + id); // disabled or removed meanwhile
      return;
    }
    await within(entry.ready, CONNECT_WAIT_MS);
    const { server } = entry;
    const expiry = tokenExpiry(server);
    if (expiry > 0 && expiry - this.#now() > REFRESH_AHEAD_MS) {
      await this.#scheduleRefresh(id, server); // connecting already refreshed it
      return;
    }
    if (expiry <= 0 || SIGN_IN_STATES.has(server.state)) return;
    try {
      await server.refreshToken();
    } catch (err) {
      console.warn(`remote: refreshing the token of ${id} failed: ${err?.message || err}`);
    }
    await this.#changed(id, server);
    await this.#retryIfStillDue(id, server);
  }

  /** After a failed refresh, a token that is still valid and still due is tried again REFRESH_RETRY_MS later. */
  async #retryIfStillDue(id, server) {
    const expiry = tokenExpiry(server);
    const now = this.#now();
    if (expiry <= now || expiry - now > REFRESH_AHEAD_MS || SIGN_IN_STATES.has(server.state)) return;
    this.#scheduled.set(id, expiry);
    await chrome.alarms.create(REFRESH_ALARM_PREFIX + id, { when: now + REFRESH_RETRY_MS });
  }

  // --- remote.changed -------------------------------------------------------

  // At most one per NOTIFY_DELAY_MS, and only when the answer of remote.list
  // differs from the last one announced.
  #scheduleNotify() {
    if (this.#notifyTimer) return;
    // The wait is background work too, so that whoever waits for the work
    // (the tests) also waits for the remote.changed it ends with.
    this.#track(
      new Promise((resolve) => {
        this.#notifyTimer = setTimeout(() => resolve(this.#flushNotify()), NOTIFY_DELAY_MS);
      }),
    );
  }

  async #flushNotify() {
    this.#notifyTimer = null;
    const sig = JSON.stringify(await this.#view());
    if (sig === this.#lastSent) return;
    // Dropped while the bridge is away: it lists again after the next hello.
    if (this.#notify('remote.changed') !== false) this.#lastSent = sig;
  }

  /** What remote.list answers, without creating any server. */
  async #view() {
    const [cfg, recs] = await Promise.all([this.#loadConfig(), this.#states()]);
    const all = allServers(cfg);
    const names = serverNames(all);
    return all
      .filter((s) => cfg.enabled[s.id])
      .map((s) => {
        const rec = recs[s.id];
        const srv = this.#live.get(s.id)?.server;
        const off = new Set(cfg.disabledTools[s.id] || []);
        return {
          name: names.get(s.id),
          title: s.title || s.id,
          url: s.url,
          state: srv?.state || rec?.state || 'disconnected',
          message: (srv ? srv.message : rec?.message) || '',
          tools: currentTools(srv, rec).filter((t) => !off.has(t.name)),
        };
      });
  }
}

// ---------------------------------------------------------------------------
// The worker's manager and the functions background.js wires.

let manager = null;

/**
 * Sets up the worker's manager. Call once at top level of background.js.
 * @param {ConstructorParameters<typeof RemoteManager>[0]} deps
 */
export function init(deps) {
  manager = new RemoteManager(deps);
}

function m() {
  if (!manager) {
    throw new rpc.RpcError(
      rpc.CODES.internal,
      'remote servers are not set up in this worker (remote.init was not called)',
    );
  }
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
