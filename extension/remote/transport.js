// The MCP HTTP transports of every era, client side, and the choice between
// them (mcp-protocol.md, "Versions", "Legacy HTTP+SSE", "Streamable HTTP").
//
//   stateless  2026-07-28: no initialize, no session; every request carries
//              _meta (protocol version, client info, capabilities) and the
//              Mcp-Method / Mcp-Name headers; server/discover instead of
//              initialize; closing the response stream cancels a request.
//   streamable 2025-03-26 .. 2025-11-25: initialize → Mcp-Session-Id on
//              every later request with MCP-Protocol-Version; a POST is
//              answered with JSON or an event stream, which is resumed with
//              GET + Last-Event-ID when it ends before the answer; DELETE
//              ends the session.
//   sse        2024-11-05 HTTP+SSE: GET opens the event stream, whose first
//              event `endpoint` says where to POST; answers come as
//              `message` events on the stream.
//
// connectTransport tries them in that order (a remembered era first): it
// moves on when a server answers server/discover with an error or a 4xx,
// and from Streamable HTTP to HTTP+SSE when the POST of initialize is
// answered 400, 404 or 405. Auth errors (401/403) and transient failures
// stop the probing and go back to the caller.
//
// A transport belongs to one RemoteServer; nothing here is shared between
// servers. Every transport has
//   era, protocolVersion, serverInfo, capabilities, instructions
//   request(method, params, {timeoutMs, signal}) → result (throws RemoteError)
//   notify(method, params) → void
//   close() → ends the session (best effort, never throws)
//   onclose  (sse only) called once when the event stream drops by itself
// and the stateful Streamable HTTP transport also
//   listenOnce(cursor) → one connection of the standalone GET stream
//   expired  true once the server answered 404 to the session id
//   ended    an AbortController aborted by close()

import { RemoteError, capitalize, httpError } from './errors.js';
import { deadline, fetchError, readText } from './http.js';
import { bearerChallenge } from './oauth.js';
import { SSEParser, readEvents } from './sse.js';

/** Per-request time limits (spec 002, "Protocol"). */
export const TIMEOUTS = Object.freeze({
  request: 30_000,
  notification: 10_000,
  toolCall: 60_000,
  /** Waiting for the legacy transport's `endpoint` event. */
  endpoint: 30_000,
});

export const STATELESS_VERSION = '2026-07-28';
export const LATEST_STATEFUL_VERSION = '2025-11-25';
/** Versions the initialize handshake accepts from a server. */
export const STATEFUL_VERSIONS = Object.freeze(['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05']);

/** Largest JSON answer read from an MCP server. */
export const MAX_MESSAGE_BYTES = 16 << 20;

/** How often one answer's event stream is resumed before giving up. */
const MAX_RESUMES = 20;

/** Error codes of the 2026-07-28 era. */
export const CODES = Object.freeze({
  headerMismatch: -32020,
  unsupportedProtocolVersion: -32022,
  methodNotFound: -32601,
});

/** Where an era's answer says "not me": probing moves on. */
const FALLBACK_STATUSES = [400, 404, 405, 406, 415];

/**
 * @typedef {object} TransportOptions
 * @property {URL} url the MCP endpoint (already checked by ssrf.js)
 * @property {object} platform see platform.js (fetch, now, sleep?)
 * @property {Record<string, string>} [headers] configured headers
 * @property {() => string|undefined} bearer the current access token
 * @property {{name: string, version: string}} clientInfo
 * @property {(msg: object) => void} [onMessage] server notifications
 * @property {(name: string) => object|undefined} [toolByName] for x-mcp-header parameters
 * @property {(level: string, msg: string, fields?: object) => void} log
 */

/** Common plumbing of the two Streamable HTTP eras and the legacy transport. */
class HttpBase {
  /** @param {TransportOptions} opts */
  constructor(opts) {
    this.opts = opts;
    this.url = opts.url;
    this.origin = opts.url.origin;
    this.what = `the MCP server at ${opts.url.host}`;
    this.nextId = 1;
    this.protocolVersion = '';
    this.serverInfo = undefined;
    this.capabilities = {};
    this.instructions = undefined;
  }

