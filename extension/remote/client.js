// RemoteServer: one remote MCP server as the extension uses it — its
// connection state (state.js), its transport (transport.js), its OAuth
// sign-in (oauth.js) and its tools. Everything platform-specific comes
// through the platform object (platform.js), so this runs in the service
// worker and in Node alike.
//
// Isolation: a RemoteServer keeps all its state in its own fields and its
// own storage keys; nothing is shared between instances, so one server's
// failure, sign-in or retry never touches another.
//
// Concurrency: connect() calls overlap into one; concurrent 401s share one
// sign-in or refresh; concurrent 404s of an ended session share one new
// initialize; a disconnect() during connect() wins (the connect's late
// results are dropped).
//
// Server notifications (spec 000, "Persistent Connections"):
//   - stateful Streamable HTTP: after initialize, when the server declares
//     capabilities.tools.listChanged (the only notification this client acts
//     on), the standalone GET stream is kept open. It is reopened when it
//     ends or drops, with Last-Event-ID and after the stream's `retry` or the
//     Standard preset's delay; a 401 on it goes through the same refresh as
//     requests; 405 (or 404) means the server offers none; disconnect() and
//     signOut() close it. After maxRetries failures in a row it rests until
//     the next request succeeds.
//   - notifications/tools/list_changed from any stream (the GET stream, a
//     POST's event stream, the legacy event stream): after a short quiet
//     time (bursts count once) tools/list is read again, every page, and
//     onChange fires once with the new list in place.
//   - notifications/progress goes to the onProgress of the callTool whose
//     progressToken it names.
// The 2026-07-28 era has no GET stream, and mcp-protocol.md describes no
// other way to listen in that era: there only a POST's event stream brings
// notifications.
//
// Storage keys (spec 000, "Chrome Storage Keys"), per server id:
//   oauth.{id}.tokens             {access_token, refresh_token?, token_type, expires_at, scope[], resource, issuer}
//   oauth.{id}.client             the client registration {client_id, client_secret?, token_endpoint_auth_method, via, issuer, redirect_uri}
//                                 (client_secret only from a registration; a pre-registered secret stays in the config)
//   mcp.{id}.oauth.endpoints      discovered metadata {resource, prmUrl, prm, issuer, asMetadata, legacy}
//   oauth.{id}.challenged_scopes  scopes a 403 asked for that no sign-in has granted yet
//   mcp.{id}.transport            the era that worked last (stateless, streamable, sse)

import { RemoteError, isTransient } from './errors.js';
import {
  authorizationUrl,
  base64url,
  canonicalResource,
  defaultEndpoints,
  discoverAuthServer,
  discoverProtectedResource,
  parseRedirect,
  pkcePair,
  registerClient,
  secretAuthMethod,
  selectScopes,
  tokenRequest,
  union,
} from './oauth.js';
import { checkPlatform } from './platform.js';
import { checkResolved, checkUrl, hostOf } from './ssrf.js';
import { RETRY_PRESETS, STATES, canTransition, retryDelay, withRetry } from './state.js';
import { TIMEOUTS, connectTransport } from './transport.js';

export { RemoteError } from './errors.js';
export { STATES } from './state.js';

/** Refresh a token this long before it expires (spec 002: a 5-minute buffer). */
export const REFRESH_AHEAD_MS = 5 * 60_000;

/** Scope step-ups one request may trigger before giving up (conformance: at most 3 sign-ins). */
export const MAX_STEP_UPS = 2;

/** How long a DNS check of a host holds. */
const RESOLVE_TTL_MS = 60_000;

/** Most pages of tools/list read. */
const MAX_TOOL_PAGES = 100;

/** Quiet time after a notifications/tools/list_changed before tools/list is read again (bursts count once). */
export const LIST_CHANGED_DELAY_MS = 100;

/** Most tools/list rounds one refresh makes while more list_changed keep coming. */
const MAX_REFRESH_ROUNDS = 3;

const DEFAULT_CLIENT_INFO = Object.freeze({ name: 'Browser Bridge', version: '0.1.0' });

/**
 * The storage keys of one server.
 * @param {string} id
 */
export function storageKeys(id) {
  return {
    tokens: `oauth.${id}.tokens`,
    client: `oauth.${id}.client`,
    endpoints: `mcp.${id}.oauth.endpoints`,
    challenged: `oauth.${id}.challenged_scopes`,
    transport: `mcp.${id}.transport`,
  };
}

/**
 * One remote MCP server.
 *
 * config: {id, url, headers?: {name: value}, scopes?: string[], clientId?: string, clientSecret?: string}
 * clientId is a client pre-registered with the server's authorization server;
 * clientSecret, only with clientId, makes it a confidential client: the
 * secret goes to the token endpoint alone (code exchange and refresh), as
 * client_secret_basic or client_secret_post by the server's metadata, and is
 * neither logged nor copied into this server's storage keys.
 */
export class RemoteServer {
  #config;
  #platform;
  #onChange;
  #keys;
  #state = 'disconnected';
  #message = 'Not connected.';
  #tools = [];
  #transport = null;
  #tokens = null;
  #client = null;
  #auth = null;
  #loaded = null;
  #connecting = null;
  #authing = null;
  #refreshing = null;
  #resolved = new Map(); // host → expiry of its DNS check
  #resolveNoted = false;
  #gen = 0; // bumped by disconnect(): late results of older work are dropped
  #refreshedFor = ''; // the access token a 401-triggered refresh replaced
  #renewing = null; // {old, promise}: a new initialize after the server ended the session
  #toolsStale = false; // a list_changed came since the last tools/list
  #toolsTimer = null;
  #toolsRefresh = null;
  #progress = new Map(); // progressToken → {onProgress, last}

