// Fakes for the remote-MCP core's tests (extension/test/remote-*.test.js).
// The extension never imports this file. Each fake says what it stands for:
//
//   FakeNet          the network: fetch() routed by origin + path to handlers,
//                    with every request recorded; unknown hosts fail like DNS
//   FakeAuthServer   an OAuth 2.1 authorization server: RFC 8414 metadata,
//                    RFC 7591 registration, an authorize endpoint that
//                    approves at once, a token endpoint that checks PKCE
//   FakeMcpServer    a bearer-protected MCP server of one era (stateless,
//                    streamable with JSON or SSE answers, legacy HTTP+SSE)
//                    with RFC 9728 metadata; optionally with the standalone
//                    GET stream of Streamable HTTP (resumable with
//                    Last-Event-ID), list_changed and progress notifications
//   testPlatform     the platform (platform.js) over those, with a clock
//                    the test moves and a log it can read
//
// Only standard Web APIs are used (fetch's Request/Response, streams,
// crypto.subtle), so this runs in Node 20+ and in a browser alike.

import { memoryStorage } from './memory-storage.js';

const enc = new TextEncoder();

/** The network: fetch routed to handlers by origin and path. */
export class FakeNet {
  constructor() {
    this.routes = new Map(); // 'origin/path' → handler(req)
    this.requests = []; // {method, url, headers, body}
    this.fetch = this.fetch.bind(this);
  }

  /**
   * Routes a URL (origin + path; the query is ignored) to a handler.
   * @param {string} url
   * @param {(req: {method: string, url: URL, headers: Record<string, string>, body: string}) =>
   *   Response|Promise<Response>} handler
   */
  on(url, handler) {
    const u = new URL(url);
    this.routes.set(u.origin + u.pathname, handler);
  }

  async fetch(input, init = {}) {
    const url = new URL(String(input));
    const headers = {};
    for (const [k, v] of new Headers(init.headers || {})) headers[k.toLowerCase()] = v;
    const body = typeof init.body === 'string' ? init.body : init.body ? String(init.body) : '';
    const req = { method: (init.method || 'GET').toUpperCase(), url, headers, body };
    this.requests.push(req);
    const signal = init.signal;
    if (signal?.aborted) throw signal.reason ?? new DOMException('aborted', 'AbortError');
    const handler = this.routes.get(url.origin + url.pathname);
    let res;
    if (!handler) {
      const known = [...this.routes.keys()].some((k) => k.startsWith(url.origin));
      if (!known) throw new TypeError('fetch failed', { cause: { code: 'ENOTFOUND' } });
      res = new Response('not found', { status: 404 });
    } else {
      res = await handler(req);
    }
    if (res.status >= 300 && res.status < 400 && init.redirect === 'error') {
      throw new TypeError('fetch failed: redirect mode is set to error');
    }
    return abortable(res, signal);
  }

  /** Requests to a URL prefix, optionally of one method. */
  to(prefix, method) {
    return this.requests.filter((r) => r.url.href.startsWith(prefix) && (!method || r.method === method));
  }
}