  /**
   * The headers of a request to target: the configured ones, then the
   * bearer token — only towards the server's own origin, and never in place
   * of a configured Authorization header — then extra.
   */
  headers(target, extra = {}) {
    const h = { ...(this.opts.headers || {}) };
    const token = this.opts.bearer?.();
    const configuredAuth = Object.keys(h).some((k) => k.toLowerCase() === 'authorization');
    if (token && !configuredAuth && new URL(String(target)).origin === this.origin) h.Authorization = `Bearer ${token}`;
    return { ...h, ...extra };
  }

  fetch(url, init) {
    return this.opts.platform.fetch(String(url), { ...init, redirect: 'error' });
  }

  /** The RemoteError for an HTTP error answer; 401/403 carry the challenge. */
  async fail(res) {
    if (res.status === 401 || res.status === 403) {
      const challenge = bearerChallenge(res.headers.get('www-authenticate'));
      res.body?.cancel().catch(() => {});
      const detail = challenge?.error ? `, ${challenge.error}` : '';
      return new RemoteError(
        'auth',
        res.status === 401
          ? `${capitalize(this.what)} asks for a sign-in (HTTP 401${detail}).`
          : `${capitalize(this.what)} refused the request (HTTP 403${detail}).`,
        { status: res.status, challenge: challenge || undefined },
      );
    }
    let body = '';
    try {
      body = await readText(res, 64 << 10);
    } catch {
      // the status alone will do
    }
    const msg = parseJson(body);
    if (res.status < 500 && msg?.error && typeof msg.error.code === 'number') {
      const { code, message, data } = msg.error;
      return new RemoteError(
        'protocol',
        `${capitalize(this.what)} answered HTTP ${res.status} with error ${code}: ${message || 'no message'}.`,
        { status: res.status, code, data },
      );
    }
    return httpError(res, this.what, { now: this.opts.platform.now(), body: body.slice(0, 2000) });
  }

  /** The result of a JSON-RPC response, or its error as a RemoteError. */
  unwrap(msg, method) {
    if (msg.error) {
      const { code, message, data } = msg.error;
      throw new RemoteError(
        'protocol',
        `${capitalize(this.what)} answered ${method} with error ${code}: ${message || 'no message'}.`,
        { code, data },
      );
    }
    return msg.result ?? {};
  }

  /**
   * Handles a message the server sent that is not the awaited answer:
   * notifications go to onMessage, requests get an answer (ping → {}, the
   * rest → method not found, since this client offers no capabilities).
   */
  incoming(msg) {
    if (!msg || typeof msg !== 'object') return;
    if (typeof msg.method === 'string' && msg.id === undefined) {
      try {
        this.opts.onMessage?.(msg);
      } catch (err) {
        this.opts.log('warn', 'notification handler failed', {
          method: msg.method,
          error: String(err?.message || err),
        });
      }
      return;
    }
    if (typeof msg.method === 'string') {
      const reply =
        msg.method === 'ping'
          ? { jsonrpc: '2.0', id: msg.id, result: {} }
          : {
              jsonrpc: '2.0',
              id: msg.id,
              error: { code: CODES.methodNotFound, message: `Browser Bridge does not offer ${msg.method}` },
            };
      this.reply(reply).catch((err) =>
        this.opts.log('debug', 'could not answer a server request', { method: msg.method, error: err.message }),
      );
    }
  }

  async reply() {} // overridden where the era allows server requests
}

/** Streamable HTTP, stateful (2025-03-26 .. 2025-11-25) or stateless (2026-07-28). */
export class StreamableTransport extends HttpBase {
  /** @param {TransportOptions & {era: 'streamable'|'stateless'}} opts */
  constructor(opts) {
    super(opts);
    this.era = opts.era;
    this.sessionId = '';
    /** Set when the server answered 404 to the session id: the session is gone. */
    this.expired = false;
    /** Aborted by close(): ends the standalone GET stream. */
    this.ended = new AbortController();
    if (this.era === 'stateless') this.protocolVersion = STATELESS_VERSION;
  }

  /** server/discover (stateless era): succeeds only for a 2026-07-28 server. */
  async discover() {
    const r = await this.request('server/discover', {}, { timeoutMs: TIMEOUTS.request });
    const versions = Array.isArray(r.supportedVersions) ? r.supportedVersions : [];
    if (!versions.includes(STATELESS_VERSION)) {
      throw new RemoteError('protocol', `${capitalize(this.what)} does not support MCP ${STATELESS_VERSION}.`, {
        code: CODES.unsupportedProtocolVersion,
      });
    }
    this.capabilities = r.capabilities || {};
    this.instructions = r.instructions;
    this.serverInfo = r._meta?.['io.modelcontextprotocol/serverInfo'];
    return r;
  }