  /**
   * @param {{id: string, url: string, headers?: Record<string, string>, scopes?: string[], clientId?: string,
   *   clientSecret?: string}} config
   * @param {object} platform see platform.js
   * @param {{onChange?: (server: RemoteServer) => void}} [opts] onChange runs on every state, message or tools change
   */
  constructor(config, platform, { onChange } = {}) {
    if (!config || typeof config.id !== 'string' || !config.id) {
      throw new TypeError('RemoteServer: config.id is required');
    }
    if (typeof config.url !== 'string' || !config.url) throw new TypeError('RemoteServer: config.url is required');
    if (config.clientSecret !== undefined && typeof config.clientSecret !== 'string') {
      throw new TypeError('RemoteServer: config.clientSecret must be a string');
    }
    this.#config = { ...config, headers: { ...(config.headers || {}) }, scopes: [...(config.scopes || [])] };
    if (!this.#config.clientSecret) delete this.#config.clientSecret;
    this.#platform = checkPlatform(platform);
    this.#onChange = onChange;
    this.#keys = storageKeys(config.id);
  }

  /** The server's id. */
  get id() {
    return this.#config.id;
  }

  /** The configured URL. */
  get url() {
    return this.#config.url;
  }

  /** One of STATES. */
  get state() {
    return this.#state;
  }

  /** A sentence a person understands about the state. */
  get message() {
    return this.#message;
  }

  /** The last tools/list result ([] before the first connection and after disconnect()). */
  get tools() {
    return this.#tools;
  }

  /** The transport era in use ('stateless', 'streamable', 'sse'), or ''. */
  get transport() {
    return this.#transport?.era || '';
  }

  /** When the access token expires (ms epoch), or 0 when unknown or none. */
  tokenExpiry() {
    return this.#tokens?.expires_at || 0;
  }

  /**
   * Connects: (refresh) → transport and handshake → tools/list. Never throws
   * for auth or network trouble: the state and message say what happened.
   * Not interactive, a needed sign-in ends in 'needs-auth' (or
   * 'invalid-token' when the held sign-in stopped working).
   * @param {{interactive?: boolean}} [opts]
   */
  async connect({ interactive = false } = {}) {
    while (this.#connecting) {
      await this.#connecting;
      if (!interactive || !['needs-auth', 'invalid-token'].includes(this.#state)) return;
    }
    this.#connecting = this.#connect(interactive).finally(() => {
      this.#connecting = null;
    });
    return this.#connecting;
  }

  /** Connects, opening a sign-in window when one is needed. */
  signIn() {
    return this.connect({ interactive: true });
  }

  /**
   * Calls a tool of this server by its own name.
   * @param {string} name
   * @param {object} [args]
   * @param {{signal?: AbortSignal, meta?: object, interactive?: boolean,
   *   onProgress?: (params: object) => void}} [opts]
   *   meta becomes params._meta; interactive lets a sign-in (e.g. a scope
   *   step-up) open a window; onProgress gets the params of every
   *   notifications/progress for this call (a progressToken is added to
   *   _meta, unless meta has one) whose progress goes up. An abort of signal
   *   rejects with a 'cancelled' error and tells the server
   *   (notifications/cancelled, best effort).
   * @returns {Promise<object>} the CallToolResult (isError results are results)
   */
  async callTool(name, args, { signal, meta, interactive = false, onProgress } = {}) {
    await untilAborted(this.#ready(interactive), signal);
    const params = { name, arguments: args ?? {} };
    if (meta) params._meta = meta;
    let token;
    if (typeof onProgress === 'function') {
      params._meta = { ...(meta || {}) };
      token = params._meta.progressToken ?? `bb-${base64url(this.#platform.randomBytes(12))}`;
      params._meta.progressToken = token;
      this.#progress.set(token, { onProgress, last: -Infinity });
    }
    try {
      return await this.#rpc('tools/call', params, { timeoutMs: TIMEOUTS.toolCall, signal, interactive });
    } finally {
      if (token !== undefined) this.#progress.delete(token);
    }
  }

  /**
   * Reads a resource (MCP Apps UI resources).
   * @param {string} uri
   * @param {{signal?: AbortSignal}} [opts]
   */
  async readResource(uri, { signal } = {}) {
    await this.#ready(false);
    return this.#rpc('resources/read', { uri }, { timeoutMs: TIMEOUTS.request, signal, interactive: false });
  }

  /**
   * Renews the access token ahead of its expiry (called by an alarm).
   * @returns {Promise<boolean>} true when a new token was stored
   */
  async refreshToken() {
    await this.#load();
    return this.#refresh();
  }

  /** Ends the session (DELETE where the era has one) and goes to 'disconnected'. */
  async disconnect() {
    this.#gen++;
    clearTimeout(this.#toolsTimer);
    this.#toolsTimer = null;
    this.#toolsStale = false;
    const t = this.#transport;
    this.#transport = null;
    if (t) await t.close();
    this.#tools = [];
    this.#setState('disconnected', 'Not connected.');
  }

  /** Disconnects and forgets the tokens and the client registration (revoking the tokens where the server can). */
  async signOut() {
    await this.disconnect();
    await this.#load();
    await this.#revoke();
    this.#tokens = null;
    this.#client = null;
    this.#auth = null;
    for (const key of Object.values(this.#keys)) await this.#platform.storage.remove(key);
    this.#setState('disconnected', `Signed out of ${this.#host()}.`);
  }

  // -------------------------------------------------------------------------
  // Connecting

  async #connect(interactive) {
    const gen = this.#gen;
    await this.#load();
    if (gen !== this.#gen) return;
    let url;
    try {
      url = this.#serverUrl();
    } catch (err) {
      this.#setState('error', err.message);
      return;
    }
    const host = url.host;
    if (this.#transport) {
      const old = this.#transport;
      this.#transport = null;
      await old.close();
    }
    this.#setState('connecting', `Connecting to ${host}…`);
    let transport = null;
    try {
      await this.#check(url, 'server');
      if (interactive) {
        // A sign-in asked for grants what a 403 asked for before (a non-interactive step-up).
        const challenged = (await this.#platform.storage.get(this.#keys.challenged)) || [];
        const granted = this.#tokens?.scope || [];
        if (this.#tokens && challenged.some((sc) => !granted.includes(sc))) {
          await this.#signInFlow({ challenge: { scope: challenged }, stepUp: true });
        }
      }
      const preferred = await this.#platform.storage.get(this.#keys.transport);
      transport = await withRetry(
        () =>
          this.#withAuth(
            async () => {
              if (gen !== this.#gen) throw new RemoteError('cancelled', 'Disconnected.');
              if (this.#state !== 'connecting') this.#setState('connecting', `Connecting to ${host}…`);
              await this.#ensureFreshToken();
              return connectTransport(this.#transportOptions(url), { preferred });
            },
            { interactive },
          ),
        RETRY_PRESETS.Standard,
        {
          shouldRetry: isTransient,
          sleep: (ms) => this.#sleep(ms),
          onRetry: (err, attempt, delay) => {
            this.#log('info', 'connect failed, retrying', { attempt: attempt + 1, delayMs: delay, error: err.message });
            this.#setState(
              'connecting',
              `Could not connect to ${host} (${err.message}) Retrying in ${Math.round(delay / 1000)} s…`,
            );
          },
        },
      );
      if (gen !== this.#gen) {
        await transport.close();
        return;
      }
      this.#transport = transport;
      if (transport.era === 'sse') transport.onclose = (err) => this.#dropped(transport, err);
      await this.#platform.storage.set(this.#keys.transport, transport.era);
      await this.#listTools(interactive);
      if (gen !== this.#gen) return;
      this.#setState('connected', this.#connectedMessage());
      this.#listen(transport);
    } catch (err) {
      if (gen !== this.#gen) {
        await transport?.close();
        return;
      }
      this.#fail(err);
    }
  }

  /** The state a failed connect ends in. */
  #fail(err) {
    const e = err instanceof RemoteError ? err : new RemoteError('network', String(err?.message || err));
    this.#log(e.category === 'auth' ? 'info' : 'warn', 'connect failed', {
      category: e.category,
      status: e.status,
      error: e.message,
    });
    if (e.needsSignIn) {
      this.#setState(e.data?.invalidToken ? 'invalid-token' : 'needs-auth', e.message);
      return;
    }
    this.#setState('error', e.message);
  }

  /** Makes sure the server is connected before a call, connecting if needed. */
  async #ready(interactive) {
    if (this.#state === 'connected' && this.#transport) return;
    if (this.#connecting) await this.#connecting;
    if (!(this.#state === 'connected' && this.#transport)) await this.connect({ interactive });
    if (!(this.#state === 'connected' && this.#transport)) {
      const category = ['needs-auth', 'invalid-token'].includes(this.#state) ? 'auth' : 'network';
      throw new RemoteError(category, this.#message, { needsSignIn: category === 'auth' });
    }
  }

  /** A legacy event stream dropped: reconnect (with the Standard retry preset). */
  #dropped(transport, err) {
    if (this.#transport !== transport) return;
    this.#transport = null;
    this.#log('warn', 'event stream dropped', { error: err?.message });
    this.#setState('connecting', `The connection to ${this.#host()} dropped; reconnecting…`);
    this.connect({ interactive: false });
  }

  #transportOptions(url) {
    return {
      url,
      platform: this.#platform,
      headers: this.#config.headers,
      bearer: () => this.#tokens?.access_token,
      clientInfo: this.#platform.clientInfo || DEFAULT_CLIENT_INFO,
      onMessage: (msg) => this.#notification(msg),
      toolByName: (name) => this.#tools.find((t) => t.name === name),
      log: (level, msg, fields) => this.#log(level, msg, fields),
    };
  }

  #notification(msg) {
    if (msg.method === 'notifications/tools/list_changed') {
      this.#toolsChanged();
    } else if (msg.method === 'notifications/progress') {
      this.#onProgress(msg.params);
    } else if (msg.method === 'notifications/message') {
      this.#log('debug', 'server log message', { level: msg.params?.level, logger: msg.params?.logger });
    }
  }

  /** A notifications/progress: to the callTool that sent its token, while progress goes up. */
  #onProgress(params) {
    const entry = params && this.#progress.get(params.progressToken);
    if (!entry || typeof params.progress !== 'number' || !(params.progress > entry.last)) return;
    entry.last = params.progress;
    try {
      entry.onProgress(params);
    } catch (err) {
      this.#log('warn', 'onProgress failed', { error: String(err?.message || err) });
    }
  }

  /** A list_changed: tools/list again after LIST_CHANGED_DELAY_MS of quiet (one refresh at a time). */
  #toolsChanged() {
    if (!this.#transport && !this.#connecting) return;
    this.#toolsStale = true;
    if (this.#toolsTimer || this.#toolsRefresh) return; // the coming or running refresh sees the flag
    this.#toolsTimer = setTimeout(() => {
      this.#toolsTimer = null;
      this.#toolsRefresh = this.#refreshTools().finally(() => {
        this.#toolsRefresh = null;
        if (this.#toolsStale) this.#toolsChanged();
      });
    }, LIST_CHANGED_DELAY_MS);
  }

  /** Reads every page of tools/list again, then fires onChange once. */
  async #refreshTools() {
    const gen = this.#gen;
    if (this.#connecting) await this.#connecting; // it reads the list itself
    let tools = null;
    for (let round = 0; round < MAX_REFRESH_ROUNDS && this.#toolsStale; round++) {
      if (gen !== this.#gen || !this.#transport || !['connected', 'token-refresh'].includes(this.#state)) {
        this.#toolsStale = false;
        return;
      }
      this.#toolsStale = false;
      try {
        tools = await this.#fetchTools(false);
      } catch (err) {
        this.#log('warn', 'tools/list after list_changed failed', { error: err.message });
        return;
      }
      if (gen !== this.#gen) return;
    }
    if (!tools) return;
    this.#tools = tools;
    if (this.#state === 'connected') this.#message = this.#connectedMessage();
    this.#log('info', 'tools changed', { tools: tools.length });
    this.#emit();
  }

  async #listTools(interactive) {
    this.#tools = await this.#fetchTools(interactive);
    this.#emit();
    return this.#tools;
  }

  /** Every page of tools/list. */
  async #fetchTools(interactive) {
    const tools = [];
    let cursor;
    for (let page = 0; page < MAX_TOOL_PAGES; page++) {
      const r = await this.#rpc('tools/list', cursor ? { cursor } : undefined, {
        timeoutMs: TIMEOUTS.request,
        interactive,
      });
      for (const t of Array.isArray(r.tools) ? r.tools : []) {
        if (t && typeof t === 'object' && typeof t.name === 'string' && t.name) tools.push(t);
      }
      cursor = typeof r.nextCursor === 'string' && r.nextCursor ? r.nextCursor : undefined;
      if (!cursor) break;
    }
    return tools;
  }

  #connectedMessage() {
    const n = this.#tools.length;
    return `Connected to ${this.#host()}: ${n} tool${n === 1 ? '' : 's'}.`;
  }

  /**
   * A request through the transport, with sign-in handling and one
   * re-initialization when the server ended the session.
   */
  async #rpc(method, params, { timeoutMs, signal, interactive }) {
    let renewed = false;
    const result = await this.#withAuth(
      async () => {
        await this.#ensureFreshToken();
        let t = this.#transport;
        if (!t) throw new RemoteError('network', `Not connected to ${this.#host()}.`);
        if (t.expired) {
          renewed = true; // ended under another request, or while a sign-in was renewed
          t = await this.#renew(t);
        }
        try {
          return await t.request(method, params, { timeoutMs, signal });
        } catch (err) {
          if (!err.data?.sessionExpired || renewed) {
            if (err.category === 'network' && this.#transport === t && this.#state === 'connected') {
              this.#setState('error', err.message);
            }
            throw err;
          }
          renewed = true; // once per request
          t = await this.#renew(t);
          return t.request(method, params, { timeoutMs, signal });
        }
      },
      { interactive },
    );
    if (['authenticated', 'token-refresh'].includes(this.#state) && this.#transport && !this.#connecting) {
      this.#setState('connected', this.#connectedMessage());
    }
    if (this.#transport?.listening === 'resting') this.#listen(this.#transport);
    return result;
  }

  /**
   * A new session after the server ended one (404 to its session id):
   * initialize again, once for all the requests that saw the 404.
   * @returns {Promise<object>} the transport to use now
   */
  #renew(old) {
    if (this.#renewing?.old === old) return this.#renewing.promise;
    if (this.#transport !== old) {
      if (this.#transport) return Promise.resolve(this.#transport); // renewed already
      return Promise.reject(new RemoteError('network', `Not connected to ${this.#host()}.`));
    }
    const gen = this.#gen;
    const promise = (async () => {
      this.#log('info', 'session ended by the server; initializing again', {});
      await old.close();
      const t = await connectTransport(this.#transportOptions(this.#serverUrl()), { preferred: old.era });
      if (gen !== this.#gen || this.#transport !== old) {
        await t.close();
        throw new RemoteError('cancelled', `Disconnected from ${this.#host()}.`);
      }
      this.#transport = t;
      if (t.era === 'sse') t.onclose = (err) => this.#dropped(t, err);
      this.#listen(t);
      return t;
    })();
    this.#renewing = { old, promise };
    promise
      .catch(() => {})
      .finally(() => {
        if (this.#renewing?.promise === promise) this.#renewing = null;
      });
    return promise;
  }

  /**
   * Keeps the standalone GET stream of a stateful Streamable HTTP session
   * open while t is the transport in use (see the top of this file).
   * t.listening: 'open' while it runs, 'none' when the server offers no
   * stream, 'resting' after too many failures (the next successful request
   * starts it again), 'stopped' otherwise.
   */
  async #listen(t) {
    if (
      t.era !== 'streamable' ||
      !t.capabilities?.tools?.listChanged ||
      t.listening === 'open' ||
      t.listening === 'none'
    ) {
      return;
    }
    t.listening = 'open';
    const cursor = t.streamCursor || (t.streamCursor = { lastEventId: '', retry: undefined, opened: false });
    const live = () => this.#transport === t && !t.ended.signal.aborted;
    const preset = RETRY_PRESETS.Standard;
    let failures = 0;
    let end = 'stopped';
    try {
      while (live()) {
        cursor.opened = false;
        let err = null;
        try {
          const r = await this.#withAuth(
            async () => {
              await this.#ensureFreshToken();
              return t.listenOnce(cursor);
            },
            { interactive: false },
          );
          if (r.unsupported) {
            this.#log('info', 'the server offers no event stream for notifications', { status: r.unsupported });
            end = 'none';
            return;
          }
        } catch (e) {
          err = e;
        }
        if (!live()) return;
        if (cursor.opened) failures = 0;
        let delay = cursor.retry;
        if (err) {
          if (!isTransient(err)) {
            // A sign-in may come back with the next request; a server that breaks the protocol will not.
            this.#log('warn', 'the event stream for notifications failed', {
              category: err.category,
              status: err.status,
              error: err.message,
            });
            end = err.category === 'auth' ? 'resting' : 'none';
            return;
          }
          if (failures >= preset.maxRetries) {
            this.#log('warn', 'the event stream for notifications keeps failing; waiting for the next request', {
              error: err.message,
            });
            end = 'resting';
            return;
          }
          delay ??= retryDelay(preset, failures);
          if (typeof err.retryAfter === 'number') delay = Math.min(Math.max(delay, err.retryAfter), preset.maxDelay);
          failures++;
        }
        delay ??= retryDelay(preset, 0);
        this.#log('debug', 'reopening the event stream for notifications', {
          delayMs: delay,
          resume: !!cursor.lastEventId,
          error: err?.message,
        });
        await this.#sleep(delay);
      }
    } finally {
      t.listening = end;
    }
  }

  // -------------------------------------------------------------------------
  // Authorization

  /**
   * Runs fn; on 401 refreshes or signs in and runs it again, on 403
   * insufficient_scope steps up to the union of the scopes, within limits.
   */
  async #withAuth(fn, { interactive }) {
    let unauthorized = 0;
    let stepUps = 0;
    for (;;) {
      try {
        return await fn();
      } catch (err) {
        if (!(err instanceof RemoteError) || err.category !== 'auth' || !err.status) throw err;
        if (Object.keys(this.#config.headers).some((k) => k.toLowerCase() === 'authorization')) {
          throw new RemoteError(
            'auth',
            `${this.#host()} refused the Authorization header configured for it (HTTP ${err.status}).`,
            { status: err.status },
          );
        }
        const challenge = err.challenge || null;
        if (err.status === 401) {
          if (++unauthorized > 2) {
            throw new RemoteError(
              'auth',
              `${this.#host()} still refuses the sign-in (HTTP 401); sign out and sign in again.`,
              { status: 401 },
            );
          }
          await this.#authorize({ challenge, interactive, stepUp: false });
          continue;
        }
        if (err.status === 403 && challenge?.error === 'insufficient_scope') {
          const granted = this.#tokens?.scope || [];
          const wanted = union(challenge.scope);
          if (!wanted.length || wanted.every((s) => granted.includes(s))) {
            throw new RemoteError(
              'auth',
              `${this.#host()} refused the request for lack of permission${wanted.length ? ` (${wanted.join(' ')})` : ''}, although the sign-in grants it; the server's owner must fix its permissions.`,
              { status: 403, challenge },
            );
          }
          if (++stepUps > MAX_STEP_UPS) {
            throw new RemoteError(
              'auth',
              `${this.#host()} kept asking for more permission (${wanted.join(' ')}); giving up.`,
              { status: 403, challenge },
            );
          }
          await this.#rememberChallenged(wanted);
          await this.#authorize({ challenge, interactive, stepUp: true });
          continue;
        }
        throw err;
      }
    }
  }

  /** Gets a working token: refresh first on a 401, else a sign-in (shared by concurrent callers). */
  async #authorize(args) {
    if (!this.#authing) {
      this.#authing = this.#authorizeOnce(args).finally(() => {
        this.#authing = null;
      });
    }
    return this.#authing;
  }

  async #authorizeOnce({ challenge, interactive, stepUp }) {
    const token = this.#tokens?.access_token;
    if (!stepUp && token && this.#tokens.refresh_token && this.#refreshedFor !== token) {
      this.#refreshedFor = token;
      if (await this.#refresh()) return;
    }
    if (!interactive) {
      const host = this.#host();
      const hadToken = !!token || this.#state === 'invalid-token';
      throw new RemoteError(
        'auth',
        stepUp
          ? `${host} needs more permission (${(challenge?.scope || []).join(' ')}); sign in again to grant it.`
          : hadToken
            ? `The sign-in to ${host} is no longer valid; sign in again.`
            : `Sign in to ${host} to use its tools.`,
        { needsSignIn: true, data: { invalidToken: hadToken && !stepUp } },
      );
    }
    await this.#signInFlow({ challenge, stepUp });
  }

  /** Discovery, registration, authorization code with PKCE, token exchange. */
  async #signInFlow({ challenge, stepUp }) {
    const p = this.#platform;
    const host = this.#host();
    if (this.#config.clientSecret && !this.#config.clientId) {
      throw new RemoteError(
        'config',
        `Client secrets are not supported without a client ID: set the client ID that the sign-in server of ${host} issued with the secret.`,
      );
    }
    this.#setState('registering', `Finding out how to sign in to ${host}…`);
    const auth = await this.#discoverAuth(challenge);
    const challenged = (await p.storage.get(this.#keys.challenged)) || [];
    const scopes = selectScopes({
      challenge,
      prm: auth.prm,
      asMetadata: auth.asMetadata,
      configured: this.#config.scopes,
      previous: union(this.#tokens?.scope, challenged, stepUp ? challenge?.scope : []),
    });
    let client = await this.#ensureClient(auth, scopes);
    const asHost = new URL(auth.asMetadata.authorization_endpoint).host;
    for (let attempt = 0; ; attempt++) {
      this.#setState('authorizing', `Waiting for you to sign in to ${asHost}…`);
      const { verifier, challenge: codeChallenge } = await pkcePair(p);
      const state = base64url(p.randomBytes(16));
      const url = authorizationUrl({
        endpoint: auth.asMetadata.authorization_endpoint,
        clientId: client.client_id,
        redirectUri: p.redirectUri,
        scopes,
        state,
        challenge: codeChallenge,
        resource: auth.resource,
      });
      await this.#check(url, 'authorization'); // never opened when refused
      let redirected;
      try {
        redirected = await p.launchWebAuthFlow({ url, interactive: true });
      } catch (err) {
        throw new RemoteError(
          'auth',
          `The sign-in to ${host} did not finish (${err?.message || err}). Sign in again to use its tools.`,
          { needsSignIn: true },
        );
      }
      const code = parseRedirect(redirected, {
        redirectUri: p.redirectUri,
        state,
        issuer: auth.asMetadata['x-browserbridge-defaults'] ? undefined : auth.asMetadata.issuer,
        issRequired: auth.asMetadata.authorization_response_iss_parameter_supported === true,
      });
      try {
        const t = await tokenRequest(this.#oauthContext(), {
          asMetadata: auth.asMetadata,
          client: this.#tokenClient(client, auth.asMetadata),
          params: {
            grant_type: 'authorization_code',
            code,
            redirect_uri: p.redirectUri,
            code_verifier: verifier,
            resource: auth.resource,
          },
        });
        await this.#storeTokens(t, scopes, auth);
        await p.storage.remove(this.#keys.challenged);
        this.#refreshedFor = '';
        this.#setState('authenticated', `Signed in to ${host}.`);
        return;
      } catch (err) {
        if (attempt === 0 && err.data?.oauthError === 'invalid_client' && client.via !== 'pre') {
          this.#log('info', 'client unknown to the authorization server; registering again', { via: client.via });
          await this.#forgetClient(client);
          this.#setState('registering', `Registering Browser Bridge with ${asHost} again…`);
          client = await this.#ensureClient(auth, scopes);
          continue;
        }
        throw err;
      }
    }
  }

  /** Protected-resource and authorization-server metadata, checked. */
  async #discoverAuth(challenge) {
    const url = this.#serverUrl();
    const ctx = this.#oauthContext();
    const prm = await discoverProtectedResource(ctx, { serverUrl: url, challenge });
    const legacy = !prm;
    const issuers = prm ? prm.metadata.authorization_servers.filter((s) => typeof s === 'string') : [url.origin];
    let asMetadata = null;
    let issuer = '';
    for (const candidate of issuers) {
      issuer = candidate;
      await this.#check(candidate, 'authorization-server');
      asMetadata = await discoverAuthServer(ctx, { issuer: candidate, legacy });
      if (asMetadata) break;
    }
    if (!asMetadata) {
      if (!legacy) {
        throw new RemoteError(
          'auth',
          `Could not find the metadata of the sign-in server ${issuer} that ${url.host} names.`,
        );
      }
      this.#log('info', 'no authorization-server metadata; using the 2025-03-26 default endpoints', {});
      asMetadata = defaultEndpoints(url);
    }
    // Refuse bad endpoints before anything is registered or opened.
    checkUrl(asMetadata.authorization_endpoint, {
      developerMode: !!this.#platform.developerMode,
      purpose: 'authorization',
    });
    checkUrl(asMetadata.token_endpoint, { developerMode: !!this.#platform.developerMode, purpose: 'token' });
    const auth = {
      resource: prm ? prm.metadata.resource : canonicalResource(url),
      prmUrl: prm?.url || '',
      prm: prm?.metadata || null,
      issuer: asMetadata.issuer || issuer,
      asMetadata,
      legacy,
    };
    this.#auth = auth;
    await this.#platform.storage.set(this.#keys.endpoints, auth);
    return auth;
  }

  /** The client id to use: stored, pre-registered, a metadata document URL, or a new registration. */
  async #ensureClient(auth, scopes) {
    const p = this.#platform;
    const issuerKey = auth.asMetadata.issuer || auth.asMetadata.token_endpoint;
    const stored = this.#client;
    const now = p.now();
    if (
      stored &&
      stored.issuer === issuerKey &&
      stored.redirect_uri === p.redirectUri &&
      !(stored.client_secret_expires_at && stored.client_secret_expires_at <= now) &&
      (stored.via !== 'pre' || stored.client_id === this.#config.clientId)
    ) {
      return stored;
    }
    let client;
    if (this.#config.clientId) {
      // The secret itself stays in the config: #tokenClient adds it for the token endpoint.
      const method = secretAuthMethod(auth.asMetadata, !!this.#config.clientSecret);
      client = { client_id: this.#config.clientId, token_endpoint_auth_method: method, via: 'pre' };
    } else if (
      p.clientMetadataUrl &&
      auth.asMetadata.client_id_metadata_document_supported === true &&
      !(stored?.cimdRejected === issuerKey)
    ) {
      client = { client_id: p.clientMetadataUrl, token_endpoint_auth_method: 'none', via: 'cimd' };
    } else if (auth.asMetadata.registration_endpoint) {
      this.#setState(
        'registering',
        `Registering Browser Bridge with ${new URL(auth.asMetadata.registration_endpoint).host}…`,
      );
      client = {
        ...(await registerClient(this.#oauthContext(), {
          asMetadata: auth.asMetadata,
          redirectUri: p.redirectUri,
          scopes,
        })),
        via: 'dcr',
      };
    } else {
      throw new RemoteError(
        'config',
        `The sign-in server of ${this.#host()} does not let Browser Bridge register itself. Ask its owner for a client ID registered for ${p.redirectUri} and set it in this server's settings.`,
      );
    }
    client.issuer = issuerKey;
    client.redirect_uri = p.redirectUri;
    client.registered_at = now;
    this.#client = client;
    await p.storage.set(this.#keys.client, client);
    this.#log('info', 'client id chosen', { via: client.via, auth: client.token_endpoint_auth_method });
    return client;
  }

  /**
   * The client as the token endpoint gets it. A pre-registered client gets
   * the configured secret here (and only here), with the method the
   * server's metadata asks for now; never with another client id.
   */
  #tokenClient(client, asMetadata) {
    if (client?.via !== 'pre') return client;
    const secret = client.client_id === this.#config.clientId ? this.#config.clientSecret : undefined;
    const method = secretAuthMethod(asMetadata, !!secret);
    const out = { client_id: client.client_id, token_endpoint_auth_method: method };
    if (secret && method !== 'none') out.client_secret = secret;
    return out;
  }

  async #forgetClient(client) {
    if (client?.via === 'cimd') {
      // The server could not use the metadata document: register instead next time.
      this.#client = { cimdRejected: client.issuer };
      await this.#platform.storage.set(this.#keys.client, this.#client);
      return;
    }
    this.#client = null;
    await this.#platform.storage.remove(this.#keys.client);
  }

  async #storeTokens(t, requested, auth) {
    const now = this.#platform.now();
    const prev = this.#tokens;
    const granted = typeof t.scope === 'string' ? t.scope.split(/\s+/).filter(Boolean) : requested || prev?.scope || [];
    this.#tokens = {
      access_token: t.access_token,
      token_type: 'Bearer',
      expires_at: typeof t.expires_in === 'number' && t.expires_in > 0 ? now + t.expires_in * 1000 : 0,
      scope: granted,
      resource: auth.resource,
      issuer: auth.issuer,
    };
    const refresh = t.refresh_token || (requested === null ? prev?.refresh_token : undefined);
    if (refresh) this.#tokens.refresh_token = refresh;
    await this.#platform.storage.set(this.#keys.tokens, this.#tokens);
    this.#log('info', 'token stored', { expiresInS: t.expires_in, refresh: !!refresh, scopes: granted.join(' ') });
    this.#emit();
  }

  async #forgetTokens() {
    this.#tokens = null;
    await this.#platform.storage.remove(this.#keys.tokens);
  }

  async #rememberChallenged(scopes) {
    const prev = (await this.#platform.storage.get(this.#keys.challenged)) || [];
    await this.#platform.storage.set(this.#keys.challenged, union(prev, scopes));
  }

  /** Refreshes when the token expires within REFRESH_AHEAD_MS. */
  async #ensureFreshToken() {
    const t = this.#tokens;
    if (!t?.refresh_token || !t.expires_at) return;
    if (this.#platform.now() < t.expires_at - REFRESH_AHEAD_MS) return;
    await this.#refresh();
  }

  /** One refresh at a time; true when a new token was stored. */
  #refresh() {
    if (!this.#refreshing) {
      this.#refreshing = this.#refreshOnce().finally(() => {
        this.#refreshing = null;
      });
    }
    return this.#refreshing;
  }

  async #refreshOnce() {
    const t = this.#tokens;
    if (!t?.refresh_token) return false;
    const host = this.#host();
    const before = this.#state;
    const shows = ['connected', 'connecting', 'error', 'invalid-token'].includes(before);
    if (shows) this.#setState('token-refresh', `Renewing the sign-in to ${host}…`);
    const restore = (msg) => {
      if (!shows || this.#state !== 'token-refresh') return;
      this.#setState(
        before === 'invalid-token' ? 'connecting' : before,
        msg ?? (before === 'connected' ? this.#connectedMessage() : this.#message),
      );
    };
    try {
      const auth = this.#auth || (await this.#discoverAuth(null));
      const client = this.#client;
      if (!client?.client_id) {
        throw new RemoteError('auth', 'No client registration is stored.', { data: { oauthError: 'invalid_client' } });
      }
      const tokenClient = this.#tokenClient(client, auth.asMetadata);
      const got = await withRetry(
        () =>
          tokenRequest(this.#oauthContext(), {
            asMetadata: auth.asMetadata,
            client: tokenClient,
            params: {
              grant_type: 'refresh_token',
              refresh_token: t.refresh_token,
              resource: t.resource || auth.resource,
            },
          }),
        RETRY_PRESETS.Quick,
        { shouldRetry: isTransient, sleep: (ms) => this.#sleep(ms) },
      );
      await this.#storeTokens(got, null, auth);
      restore();
      return true;
    } catch (err) {
      const oauthError = err.data?.oauthError;
      if (err.category === 'auth' || oauthError) {
        this.#log('info', 'refresh refused; a new sign-in is needed', { oauthError });
        if (oauthError === 'invalid_client') await this.#forgetClient(this.#client);
        await this.#forgetTokens();
        if (shows && this.#state === 'token-refresh') {
          this.#setState('invalid-token', `The sign-in to ${host} has expired; sign in again.`);
        }
        return false;
      }
      this.#log('warn', 'refresh failed', { category: err.category, error: err.message });
      restore(
        shows && before === 'connected'
          ? `${this.#connectedMessage()} Renewing the sign-in failed (${err.message}); will try again.`
          : undefined,
      );
      return false;
    }
  }

  /** Best-effort RFC 7009 revocation on sign-out. */
  async #revoke() {
    const endpoint = this.#auth?.asMetadata?.revocation_endpoint;
    const t = this.#tokens;
    const client = this.#client;
    if (!endpoint || !t || !client?.client_id) return;
    try {
      const url = await this.#check(endpoint, 'revocation');
      const body = new URLSearchParams({
        token: t.refresh_token || t.access_token,
        token_type_hint: t.refresh_token ? 'refresh_token' : 'access_token',
        client_id: client.client_id,
      });
      const ctl = new AbortController();
      const timer = setTimeout(() => ctl.abort(), 5000);
      try {
        await this.#platform.fetch(url.href, {
          method: 'POST',
          redirect: 'error',
          signal: ctl.signal,
          headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
          body: body.toString(),
        });
      } finally {
        clearTimeout(timer);
      }
    } catch (err) {
      this.#log('info', 'token revocation failed', { error: String(err?.message || err) });
    }
  }

  // -------------------------------------------------------------------------
  // Plumbing

  async #load() {
    if (!this.#loaded) {
      this.#loaded = (async () => {
        const s = this.#platform.storage;
        this.#tokens = (await s.get(this.#keys.tokens)) || null;
        const client = (await s.get(this.#keys.client)) || null;
        this.#client = client && (client.client_id || client.cimdRejected) ? client : null;
        this.#auth = (await s.get(this.#keys.endpoints)) || null;
      })();
    }
    return this.#loaded;
  }

  #serverUrl() {
    return checkUrl(this.#config.url, { developerMode: !!this.#platform.developerMode, purpose: 'server' });
  }

  #host() {
    try {
      return new URL(this.#config.url).host;
    } catch {
      return this.#config.url;
    }
  }

  /** checkUrl, then (where the platform resolves names) checkResolved, cached per host. */
  async #check(url, purpose) {
    const u = checkUrl(url, { developerMode: !!this.#platform.developerMode, purpose });
    const host = hostOf(u);
    const now = this.#platform.now();
    if ((this.#resolved.get(host) || 0) > now) return u;
    const r = await checkResolved(u, this.#platform);
    if (!r.checked && !this.#resolveNoted) {
      this.#resolveNoted = true;
      this.#log('info', r.note, {});
    }
    if (r.checked) this.#resolved.set(host, now + RESOLVE_TTL_MS);
    return u;
  }

  #oauthContext() {
    return {
      platform: this.#platform,
      check: (u, purpose) => this.#check(u, purpose),
      log: (level, msg, fields) => this.#log(level, msg, fields),
    };
  }

  #sleep(ms) {
    if (this.#platform.sleep) return this.#platform.sleep(ms);
    return new Promise((resolve) => setTimeout(resolve, ms));
  }

  #setState(state, message) {
    if (!STATES.includes(state)) throw new Error(`unknown state ${state}`);
    if (!canTransition(this.#state, state)) {
      this.#log('warn', 'unexpected state transition', { from: this.#state, to: state });
    }
    const changed = state !== this.#state || message !== this.#message;
    this.#state = state;
    this.#message = message;
    if (changed) this.#emit();
  }

  #emit() {
    try {
      this.#onChange?.(this);
    } catch (err) {
      this.#log('warn', 'onChange failed', { error: String(err?.message || err) });
    }
  }

  #log(level, msg, fields = {}) {
    try {
      this.#platform.log(level, msg, { server: this.#config.id, ...fields });
    } catch {
      // logging must never break a connection
    }
  }
}

/** p, or a 'cancelled' rejection as soon as signal aborts (p goes on). */
function untilAborted(p, signal) {
  if (!signal) return p;
  const cancelled = () => new RemoteError('cancelled', 'The request was cancelled.');
  if (signal.aborted) {
    p.catch(() => {});
    return Promise.reject(cancelled());
  }
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(cancelled());
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