/** A response whose body errors when the signal aborts, as fetch's does. */
function abortable(res, signal) {
  if (!signal || !res.body) return res;
  const reader = res.body.getReader();
  const aborted = new Promise((_, reject) => {
    const fail = () => reject(signal.reason ?? new DOMException('aborted', 'AbortError'));
    if (signal.aborted) fail();
    else signal.addEventListener('abort', fail, { once: true });
  });
  aborted.catch(() => {});
  const stream = new ReadableStream({
    async pull(c) {
      try {
        const { done, value } = await Promise.race([reader.read(), aborted]);
        if (done) c.close();
        else c.enqueue(value);
      } catch (err) {
        reader.cancel().catch(() => {});
        c.error(err);
      }
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
  return new Response(stream, { status: res.status, statusText: res.statusText, headers: res.headers });
}

/** A JSON response. */
export function json(value, status = 200, headers = {}) {
  return new Response(JSON.stringify(value), { status, headers: { 'content-type': 'application/json', ...headers } });
}

/** An event stream the test writes to: {response, send(data, {event, id, retry}), raw(text), close(), closed}. */
export function eventStream(headers = {}) {
  let ctl;
  const body = new ReadableStream({
    start(c) {
      ctl = c;
    },
    cancel() {
      stream.closed = true; // the client went away
    },
  });
  const stream = {
    closed: false,
    response: new Response(body, {
      status: 200,
      headers: { 'content-type': 'text/event-stream', ...headers },
    }),
    /** Writes text as is (e.g. a priming event without data). */
    raw(text) {
      try {
        ctl.enqueue(enc.encode(text));
      } catch {
        // closed by the reader
      }
    },
    send(data, { event, id, retry } = {}) {
      let s = '';
      if (event) s += `event: ${event}\n`;
      if (id !== undefined) s += `id: ${id}\n`;
      if (retry !== undefined) s += `retry: ${retry}\n`;
      for (const line of String(typeof data === 'string' ? data : JSON.stringify(data)).split('\n')) {
        s += `data: ${line}\n`;
      }
      try {
        ctl.enqueue(enc.encode(`${s}\n`));
      } catch {
        // closed by the reader
      }
    },
    close() {
      stream.closed = true;
      try {
        ctl.close();
      } catch {
        // already closed
      }
    },
  };
  return stream;
}

async function s256(verifier) {
  const d = new Uint8Array(await crypto.subtle.digest('SHA-256', enc.encode(verifier)));
  let bin = '';
  for (const b of d) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/**
 * An OAuth 2.1 authorization server. Options: issuer (may have a path),
 * metadataAt ('oauth' | 'oidc' | 'none'), metadata (fields merged into or,
 * with a value of undefined, removed from the document), registration (false:
 * no DCR), secret (DCR issues a client secret with this method), cimd
 * (client_id_metadata_document_supported), expiresIn, refresh (issue refresh
 * tokens), scopesSupported.
 */
export class FakeAuthServer {
  constructor(net, opts = {}) {
    this.net = net;
    this.opts = { metadataAt: 'oauth', registration: true, expiresIn: 3600, refresh: true, ...opts };
    this.issuer = opts.issuer || 'https://auth.example.com';
    const u = new URL(this.issuer);
    this.origin = u.origin;
    this.base = this.issuer.replace(/\/$/, '');
    this.clients = new Map(); // client_id → {secret, method}
    this.registrations = [];
    this.authorizations = []; // query objects
    this.tokenRequests = []; // {params, authorization}
    this.tokens = new Map(); // access token → {scopes, resource, client_id}
    this.refreshTokens = new Map();
    this.challenges = new Map(); // code → {challenge, client_id, scopes, resource, redirect_uri}
    this.failNextToken = null; // {status, error}
    this.seq = 0;
    const path = u.pathname.replace(/\/$/, '');
    if (this.opts.metadataAt === 'oauth') {
      net.on(`${u.origin}/.well-known/oauth-authorization-server${path}`, () => json(this.metadata()));
    }
    if (this.opts.metadataAt === 'oidc') {
      net.on(
        path ? `${u.origin}${path}/.well-known/openid-configuration` : `${u.origin}/.well-known/openid-configuration`,
        () => json(this.metadata()),
      );
    }
    net.on(`${this.base}/authorize`, (req) => this.authorize(req));
    net.on(`${this.base}/token`, (req) => this.token(req));
    if (this.opts.registration) net.on(`${this.base}/register`, (req) => this.register(req));
    net.on(`${this.base}/revoke`, () => new Response(null, { status: 200 }));
  }

  metadata() {
    const m = {
      issuer: this.issuer,
      authorization_endpoint: `${this.base}/authorize`,
      token_endpoint: `${this.base}/token`,
      revocation_endpoint: `${this.base}/revoke`,
      response_types_supported: ['code'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: this.opts.secret ? [this.opts.secret] : ['none'],
    };
    if (this.opts.registration) m.registration_endpoint = `${this.base}/register`;
    if (this.opts.cimd) m.client_id_metadata_document_supported = true;
    if (this.opts.scopesSupported) m.scopes_supported = this.opts.scopesSupported;
    for (const [k, v] of Object.entries(this.opts.metadata || {})) {
      if (v === undefined) delete m[k];
      else m[k] = v;
    }
    return m;
  }

  register(req) {
    const body = JSON.parse(req.body);
    this.registrations.push(body);
    const client_id = `client-${++this.seq}`;
    const out = { client_id, redirect_uris: body.redirect_uris, client_name: body.client_name };
    if (this.opts.secret) {
      out.client_secret = `secret-${this.seq}`;
      out.token_endpoint_auth_method = this.opts.secret;
    }
    this.clients.set(client_id, { secret: out.client_secret, method: this.opts.secret || 'none' });
    return json(out, 201);
  }

  /** What the browser window does: the server approves and redirects. */
  async authorize(req) {
    const q = Object.fromEntries(req.url.searchParams);
    this.authorizations.push(q);
    const code = `code-${++this.seq}`;
    this.challenges.set(code, {
      challenge: q.code_challenge,
      method: q.code_challenge_method,
      client_id: q.client_id,
      scopes: q.scope ? q.scope.split(' ') : [],
      resource: q.resource,
      redirect_uri: q.redirect_uri,
    });
    const back = new URL(q.redirect_uri);
    back.searchParams.set('code', code);
    if (q.state) back.searchParams.set('state', q.state);
    if (this.opts.iss) back.searchParams.set('iss', this.opts.iss);
    return new Response(null, { status: 302, headers: { location: back.href } });
  }

  clientOf(req, params) {
    const auth = req.headers.authorization;
    if (auth?.startsWith('Basic ')) {
      const [id, secret] = atob(auth.slice(6))
        .split(':')
        .map((s) => decodeURIComponent(s.replace(/\+/g, ' ')));
      return { id, secret, method: 'client_secret_basic' };
    }
    if (params.client_secret) {
      return { id: params.client_id, secret: params.client_secret, method: 'client_secret_post' };
    }
    return { id: params.client_id, method: 'none' };
  }

  async token(req) {
    const params = Object.fromEntries(new URLSearchParams(req.body));
    this.tokenRequests.push({ params, authorization: req.headers.authorization });
    if (this.failNextToken) {
      const { status, error } = this.failNextToken;
      this.failNextToken = null;
      return json({ error }, status);
    }
    const c = this.clientOf(req, params);
    const known = this.clients.get(c.id);
    const preregistered = this.opts.preregistered === c.id;
    const cimd = this.opts.cimd && /^https:/.test(c.id || '');
    if (!known && !preregistered && !cimd) return json({ error: 'invalid_client' }, 401);
    if (known?.secret && (known.secret !== c.secret || known.method !== c.method)) {
      return json({ error: 'invalid_client' }, 401);
    }
    let scopes;
    let resource;
    if (params.grant_type === 'authorization_code') {
      const ch = this.challenges.get(params.code);
      this.challenges.delete(params.code);
      if (!ch || ch.client_id !== c.id || ch.redirect_uri !== params.redirect_uri) {
        return json({ error: 'invalid_grant' }, 400);
      }
      if (ch.method !== 'S256' || (await s256(params.code_verifier || '')) !== ch.challenge) {
        return json({ error: 'invalid_grant', error_description: 'PKCE' }, 400);
      }
      if (ch.resource !== params.resource) return json({ error: 'invalid_target' }, 400);
      scopes = ch.scopes;
      resource = ch.resource;
    } else if (params.grant_type === 'refresh_token') {
      const r = this.refreshTokens.get(params.refresh_token);
      if (!r || r.client_id !== c.id) return json({ error: 'invalid_grant' }, 400);
      scopes = r.scopes;
      resource = params.resource || r.resource;
    } else {
      return json({ error: 'unsupported_grant_type' }, 400);
    }
    const access = `at-${++this.seq}-${Math.random().toString(36).slice(2)}`;
    this.tokens.set(access, { scopes, resource, client_id: c.id });
    const out = { access_token: access, token_type: 'Bearer', expires_in: this.opts.expiresIn };
    if (scopes.length) out.scope = scopes.join(' ');
    if (this.opts.refresh) {
      const rt = `rt-${++this.seq}-${Math.random().toString(36).slice(2)}`;
      this.refreshTokens.set(rt, { scopes, resource, client_id: c.id });
      out.refresh_token = rt;
    }
    return json(out);
  }

  /** Forgets every client (as a server that dropped its registrations). */
  forgetClients() {
    this.clients.clear();
  }

  /** Invalidates every access token (they expired on the server's side). */
  expireTokens() {
    this.tokens.clear();
  }
}

/**
 * A bearer-protected MCP server. Options:
 *   url          its endpoint (default https://mcp.example.com/mcp)
 *   era          'stateless' | 'streamable' | 'sse'
 *   style        'json' | 'sse' (how a streamable POST is answered)
 *   auth         a FakeAuthServer, or null for an open server
 *   prm          'path' | 'root' | 'none': where its RFC 9728 metadata is
 *   prmInHeader  name the metadata URL in WWW-Authenticate (default true)
 *   prmResource  the metadata's `resource` (default: the server URL, or its origin for 'root')
 *   scope        the scope in the 401 challenge (a string), if any
 *   scopesSupported  the metadata's scopes_supported
 *   needs        {method: scopes[]}: a 403 insufficient_scope when missing
 *   tools        the tools it lists
 *   listChanged  declare capabilities.tools.listChanged (streamable, sse)
 *   getStream    (streamable) answer GET with the standalone event stream
 *                instead of 405; it replays events after a Last-Event-ID
 *   streamRetry  (getStream) open each GET stream with a priming event
 *                carrying this `retry` (ms)
 *   pageSize     list tools this many a page (nextCursor)
 *   progress     for a tools/call with a progressToken: send this many
 *                notifications/progress on the POST's event stream first
 *   hang         a tool name whose call is answered with an event stream
 *                that never brings the result (see hanging)
 */
export class FakeMcpServer {
  constructor(net, opts = {}) {
    this.net = net;
    this.opts = {
      era: 'streamable',
      style: 'json',
      prm: 'path',
      prmInHeader: true,
      tools: [{ name: 'echo', inputSchema: { type: 'object' } }],
      needs: {},
      ...opts,
    };
    this.url = new URL(opts.url || 'https://mcp.example.com/mcp');
    this.auth = opts.auth ?? null;
    this.sessions = new Set();
    this.calls = []; // messages received, in order
    this.seq = 0;
    this.gets = []; // {headers} of every GET of the standalone stream
    this.events = []; // {id, sid, msg} sent on standalone streams, for replays
    this.eventSeq = 0;
    this.standalone = null; // {sid, stream}: the open standalone stream
    this.hanging = []; // {msg, stream} of calls never answered
    this.piggyback = []; // messages sent on the next POST's event stream before its answer
    this.prmUrl =
      this.opts.prm === 'root'
        ? `${this.url.origin}/.well-known/oauth-protected-resource`
        : `${this.url.origin}/.well-known/oauth-protected-resource${this.url.pathname}`;
    if (this.auth && this.opts.prm !== 'none') {
      net.on(this.prmUrl, () => json(this.prmDocument()));
    }
    if (this.opts.era === 'sse') {
      net.on(this.url.href, (req) =>
        req.method === 'GET' ? this.openLegacy(req) : new Response('method not allowed', { status: 405 }),
      );
      net.on(`${this.url.origin}/messages`, (req) => this.legacyPost(req));
      this.streams = new Map();
    } else {
      net.on(this.url.href, (req) => this.handle(req));
    }
  }

  prmDocument() {
    const doc = {
      resource: this.opts.prmResource || (this.opts.prm === 'root' ? this.url.origin : this.url.href),
      authorization_servers: [this.auth.issuer],
    };
    if (this.opts.scopesSupported) doc.scopes_supported = this.opts.scopesSupported;
    return doc;
  }

  /** The 401/403 for a request, or null when its token is good enough. */
  gate(req, msg) {
    if (!this.auth) return null;
    const h = req.headers.authorization || '';
    const info = h.startsWith('Bearer ') ? this.auth.tokens.get(h.slice(7)) : undefined;
    const params = [];
    if (!info) {
      if (this.opts.scope) params.push(`scope="${this.opts.scope}"`);
      if (this.opts.prmInHeader && this.opts.prm !== 'none') params.push(`resource_metadata="${this.prmUrl}"`);
      if (h) params.push('error="invalid_token"');
      return json({ error: 'invalid_token' }, 401, { 'www-authenticate': `Bearer ${params.join(', ')}`.trim() });
    }
    const need = msg && this.opts.needs[msg.method];
    if (need && !need.every((s) => info.scopes.includes(s))) {
      return json({ error: 'insufficient_scope' }, 403, {
        'www-authenticate': `Bearer error="insufficient_scope", scope="${need.join(' ')}", resource_metadata="${this.prmUrl}"`,
      });
    }
    return null;
  }

  answer(msg) {
    switch (msg.method) {
      case 'initialize':
        return {
          protocolVersion: this.opts.version || '2025-11-25',
          capabilities: { tools: this.opts.listChanged ? { listChanged: true } : {} },
          serverInfo: { name: 'fake', version: '1' },
        };
      case 'server/discover':
        return {
          supportedVersions: ['2026-07-28'],
          capabilities: { tools: {} },
          _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'fake', version: '1' } },
        };
      case 'tools/list': {
        if (!this.opts.pageSize) return { tools: this.opts.tools };
        const from = Number(msg.params?.cursor || 0);
        const to = from + this.opts.pageSize;
        return {
          tools: this.opts.tools.slice(from, to),
          ...(to < this.opts.tools.length ? { nextCursor: String(to) } : {}),
        };
      }
      case 'tools/call':
        if (!this.opts.tools.some((t) => t.name === msg.params?.name)) {
          return { error: { code: -32602, message: `unknown tool ${msg.params?.name}` } };
        }
        return { content: [{ type: 'text', text: JSON.stringify(msg.params.arguments ?? {}) }] };
      case 'resources/read':
        return { contents: [{ uri: msg.params.uri, mimeType: 'text/html', text: '<p>app</p>' }] };
      default:
        return { error: { code: -32601, message: `method not found: ${msg.method}` } };
    }
  }

  reply(msg, out, headers = {}) {
    const body = out.error
      ? { jsonrpc: '2.0', id: msg.id, error: out.error }
      : { jsonrpc: '2.0', id: msg.id, result: out };
    const token = msg.method === 'tools/call' ? msg.params?._meta?.progressToken : undefined;
    if (msg.method === 'tools/call' && msg.params?.name === this.opts.hang) {
      const s = eventStream(headers);
      if (token !== undefined) {
        s.send(
          { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: token, progress: 1 } },
          { id: `e${++this.seq}` },
        );
      }
      this.hanging.push({ msg, stream: s });
      return s.response;
    }
    const extras = this.piggyback.splice(0);
    if (token !== undefined && this.opts.progress) {
      for (let i = 1; i <= this.opts.progress; i++) {
        extras.push({
          jsonrpc: '2.0',
          method: 'notifications/progress',
          params: { progressToken: token, progress: i, total: this.opts.progress },
        });
      }
    }
    if (extras.length) {
      const s = eventStream(headers);
      for (const m of extras) s.send(m, { id: `e${++this.seq}` });
      s.send(body, { id: `e${++this.seq}` });
      s.close();
      return s.response;
    }
    if (this.opts.style === 'sse') {
      const s = eventStream(headers);
      s.send(
        { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'working' } },
        { event: 'message', id: `e${++this.seq}` },
      );
      s.send(body, { event: 'message', id: `e${++this.seq}` });
      s.close();
      return s.response;
    }
    return json(body, 200, headers);
  }

  async handle(req) {
    if (req.method === 'DELETE') {
      this.sessions.delete(req.headers['mcp-session-id']);
      return new Response(null, { status: 200 });
    }
    if (req.method === 'GET' && this.opts.getStream) return this.openStandalone(req);
    if (req.method !== 'POST') return new Response('method not allowed', { status: 405 });
    const msg = JSON.parse(req.body);
    this.calls.push({ msg, headers: req.headers });
    if (this.opts.failWith) {
      const f = this.opts.failWith;
      if (typeof f === 'function') {
        const r = f(req, msg);
        if (r) return r;
      }
    }
    const denied = this.gate(req, msg);
    if (denied) return denied;
    const stateless = !!msg.params?._meta?.['io.modelcontextprotocol/protocolVersion'];
    if (this.opts.era === 'stateless') {
      if (!stateless) {
        return json({ jsonrpc: '2.0', id: msg.id ?? null, error: { code: -32600, message: 'send _meta' } }, 400);
      }
      if (req.headers['mcp-method'] !== msg.method) {
        return json({ jsonrpc: '2.0', id: msg.id, error: { code: -32020, message: 'header mismatch' } }, 400);
      }
      return this.reply(msg, this.answer(msg));
    }
    // streamable (stateful)
    if (stateless || msg.method === 'server/discover') {
      return json({ jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'method not found' } });
    }
    if (msg.method === 'initialize') {
      const sid = `s-${++this.seq}`;
      this.sessions.add(sid);
      return this.reply(msg, this.answer(msg), { 'mcp-session-id': sid });
    }
    const sid = req.headers['mcp-session-id'];
    if (!sid) return json({ jsonrpc: '2.0', id: msg.id ?? null, error: { code: -32600, message: 'no session' } }, 400);
    if (!this.sessions.has(sid)) {
      return json({ jsonrpc: '2.0', id: msg.id ?? null, error: { code: -32001, message: 'session not found' } }, 404);
    }
    if (msg.id === undefined) return new Response(null, { status: 202 });
    return this.reply(msg, this.answer(msg));
  }

  /** Streamable HTTP's standalone GET stream (one per session; a new GET replaces it). */
  openStandalone(req) {
    const denied = this.gate(req, null);
    if (denied) return denied;
    this.gets.push({ headers: req.headers });
    const sid = req.headers['mcp-session-id'];
    if (!sid) return json({ jsonrpc: '2.0', id: null, error: { code: -32600, message: 'no session' } }, 400);
    if (!this.sessions.has(sid)) {
      return json({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'session not found' } }, 404);
    }
    this.standalone?.stream.close();
    const s = eventStream();
    this.standalone = { sid, stream: s };
    if (this.opts.streamRetry !== undefined) {
      s.raw(`id: p${++this.eventSeq}\nretry: ${this.opts.streamRetry}\ndata:\n\n`);
    }
    const last = req.headers['last-event-id'];
    const at = last ? this.events.findIndex((e) => e.id === last) : -1;
    if (at >= 0) {
      for (const e of this.events.slice(at + 1)) if (e.sid === sid) s.send(e.msg, { id: e.id });
    }
    return s.response;
  }

  /**
   * Sends a server notification: on the standalone stream of the newest
   * session (kept for a replay when none is open), or on every legacy event
   * stream.
   */
  notify(method, params) {
    const msg = { jsonrpc: '2.0', method, ...(params !== undefined ? { params } : {}) };
    if (this.opts.era === 'sse') {
      for (const s of this.streams.values()) s.send(msg, { event: 'message' });
      return;
    }
    const sid = this.standalone?.sid ?? [...this.sessions].at(-1);
    const id = `g${++this.eventSeq}`;
    this.events.push({ id, sid, msg });
    if (this.standalone && !this.standalone.stream.closed) this.standalone.stream.send(msg, { id });
  }

  /** Changes the tools and says so with notifications/tools/list_changed. */
  setTools(tools) {
    this.opts.tools = tools;
    this.notify('notifications/tools/list_changed');
  }

  /** Closes the standalone stream (a proxy timed it out, the server restarted its front end). */
  dropStandalone() {
    this.standalone?.stream.close();
  }

  // Legacy HTTP+SSE: GET opens a stream whose first event names /messages?sessionId=…
  openLegacy(req) {
    const denied = this.gate(req, null);
    if (denied) return denied;
    const sid = `l-${++this.seq}`;
    const s = eventStream();
    this.streams.set(sid, s);
    s.send(`/messages?sessionId=${sid}`, { event: 'endpoint' });
    return s.response;
  }

  legacyPost(req) {
    const msg = JSON.parse(req.body);
    this.calls.push({ msg, headers: req.headers });
    const s = this.streams.get(req.url.searchParams.get('sessionId'));
    if (!s) return new Response('no session', { status: 404 });
    const denied = this.gate(req, msg);
    if (denied) return denied;
    if (msg.id !== undefined && msg.method) {
      const out = this.answer(msg);
      queueMicrotask(() =>
        s.send(
          out.error ? { jsonrpc: '2.0', id: msg.id, error: out.error } : { jsonrpc: '2.0', id: msg.id, result: out },
          { event: 'message' },
        ),
      );
    }
    return new Response('Accepted', { status: 202 });
  }

  /** Drops every legacy event stream (the server restarted). */
  dropStreams() {
    for (const s of this.streams?.values() || []) s.close();
    this.streams?.clear();
  }
}