  /** The initialize handshake (stateful era). */
  async initialize() {
    const r = await this.request(
      'initialize',
      {
        protocolVersion: LATEST_STATEFUL_VERSION,
        capabilities: {},
        clientInfo: this.opts.clientInfo,
      },
      { timeoutMs: TIMEOUTS.request },
    );
    if (!STATEFUL_VERSIONS.includes(r.protocolVersion)) {
      await this.close();
      throw new RemoteError(
        'protocol',
        `${capitalize(this.what)} speaks MCP version ${JSON.stringify(r.protocolVersion)}, which Browser Bridge does not support.`,
      );
    }
    this.protocolVersion = r.protocolVersion;
    this.serverInfo = r.serverInfo;
    this.capabilities = r.capabilities || {};
    this.instructions = r.instructions;
    await this.notify('notifications/initialized');
    return r;
  }

  /** @returns {Record<string, string>} */
  eraHeaders(msg) {
    const h = {};
    if (this.era === 'stateless') {
      h['MCP-Protocol-Version'] = STATELESS_VERSION;
      if (msg.method) h['Mcp-Method'] = msg.method;
      const name = mcpName(msg.method, msg.params);
      if (name !== undefined) h['Mcp-Name'] = encodeHeaderValue(name);
      if (msg.method === 'tools/call') {
        Object.assign(h, paramHeaders(this.opts.toolByName?.(msg.params?.name), msg.params?.arguments));
      }
      return h;
    }
    if (this.sessionId) h['Mcp-Session-Id'] = this.sessionId;
    if (this.protocolVersion) h['MCP-Protocol-Version'] = this.protocolVersion;
    return h;
  }

  async post(msg, signal) {
    const sid = this.era === 'streamable' ? this.sessionId : '';
    const res = await this.fetch(this.url, {
      method: 'POST',
      headers: this.headers(this.url, {
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
        ...this.eraHeaders(msg),
      }),
      body: JSON.stringify(msg),
      signal,
    });
    if (res.status === 404 && sid) {
      res.body?.cancel().catch(() => {});
      if (this.sessionId === sid) this.sessionId = '';
      this.expired = true;
      throw new RemoteError('protocol', `${capitalize(this.what)} ended the session.`, {
        status: 404,
        data: { sessionExpired: true },
      });
    }
    if (!res.ok) throw await this.fail(res);
    return res;
  }

  /**
   * Sends a request and waits for its answer.
   * @param {string} method
   * @param {object} [params]
   * @param {{timeoutMs?: number, signal?: AbortSignal}} [opts]
   */
  async request(method, params, { timeoutMs = TIMEOUTS.request, signal } = {}) {
    if (signal?.aborted) throw new RemoteError('cancelled', 'The request was cancelled.'); // never sent, nothing to cancel
    const id = this.nextId++;
    const msg = { jsonrpc: '2.0', id, method };
    const p = this.era === 'stateless' ? withMeta(params, this.opts.clientInfo) : params;
    if (p !== undefined) msg.params = p;
    const dl = deadline(timeoutMs, signal);
    try {
      const res = await this.post(msg, dl.signal);
      if (method === 'initialize') this.sessionId = res.headers.get('mcp-session-id') || '';
      const answer = await this.answerOf(res, id, dl);
      return this.unwrap(answer, method);
    } catch (err) {
      const e = fetchError(err, this.what, dl, timeoutMs);
      if (
        (e.category === 'timeout' || e.category === 'cancelled') &&
        this.era === 'streamable' &&
        method !== 'initialize'
      ) {
        this.notify('notifications/cancelled', { requestId: id, reason: e.message }).catch(() => {});
      }
      throw e;
    } finally {
      dl.clear();
    }
  }

  /** Sends a notification (202 expected). */
  async notify(method, params) {
    if (this.era === 'stateless' && method === 'notifications/cancelled') return; // closing the stream cancels
    const msg = { jsonrpc: '2.0', method };
    if (params !== undefined) msg.params = params;
    const dl = deadline(TIMEOUTS.notification);
    try {
      const res = await this.post(msg, dl.signal);
      res.body?.cancel().catch(() => {});
    } catch (err) {
      throw fetchError(err, this.what, dl, TIMEOUTS.notification);
    } finally {
      dl.clear();
    }
  }

  async reply(msg) {
    if (this.era !== 'streamable') return;
    const dl = deadline(TIMEOUTS.notification);
    try {
      const res = await this.post(msg, dl.signal);
      res.body?.cancel().catch(() => {});
    } finally {
      dl.clear();
    }
  }

  /** The JSON-RPC answer with this id, from a JSON body or an event stream. */
  async answerOf(res, id, dl) {
    const type = (res.headers.get('content-type') || '').split(';')[0].trim().toLowerCase();
    if (res.status === 202 || !res.body) {
      throw new RemoteError(
        'protocol',
        `${capitalize(this.what)} accepted the request but sent no answer (HTTP ${res.status}).`,
        { status: res.status },
      );
    }
    if (type === 'application/json') {
      const text = await readText(res, MAX_MESSAGE_BYTES);
      const msg = parseJson(text);
      if (!isAnswer(msg, id)) {
        throw new RemoteError(
          'protocol',
          `${capitalize(this.what)} answered with something that is not the JSON-RPC response to this request.`,
        );
      }
      return msg;
    }
    if (type !== 'text/event-stream') {
      res.body.cancel().catch(() => {});
      throw new RemoteError(
        'protocol',
        `${capitalize(this.what)} answered with ${type || 'no content type'}, not JSON or an event stream; is this an MCP endpoint?`,
        { status: res.status },
      );
    }
    return this.readStream(res.body, id, dl);
  }

  /** Reads an answer's event stream, resuming it with GET + Last-Event-ID when it ends early. */
  async readStream(body, id, dl) {
    const parser = new SSEParser(() => {});
    for (let resumes = 0; ; resumes++) {
      for await (const ev of readEvents(body, parser)) {
        if (ev.event !== 'message') continue;
        const msg = parseJson(ev.data);
        if (isAnswer(msg, id)) return msg;
        this.incoming(msg);
      }
      if (this.era === 'stateless' || !parser.lastEventId || resumes >= MAX_RESUMES) {
        throw new RemoteError('network', `${capitalize(this.what)} closed the answer's event stream before answering.`);
      }
      await sleepFor(this.opts.platform, parser.retry ?? 1000, dl.signal);
      const res = await this.fetch(this.url, {
        method: 'GET',
        headers: this.headers(this.url, {
          Accept: 'text/event-stream',
          'Last-Event-ID': parser.lastEventId,
          ...this.eraHeaders({}),
        }),
        signal: dl.signal,
      });
      if (!res.ok) throw await this.fail(res);
      body = res.body;
      if (!body) throw new RemoteError('network', `${capitalize(this.what)} resumed the event stream without a body.`);
    }
  }

  /**
   * One connection of the standalone GET stream of a stateful session
   * (mcp-protocol.md, "Streamable HTTP"): opens it, hands every server
   * message to incoming() and returns when the server ends the stream.
   * cursor {lastEventId, retry, opened} carries what resuming needs from one
   * connection to the next: lastEventId is sent as Last-Event-ID, the
   * stream's `retry` field is kept, and opened is set once the server
   * answered with an event stream. close() aborts it.
   * @param {{lastEventId?: string, retry?: number, opened?: boolean}} cursor
   * @returns {Promise<{unsupported?: number}>} unsupported: the HTTP status
   *   (405, or 404 from a server with no GET route) when there is no stream
   * @throws {RemoteError} auth (401/403, with the challenge), network,
   *   server (5xx, 429), protocol, cancelled (closed)
   */
  async listenOnce(cursor) {
    if (this.era !== 'streamable') return { unsupported: 405 };
    const signal = this.ended.signal;
    const extra = { Accept: 'text/event-stream', ...this.eraHeaders({}) };
    if (cursor.lastEventId) extra['Last-Event-ID'] = cursor.lastEventId;
    let res;
    try {
      res = await this.fetch(this.url, { method: 'GET', headers: this.headers(this.url, extra), signal });
    } catch (err) {
      throw fetchError(err, this.what, { timedOut: false, cancelled: signal.aborted });
    }
    // 404 here does not end the session: a server without a GET route says 404 too.
    if (res.status === 405 || res.status === 404) {
      res.body?.cancel().catch(() => {});
      return { unsupported: res.status };
    }
    if (!res.ok) throw await this.fail(res);
    const type = (res.headers.get('content-type') || '').split(';')[0].trim().toLowerCase();
    if (type !== 'text/event-stream' || !res.body) {
      res.body?.cancel().catch(() => {});
      throw new RemoteError(
        'protocol',
        `${capitalize(this.what)} did not answer the GET of its event stream with an event stream (got ${type || 'nothing'}).`,
        { status: res.status },
      );
    }
    cursor.opened = true;
    const parser = new SSEParser(() => {});
    parser.lastEventId = cursor.lastEventId || '';
    parser.retry = cursor.retry;
    try {
      for await (const ev of readEvents(res.body, parser)) {
        cursor.lastEventId = parser.lastEventId;
        if (ev.event !== 'message') continue;
        this.incoming(parseJson(ev.data)); // answers have no place here and are ignored
      }
    } catch (err) {
      throw fetchError(err, this.what, { timedOut: false, cancelled: signal.aborted });
    } finally {
      cursor.lastEventId = parser.lastEventId;
      if (parser.retry !== undefined) cursor.retry = parser.retry;
    }
    return {};
  }