/**
 * The platform over a FakeNet: memory storage, a clock the test moves, real
 * randomness and SHA-256 (Web Crypto), a readable log, and a
 * launchWebAuthFlow that stands for the browser window: it fetches the
 * authorization URL and follows redirects until one reaches redirectUri.
 * @param {FakeNet} net
 * @param {object} [overrides]
 */
export function testPlatform(net, overrides = {}) {
  const clock = { t: Date.UTC(2026, 0, 1) };
  const logs = [];
  const launches = [];
  const platform = {
    fetch: net.fetch,
    now: () => clock.t,
    storage: memoryStorage(),
    redirectUri: 'https://extension-id.chromiumapp.org/oauth',
    randomBytes: (n) => crypto.getRandomValues(new Uint8Array(n)),
    sha256: async (b) => new Uint8Array(await crypto.subtle.digest('SHA-256', b)),
    log: (level, msg, fields) => logs.push({ level, msg, fields }),
    developerMode: false,
    sleep: async () => {},
    async launchWebAuthFlow({ url, interactive }) {
      launches.push({ url, interactive });
      let next = url;
      for (let hop = 0; hop < 5; hop++) {
        const res = await net.fetch(next, { redirect: 'manual' });
        const loc = res.headers.get('location');
        if (!loc) throw new Error(`the window showed HTTP ${res.status}`);
        const target = new URL(loc, next).href;
        if (target.startsWith(platform.redirectUri)) return target;
        next = target;
      }
      throw new Error('too many redirects');
    },
    ...overrides,
  };
  return { platform, clock, logs, launches };
}