  /** Ends the session with DELETE (stateful era; 405 means the server keeps no sessions). */
  async close() {
    this.ended.abort();
    if (this.era !== 'streamable' || !this.sessionId) return;
    const dl = deadline(TIMEOUTS.notification);
    try {
      const res = await this.fetch(this.url, {
        method: 'DELETE',
        headers: this.headers(this.url, this.eraHeaders({})),
        signal: dl.signal,
      });
      res.body?.cancel().catch(() => {});
    } catch (err) {
      this.opts.log('debug', 'DELETE of the session failed', { error: String(err?.message || err) });
    } finally {
      dl.clear();
      this.sessionId = '';
    }
  }
}

/** The 2024-11-05 HTTP+SSE transport. */
export class LegacySSETransport extends HttpBase {
  /** @param {TransportOptions} opts */
  constructor(opts) {
    super(opts);
    this.era = 'sse';
    this.pending = new Map(); // id → {resolve, reject}
    this.endpoint = null;
    this.closed = false;
    this.onclose = undefined;
  }

  /** Opens the event stream and waits for the `endpoint` event. */
  async open() {
    this.ctl = new AbortController();
    const dl = deadline(TIMEOUTS.endpoint);
    const onTimeout = () => this.ctl.abort(dl.signal.reason);
    dl.signal.addEventListener('abort', onTimeout, { once: true });
    try {
      const res = await this.fetch(this.url, {
        method: 'GET',
        headers: this.headers(this.url, { Accept: 'text/event-stream' }),
        signal: this.ctl.signal,
      });
      if (!res.ok) throw await this.fail(res);
      const type = (res.headers.get('content-type') || '').split(';')[0].trim().toLowerCase();
      if (type !== 'text/event-stream' || !res.body) {
        res.body?.cancel().catch(() => {});
        throw new RemoteError(
          'protocol',
          `${capitalize(this.what)} did not answer GET with an event stream (got ${type || 'nothing'}).`,
          { status: res.status },
        );
      }
      let gotEndpoint;
      const endpoint = new Promise((resolve, reject) => {
        gotEndpoint = { resolve, reject };
      });
      this.pump(res.body, gotEndpoint);
      this.endpoint = await endpoint;
    } catch (err) {
      this.closed = true;
      this.ctl.abort();
      throw fetchError(err, this.what, dl, TIMEOUTS.endpoint);
    } finally {
      dl.signal.removeEventListener('abort', onTimeout);
      dl.clear();
    }
  }

  /** Reads the event stream until it ends; runs in the background. */
  async pump(body, gotEndpoint) {
    let why = new RemoteError('network', `${capitalize(this.what)} closed the event stream.`);
    try {
      for await (const ev of readEvents(body)) {
        if (ev.event === 'endpoint') {
          try {
            const u = new URL(ev.data.trim(), this.url);
            if (u.origin !== this.origin) {
              throw new RemoteError(
                'ssrf',
                `Refused the message endpoint ${u.origin}${u.pathname}: it is not on the server's own origin ${this.origin}.`,
              );
            }
            gotEndpoint.resolve(u);
          } catch (err) {
            gotEndpoint.reject(
              err instanceof RemoteError
                ? err
                : new RemoteError('protocol', `${capitalize(this.what)} sent an endpoint that is not a URL.`),
            );
            this.ctl.abort();
            return;
          }
          continue;
        }
        if (ev.event !== 'message') continue;
        const msg = parseJson(ev.data);
        if (msg && (msg.result !== undefined || msg.error !== undefined) && this.pending.has(msg.id)) {
          this.pending.get(msg.id).resolve(msg);
          this.pending.delete(msg.id);
        } else {
          this.incoming(msg);
        }
      }
    } catch (err) {
      if (!this.closed) why = fetchError(err, this.what);
    } finally {
      gotEndpoint.reject(why);
      const wasOpen = !this.closed;
      this.closed = true;
      for (const p of this.pending.values()) p.reject(why);
      this.pending.clear();
      if (wasOpen) this.onclose?.(why);
    }
  }

  async postMessage(msg, signal) {
    const res = await this.fetch(this.endpoint, {
      method: 'POST',
      headers: this.headers(this.endpoint, { 'Content-Type': 'application/json' }),
      body: JSON.stringify(msg),
      signal,
    });
    if (!res.ok) throw await this.fail(res);
    return res;
  }

  async initialize() {
    const r = await this.request('initialize', {
      protocolVersion: LATEST_STATEFUL_VERSION,
      capabilities: {},
      clientInfo: this.opts.clientInfo,
    });
    this.protocolVersion = r.protocolVersion || '2024-11-05';
    this.serverInfo = r.serverInfo;
    this.capabilities = r.capabilities || {};
    this.instructions = r.instructions;
    await this.notify('notifications/initialized');
    return r;
  }

  async request(method, params, { timeoutMs = TIMEOUTS.request, signal } = {}) {
    if (this.closed) throw new RemoteError('network', `The event stream of ${this.what} is closed.`);
    const id = this.nextId++;
    const msg = { jsonrpc: '2.0', id, method };
    if (params !== undefined) msg.params = params;
    const dl = deadline(timeoutMs, signal);
    let entry;
    const answered = new Promise((resolve, reject) => {
      entry = { resolve, reject };
    });
    answered.catch(() => {}); // a drop before the POST returns is reported below
    this.pending.set(id, entry);
    const onAbort = () => entry.reject(dl.signal.reason);
    dl.signal.addEventListener('abort', onAbort, { once: true });
    try {
      const res = await this.postMessage(msg, dl.signal);
      // Some servers answer on the POST itself.
      const type = (res.headers.get('content-type') || '').split(';')[0].trim().toLowerCase();
      if (type === 'application/json') {
        const direct = parseJson(await readText(res, MAX_MESSAGE_BYTES));
        if (isAnswer(direct, id)) return this.unwrap(direct, method);
      } else {
        res.body?.cancel().catch(() => {});
      }
      return this.unwrap(await answered, method);
    } catch (err) {
      const e = fetchError(err, this.what, dl, timeoutMs);
      if ((e.category === 'timeout' || e.category === 'cancelled') && method !== 'initialize' && !this.closed) {
        this.notify('notifications/cancelled', { requestId: id, reason: e.message }).catch(() => {});
      }
      throw e;
    } finally {
      this.pending.delete(id);
      dl.signal.removeEventListener('abort', onAbort);
      dl.clear();
    }
  }

  async notify(method, params) {
    if (this.closed) return;
    const msg = { jsonrpc: '2.0', method };
    if (params !== undefined) msg.params = params;
    await this.reply(msg);
  }

  async reply(msg) {
    const dl = deadline(TIMEOUTS.notification);
    try {
      const res = await this.postMessage(msg, dl.signal);
      res.body?.cancel().catch(() => {});
    } catch (err) {
      throw fetchError(err, this.what, dl, TIMEOUTS.notification);
    } finally {
      dl.clear();
    }
  }

  async close() {
    this.closed = true;
    this.ctl?.abort();
  }
}

/** The eras in the order they are tried. */
export const ERAS = Object.freeze(['stateless', 'streamable', 'sse']);

/**
 * Connects with the newest era the server speaks, trying `preferred` first.
 * @param {TransportOptions} opts
 * @param {{preferred?: string}} [how]
 * @returns {Promise<StreamableTransport|LegacySSETransport>}
 */
export async function connectTransport(opts, { preferred } = {}) {
  const order = ERAS.includes(preferred) ? [preferred, ...ERAS.filter((e) => e !== preferred)] : [...ERAS];
  const notes = [];
  for (const era of order) {
    const t = era === 'sse' ? new LegacySSETransport(opts) : new StreamableTransport({ ...opts, era });
    try {
      if (era === 'stateless') await t.discover();
      else if (era === 'streamable') await t.initialize();
      else {
        await t.open();
        await t.initialize();
      }
      opts.log('info', 'connected', { era, protocolVersion: t.protocolVersion });
      return t;
    } catch (err) {
      await t.close();
      if (!(err instanceof RemoteError) || !movesOn(era, err)) throw err;
      notes.push(`${era}: ${err.status ? `HTTP ${err.status}` : err.code ? `error ${err.code}` : err.message}`);
      opts.log('debug', 'era not spoken', { era, reason: err.message });
    }
  }
  throw new RemoteError(
    'protocol',
    `The server at ${opts.url.host} does not speak MCP over Streamable HTTP or HTTP+SSE (${notes.join('; ')}); check the URL.`,
  );
}

/** Whether a failure of era means "try the next one". */
function movesOn(era, err) {
  if (err.category === 'auth' || err.category === 'ssrf' || err.category === 'cancelled') return false;
  if (era === 'stateless') {
    // Any answer that is not a 2026-07-28 server/discover result, but not trouble reaching the server.
    return err.category === 'protocol';
  }
  if (era === 'streamable') return err.category === 'protocol' && FALLBACK_STATUSES.includes(err.status);
  return false;
}

// ---------------------------------------------------------------------------
// Helpers

function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function isAnswer(msg, id) {
  return !!msg && typeof msg === 'object' && msg.id === id && (msg.result !== undefined || msg.error !== undefined);
}

function sleepFor(platform, ms, signal) {
  if (platform.sleep) return platform.sleep(ms);
  return new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}

/** The _meta every 2026-07-28 request carries, merged under the caller's. */
export function withMeta(params, clientInfo) {
  const p = params && typeof params === 'object' ? { ...params } : {};
  p._meta = {
    'io.modelcontextprotocol/protocolVersion': STATELESS_VERSION,
    'io.modelcontextprotocol/clientInfo': clientInfo,
    'io.modelcontextprotocol/clientCapabilities': {},
    ...(p._meta || {}),
  };
  return p;
}

/** The Mcp-Name of a request: the tool or prompt name, or the resource URI. */
export function mcpName(method, params) {
  if (method === 'tools/call' || method === 'prompts/get') {
    return typeof params?.name === 'string' ? params.name : undefined;
  }
  if (method === 'resources/read') return typeof params?.uri === 'string' ? params.uri : undefined;
  return undefined;
}

/**
 * A header value as SEP-2243 writes it: as is when it is printable ASCII
 * without leading or trailing white space, else =?base64?…?= of its UTF-8.
 * @param {string} s
 */
export function encodeHeaderValue(s) {
  if (s === '' || (!/^[ \t]|[ \t]$/.test(s) && /^[\x20-\x7e]*$/.test(s))) return s;
  let bin = '';
  for (const b of new TextEncoder().encode(s)) bin += String.fromCharCode(b);
  return `=?base64?${btoa(bin)}?=`;
}

/**
 * Mcp-Param-{Name} headers for a tools/call: properties of the tool's input
 * schema (at any depth) marked "x-mcp-header", with string, boolean or
 * safe-integer values.
 * @param {object|undefined} tool
 * @param {object|undefined} args
 * @returns {Record<string, string>}
 */
export function paramHeaders(tool, args) {
  const out = {};
  const walk = (props, value) => {
    if (!props || typeof props !== 'object' || !value || typeof value !== 'object') return;
    for (const [name, prop] of Object.entries(props)) {
      const v = value[name];
      if (v === undefined || v === null || !prop || typeof prop !== 'object') continue;
      const header = prop['x-mcp-header'];
      if (typeof header === 'string' && /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(header)) {
        let s;
        if (typeof v === 'string') s = v;
        else if (typeof v === 'boolean') s = String(v);
        else if (Number.isSafeInteger(v)) s = String(v);
        if (s !== undefined) out[`Mcp-Param-${header}`] = encodeHeaderValue(s);
      }
      if (prop.properties) walk(prop.properties, v);
    }
  };
  walk(tool?.inputSchema?.properties, args);
  return out;
}
