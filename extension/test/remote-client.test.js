// RemoteServer end to end over fake servers: the three transport eras and
// the fallback to legacy SSE, sessions, stream resumption, timeouts and
// cancellation, scope step-up, token refresh, re-registration on
// invalid_client, where tokens go, and isolation between servers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_STEP_UPS, REFRESH_AHEAD_MS, RemoteError, RemoteServer } from '../remote/client.js';
import { StreamableTransport, TIMEOUTS } from '../remote/transport.js';
import { FakeAuthServer, FakeMcpServer, FakeNet, eventStream, json, testPlatform } from './remote/testing.js';

function world({ mcp = {}, as = {}, platform = {}, config = {} } = {}) {
  const net = new FakeNet();
  const a = mcp.auth === null ? null : new FakeAuthServer(net, as);
  const m = new FakeMcpServer(net, { auth: a, ...mcp });
  const t = testPlatform(net, platform);
  const server = new RemoteServer({ id: 'srv', url: m.url.href, ...config }, t.platform);
  return { net, as: a, mcp: m, server, ...t };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

test('every era, with JSON and event-stream answers', async () => {
  for (const era of ['stateless', 'streamable', 'sse']) {
    for (const style of ['json', 'sse']) {
      const name = `${era}/${style}`;
      const w = world({ mcp: { era, style } });
      await w.server.signIn();
      assert.equal(w.server.state, 'connected', `${name}: ${w.server.message}`);
      assert.equal(w.server.transport, era, name);
      const r = await w.server.callTool('echo', { x: 1 });
      assert.deepEqual(r, { content: [{ type: 'text', text: '{"x":1}' }] }, name);
      await w.server.disconnect();
    }
  }
});

test('stateless era: _meta on every request, Mcp-Method and Mcp-Name headers, no initialize or session', async () => {
  const w = world({
    mcp: {
      era: 'stateless',
      auth: null,
      tools: [
        {
          name: 'echo',
          inputSchema: { type: 'object', properties: { region: { type: 'string', 'x-mcp-header': 'Region' } } },
        },
      ],
    },
  });
  await w.server.connect();
  await w.server.callTool('echo', { region: 'eu-west' });
  await w.server.readResource('ui://app/main');
  const methods = w.mcp.calls.map((c) => c.msg.method);
  assert.deepEqual(methods, ['server/discover', 'tools/list', 'tools/call', 'resources/read']);
  for (const { msg, headers } of w.mcp.calls) {
    assert.equal(headers['mcp-protocol-version'], '2026-07-28', msg.method);
    assert.equal(headers['mcp-method'], msg.method);
    assert.equal(headers['mcp-session-id'], undefined);
    assert.equal(msg.params._meta['io.modelcontextprotocol/protocolVersion'], '2026-07-28');
    assert.deepEqual(msg.params._meta['io.modelcontextprotocol/clientInfo'], {
      name: 'Browser Bridge',
      version: '0.1.0',
    });
    assert.deepEqual(msg.params._meta['io.modelcontextprotocol/clientCapabilities'], {});
  }
  assert.equal(w.mcp.calls[2].headers['mcp-name'], 'echo');
  assert.equal(w.mcp.calls[2].headers['mcp-param-region'], 'eu-west');
  assert.equal(w.mcp.calls[3].headers['mcp-name'], 'ui://app/main');
  await w.server.disconnect();
  assert.equal(w.net.requests.filter((r) => r.method === 'DELETE').length, 0, 'no DELETE in the stateless era');
});

test('streamable era: session id and protocol version after initialize, DELETE on disconnect', async () => {
  const w = world({ mcp: { auth: null, version: '2025-06-18' } });
  await w.server.connect();
  await w.server.callTool('echo', {});
  const [discover, init, initialized, list, call] = w.mcp.calls;
  assert.equal(discover.msg.method, 'server/discover', 'the newest era is tried first');
  assert.equal(init.msg.method, 'initialize');
  assert.equal(init.msg.params.protocolVersion, '2025-11-25');
  assert.equal(init.headers['mcp-session-id'], undefined);
  for (const c of [initialized, list, call]) {
    assert.equal(c.headers['mcp-session-id'], 's-1', c.msg.method);
    assert.equal(c.headers['mcp-protocol-version'], '2025-06-18', c.msg.method);
    assert.match(c.headers.accept, /application\/json.*text\/event-stream/);
  }
  assert.equal(w.platform.storage.map.get('mcp.srv.transport'), 'streamable');
  await w.server.disconnect();
  const del = w.net.requests.filter((r) => r.method === 'DELETE');
  assert.equal(del.length, 1);
  assert.equal(del[0].headers['mcp-session-id'], 's-1');
  // The next connection starts with the era that worked.
  w.mcp.calls.length = 0;
  await w.server.connect();
  assert.equal(w.mcp.calls[0].msg.method, 'initialize');
});

test('fallback to legacy HTTP+SSE when POST is answered 400, 404 or 405', async () => {
  for (const status of [400, 404, 405]) {
    const w = world({ mcp: { era: 'sse', auth: null, url: 'https://mcp.example.com/sse' } });
    w.net.on('https://mcp.example.com/sse', (req) =>
      req.method === 'GET' ? w.mcp.openLegacy(req) : new Response('no', { status }),
    );
    await w.server.connect();
    assert.equal(w.server.state, 'connected', `${status}: ${w.server.message}`);
    assert.equal(w.server.transport, 'sse', String(status));
    const r = await w.server.callTool('echo', { n: status });
    assert.equal(r.content[0].text, `{"n":${status}}`);
    const posts = w.net.requests.filter((r2) => r2.method === 'POST').map((r2) => r2.url.pathname);
    assert.deepEqual(posts.slice(0, 2), ['/sse', '/sse'], `${status}: stateless, then streamable`);
    assert.ok(
      posts.slice(2).every((p) => p === '/messages'),
      `${status}: then the endpoint`,
    );
    await w.server.disconnect();
  }
});

test('no fallback on 401, 5xx or network trouble', async () => {
  const cases = [
    ['503', () => new Response('busy', { status: 503 }), 'error', /failed with HTTP 503/],
    ['cloudflare', () => new Response('error code: 1101', { status: 500 }), 'error', /Cloudflare.*error code 1101/],
  ];
  for (const [name, handler, state, want] of cases) {
    const w = world({ mcp: { auth: null } });
    w.net.on(w.mcp.url.href, handler);
    await w.server.connect();
    assert.equal(w.server.state, state, name);
    assert.match(w.server.message, want, name);
    assert.ok(
      w.net.requests.every((r) => r.method === 'POST'),
      `${name}: no GET for legacy SSE`,
    );
    assert.equal(w.net.requests.length, 4, `${name}: 1 try + 3 retries (Standard)`);
  }
});

test('a transient failure is retried and then connects', async () => {
  const w = world({ mcp: { auth: null } });
  let failures = 2;
  const real = w.mcp.handle.bind(w.mcp);
  w.net.on(w.mcp.url.href, (req) => (failures-- > 0 ? new Response('down', { status: 502 }) : real(req)));
  const slept = [];
  w.platform.sleep = async (ms) => slept.push(ms);
  await w.server.connect();
  assert.equal(w.server.state, 'connected', w.server.message);
  assert.deepEqual(slept, [1000, 2000]);
});

test('legacy SSE: an endpoint on another origin is refused', async () => {
  const w = world({ mcp: { era: 'sse', auth: null, url: 'https://mcp.example.com/sse' } });
  w.net.on('https://mcp.example.com/sse', (req) => {
    if (req.method !== 'GET') return new Response('no', { status: 405 });
    const s = eventStream();
    s.send('https://evil.example.com/messages?sessionId=1', { event: 'endpoint' });
    return s.response;
  });
  await w.server.connect();
  assert.equal(w.server.state, 'error');
  assert.match(w.server.message, /not on the server's own origin/);
  assert.equal(w.net.to('https://evil.example.com').length, 0);
});

test('legacy SSE: a dropped event stream reconnects', async () => {
  const w = world({ mcp: { era: 'sse', auth: null, url: 'https://mcp.example.com/sse' } });
  const seen = [];
  const server = new RemoteServer({ id: 'srv', url: 'https://mcp.example.com/sse' }, w.platform, {
    onChange: (s) => seen.push(s.state),
  });
  await server.connect();
  assert.equal(server.state, 'connected');
  w.mcp.dropStreams();
  for (
    let i = 0;
    i < 50 &&
    !(seen.includes('connecting') && server.state === 'connected' && seen.at(-1) === 'connected' && seen.length > 3);
    i++
  ) {
    await tick();
  }
  assert.equal(server.state, 'connected');
  assert.ok(seen.slice(2).includes('connecting'), 'went through connecting');
  assert.equal(w.net.requests.filter((r) => r.method === 'GET').length, 2);
  assert.equal((await server.callTool('echo', { again: true })).content[0].text, '{"again":true}');
  await server.disconnect();
});

test('a session the server ended (404) is initialized again and the call retried', async () => {
  const w = world({ mcp: { auth: null } });
  await w.server.connect();
  w.mcp.sessions.clear();
  const r = await w.server.callTool('echo', { ok: 1 });
  assert.equal(r.content[0].text, '{"ok":1}');
  assert.equal(w.mcp.calls.filter((c) => c.msg.method === 'initialize').length, 2);
  assert.equal(w.server.state, 'connected');
});

test('an answer stream that ends early is resumed with GET and Last-Event-ID after the retry delay', async () => {
  const w = world({ mcp: { auth: null } });
  const real = w.mcp.handle.bind(w.mcp);
  let pending;
  w.net.on(w.mcp.url.href, async (req) => {
    if (req.method === 'GET') {
      assert.equal(req.headers['last-event-id'], 'ev-1');
      assert.equal(req.headers['mcp-session-id'], 's-1');
      const s = eventStream();
      s.send({ jsonrpc: '2.0', id: pending, result: { content: [{ type: 'text', text: 'resumed' }] } }, { id: 'ev-2' });
      s.close();
      return s.response;
    }
    const msg = JSON.parse(req.body);
    if (msg.method !== 'tools/call') return real(req);
    pending = msg.id;
    const s = eventStream();
    s.send('', { id: 'ev-1', retry: 250 }); // priming event, then the server closes
    s.close();
    return s.response;
  });
  const slept = [];
  w.platform.sleep = async (ms) => slept.push(ms);
  await w.server.connect();
  const r = await w.server.callTool('echo', {});
  assert.equal(r.content[0].text, 'resumed');
  assert.deepEqual(slept, [250]);
});

test("per-request timeouts are spec 002's, and a timed-out request is cancelled", async () => {
  assert.deepEqual({ ...TIMEOUTS }, { request: 30_000, notification: 10_000, toolCall: 60_000, endpoint: 30_000 });
  const net = new FakeNet();
  const sent = [];
  net.on('https://slow.example.com/mcp', (req) => {
    const msg = JSON.parse(req.body);
    sent.push(msg);
    if (msg.method === 'notifications/cancelled') return new Response(null, { status: 202 });
    return eventStream().response; // never answers
  });
  const t = new StreamableTransport({
    url: new URL('https://slow.example.com/mcp'),
    era: 'streamable',
    platform: { fetch: net.fetch, now: Date.now },
    bearer: () => undefined,
    clientInfo: { name: 't', version: '1' },
    log: () => {},
  });
  t.sessionId = 's';
  t.protocolVersion = '2025-11-25';
  await assert.rejects(
    t.request('tools/call', { name: 'x' }, { timeoutMs: 30 }),
    (e) => e instanceof RemoteError && e.category === 'timeout' && /did not answer within 0 s/.test(e.message),
  );
  await tick();
  assert.deepEqual(
    sent.map((m) => m.method),
    ['tools/call', 'notifications/cancelled'],
  );
  assert.equal(sent[1].params.requestId, sent[0].id);
});

test('callTool: cancellation, unknown tools, results and resources', async () => {
  const w = world({ mcp: { auth: null } });
  await w.server.connect();
  const ctl = new AbortController();
  ctl.abort();
  await assert.rejects(w.server.callTool('echo', {}, { signal: ctl.signal }), (e) => e.category === 'cancelled');
  await assert.rejects(
    w.server.callTool('nope', {}),
    (e) => e.category === 'protocol' && e.code === -32602 && /unknown tool nope/.test(e.message),
  );
  const r = await w.server.callTool('echo', { a: 1 }, { meta: { progressToken: 'p1' } });
  assert.equal(r.content[0].text, '{"a":1}');
  assert.deepEqual(w.mcp.calls.at(-1).msg.params._meta, { progressToken: 'p1' });
  assert.deepEqual(await w.server.readResource('ui://x'), {
    contents: [{ uri: 'ui://x', mimeType: 'text/html', text: '<p>app</p>' }],
  });
});

test('tools/list is read page by page', async () => {
  const w = world({ mcp: { auth: null } });
  const real = w.mcp.handle.bind(w.mcp);
  w.net.on(w.mcp.url.href, async (req) => {
    const msg = req.method === 'POST' ? JSON.parse(req.body) : {};
    if (msg.method !== 'tools/list') return real(req);
    const page = msg.params?.cursor ? 2 : 1;
    return json({
      jsonrpc: '2.0',
      id: msg.id,
      result: { tools: [{ name: `t${page}` }, { bad: true }], ...(page === 1 ? { nextCursor: 'c2' } : {}) },
    });
  });
  await w.server.connect();
  assert.deepEqual(
    w.server.tools.map((t) => t.name),
    ['t1', 't2'],
  );
});

test('callTool on a server that needs a sign-in throws an auth error with the sentence', async () => {
  const w = world();
  await assert.rejects(
    w.server.callTool('echo', {}),
    (e) =>
      e instanceof RemoteError &&
      e.category === 'auth' &&
      e.needsSignIn &&
      /Sign in to mcp\.example\.com/.test(e.message),
  );
  assert.equal(w.launches.length, 0);
});

test('scope step-up: a 403 insufficient_scope signs in again for the union of scopes', async () => {
  const w = world({ mcp: { scope: 'files:read', needs: { 'tools/call': ['files:read', 'files:write'] } } });
  await w.server.signIn();
  assert.equal(w.server.state, 'connected');
  assert.equal(w.as.authorizations[0].scope, 'files:read');
  const r = await w.server.callTool('echo', { n: 1 }, { interactive: true });
  assert.equal(r.content[0].text, '{"n":1}');
  assert.equal(w.as.authorizations.length, 2);
  assert.deepEqual(w.as.authorizations[1].scope.split(' ').sort(), ['files:read', 'files:write']);
  assert.equal(w.server.state, 'connected');
  assert.equal(w.as.registrations.length, 1, 'the registration is reused');
});

test('scope step-up without interaction: an auth error, and the next sign-in asks for the union', async () => {
  const w = world({ mcp: { scope: 'files:read', needs: { 'tools/call': ['files:read', 'files:write'] } } });
  await w.server.signIn();
  await assert.rejects(
    w.server.callTool('echo', {}),
    (e) => e.category === 'auth' && /needs more permission \(files:read files:write\)/.test(e.message),
  );
  assert.equal(w.launches.length, 1, 'no window from a non-interactive call');
  assert.deepEqual(w.platform.storage.map.get('oauth.srv.challenged_scopes'), ['files:read', 'files:write']);
  await w.server.signIn();
  assert.deepEqual(w.as.authorizations.at(-1).scope.split(' ').sort(), ['files:read', 'files:write']);
  assert.equal((await w.server.callTool('echo', {})).content[0].text, '{}');
  assert.equal(w.platform.storage.map.has('oauth.srv.challenged_scopes'), false);
});

test('scope step-up is limited: at most MAX_STEP_UPS, and none for scopes already granted', async () => {
  // A server that asks for one more scope every time.
  const w = world({ mcp: { scope: 's0' } });
  let n = 0;
  const real = w.mcp.handle.bind(w.mcp);
  w.net.on(w.mcp.url.href, async (req) => {
    const msg = req.method === 'POST' ? JSON.parse(req.body) : {};
    if (msg.method === 'tools/call' && req.headers.authorization) {
      n++;
      return json({ error: 'insufficient_scope' }, 403, {
        'www-authenticate': `Bearer error="insufficient_scope", scope="s${n}"`,
      });
    }
    return real(req);
  });
  await w.server.signIn();
  await assert.rejects(
    w.server.callTool('echo', {}, { interactive: true }),
    (e) => e.category === 'auth' && /kept asking for more permission/.test(e.message),
  );
  assert.equal(MAX_STEP_UPS, 2);
  assert.equal(w.as.authorizations.length, 1 + MAX_STEP_UPS);
  assert.deepEqual(
    w.as.authorizations.map((a) => a.scope),
    ['s0', 's0 s1', 's0 s1 s2'],
  );

  // Asking again for what was granted does not open a window.
  const v = world({ mcp: { scope: 'admin', needs: { 'tools/call': ['admin'] } } });
  await v.server.signIn();
  v.as.tokens.forEach((info) => {
    info.scopes = [];
  }); // the server no longer honours the grant
  await assert.rejects(v.server.callTool('echo', {}, { interactive: true }), (e) =>
    /although the sign-in grants it/.test(e.message),
  );
  assert.equal(v.as.authorizations.length, 1);
});

test('token refresh: ahead of expiry before a request, by refreshToken(), and on a 401', async () => {
  const w = world();
  await w.server.signIn();
  const first = w.server.tokenExpiry();
  assert.equal(first, w.clock.t + 3600_000);
  const grants = () => w.as.tokenRequests.map((r) => r.params.grant_type);

  // 1. within REFRESH_AHEAD_MS of expiry, the next request refreshes first.
  w.clock.t = first - REFRESH_AHEAD_MS + 1000;
  await w.server.callTool('echo', {});
  assert.deepEqual(grants(), ['authorization_code', 'refresh_token']);
  const refresh = w.as.tokenRequests[1].params;
  assert.equal(refresh.resource, 'https://mcp.example.com/mcp');
  assert.equal(refresh.client_id, 'client-1');
  assert.equal(w.server.tokenExpiry(), w.clock.t + 3600_000);
  const last = w.mcp.calls.at(-1).headers.authorization;
  assert.equal(last, `Bearer ${w.platform.storage.map.get('oauth.srv.tokens').access_token}`);

  // 2. the alarm's refreshToken().
  w.clock.t += 10_000;
  assert.equal(await w.server.refreshToken(), true);
  assert.deepEqual(grants(), ['authorization_code', 'refresh_token', 'refresh_token']);
  assert.equal(w.server.tokenExpiry(), w.clock.t + 3600_000);

  // 3. a 401 with a held token: refresh and retry, without a window.
  w.as.expireTokens();
  assert.equal((await w.server.callTool('echo', { after: 401 })).content[0].text, '{"after":401}');
  assert.equal(w.launches.length, 1);
  assert.equal(grants().at(-1), 'refresh_token');
  assert.equal(w.server.state, 'connected');
});

test('a refresh that fails for network reasons keeps the tokens and the state', async () => {
  const w = world();
  await w.server.signIn();
  w.net.on('https://auth.example.com/token', () => new Response('down', { status: 503 }));
  assert.equal(await w.server.refreshToken(), false);
  assert.equal(w.server.state, 'connected');
  assert.match(w.server.message, /Renewing the sign-in failed/);
  assert.ok(w.platform.storage.map.get('oauth.srv.tokens').refresh_token);
  assert.equal(w.as.tokenRequests.length, 1, 'the token endpoint never answered (503 is not recorded)');
});

test('re-register on invalid_client: at the code exchange', async () => {
  const w = world();
  w.as.failNextToken = { status: 401, error: 'invalid_client' };
  await w.server.signIn();
  assert.equal(w.server.state, 'connected', w.server.message);
  assert.equal(w.as.registrations.length, 2);
  assert.equal(w.as.authorizations.length, 2);
  assert.equal(w.as.authorizations[1].client_id, 'client-3');
});

test('re-register on invalid_client: at refresh, then at the next sign-in', async () => {
  const w = world();
  await w.server.signIn();
  w.as.forgetClients();
  assert.equal(await w.server.refreshToken(), false);
  assert.equal(w.server.state, 'invalid-token');
  assert.equal(w.platform.storage.map.has('oauth.srv.client'), false, 'the registration is forgotten');
  assert.equal(w.platform.storage.map.has('oauth.srv.tokens'), false);
  await w.server.signIn();
  assert.equal(w.server.state, 'connected', w.server.message);
  assert.equal(w.as.registrations.length, 2);
});

test("the bearer token goes only to the MCP server's origin, and no secret is ever logged", async () => {
  const w = world({ mcp: { scope: 'a', needs: { 'tools/call': ['a', 'b'] } }, as: { secret: 'client_secret_basic' } });
  await w.server.signIn();
  await w.server.callTool('echo', {}, { interactive: true });
  await w.server.refreshToken();
  await w.server.signOut();
  for (const r of w.net.requests) {
    const bearer = /^Bearer /i.test(r.headers.authorization || '');
    if (r.url.origin !== 'https://mcp.example.com') assert.ok(!bearer, `no bearer to ${r.url.href}`);
  }
  assert.ok(
    w.net.requests.some(
      (r) => r.url.origin === 'https://mcp.example.com' && /^Bearer /.test(r.headers.authorization || ''),
    ),
  );
  const secrets = [
    ...w.as.tokens.keys(),
    ...w.as.refreshTokens.keys(),
    ...w.as.tokenRequests.flatMap((r) => [r.params.code, r.params.code_verifier, r.params.refresh_token]),
    ...[...w.as.clients.values()].map((c) => c.secret),
  ].filter(Boolean);
  assert.ok(secrets.length > 8);
  const logged = JSON.stringify(w.logs);
  for (const s of secrets) assert.ok(!logged.includes(s), 'a secret in the log');
});

test('configured headers are sent; a configured Authorization header is not replaced, and its 401 is an error', async () => {
  const open = world({ mcp: { auth: null }, config: { headers: { 'X-Api-Key': 'k1' } } });
  await open.server.connect();
  assert.ok(open.mcp.calls.every((c) => c.headers['x-api-key'] === 'k1'));

  const w = world({ config: { headers: { Authorization: 'Bearer static' } } });
  await w.server.signIn();
  assert.equal(w.server.state, 'error');
  assert.match(w.server.message, /refused the Authorization header configured for it \(HTTP 401\)/);
  assert.equal(w.launches.length, 0);
  assert.equal(w.mcp.calls[0].headers.authorization, 'Bearer static');
});

test("one server's failure never affects another", async () => {
  const net = new FakeNet();
  const as = new FakeAuthServer(net);
  const good = new FakeMcpServer(net, { auth: as, url: 'https://good.example.com/mcp' });
  const { platform } = testPlatform(net);
  const a = new RemoteServer({ id: 'down', url: 'https://down.example.com/mcp' }, platform);
  const b = new RemoteServer({ id: 'good', url: good.url.href }, platform);
  const c = new RemoteServer({ id: 'bad-url', url: 'http://10.0.0.1/mcp' }, platform);
  await Promise.all([a.connect(), b.signIn(), c.connect()]);
  assert.equal(a.state, 'error');
  assert.equal(b.state, 'connected', b.message);
  assert.equal(c.state, 'error');
  assert.match(c.message, /Refused the MCP server URL/);
  assert.equal(net.to('http://10.0.0.1').length, 0, 'a refused URL is never fetched');
  await a.signOut();
  assert.ok(platform.storage.map.has('oauth.good.tokens'), 'signing out one server leaves the other');
  assert.equal((await b.callTool('echo', { still: 'fine' })).content[0].text, '{"still":"fine"}');
  assert.deepEqual(
    [...platform.storage.map.keys()].filter((k) => k.includes('down')),
    [],
  );
});

test('the platform is checked, and a client secret without a client id is refused', async () => {
  assert.throws(
    () => new RemoteServer({ id: 'x', url: 'https://a.example.com/' }, { fetch }),
    /platform: missing or wrong now/,
  );
  assert.throws(
    () => new RemoteServer({ url: 'https://a.example.com/' }, testPlatform(new FakeNet()).platform),
    /config\.id/,
  );
  const w = world({ config: { clientSecret: 's3cret' } });
  await w.server.signIn();
  assert.equal(w.server.state, 'error');
  assert.match(w.server.message, /Client secrets are not supported/);
});

test('overlapping connects share one handshake; a signIn waiting on a connect still signs in', async () => {
  const open = world({ mcp: { auth: null } });
  await Promise.all([open.server.connect(), open.server.connect(), open.server.connect()]);
  assert.equal(open.mcp.calls.filter((c) => c.msg.method === 'initialize').length, 1);

  const w = world();
  await Promise.all([w.server.connect(), w.server.signIn(), w.server.signIn()]);
  assert.equal(w.server.state, 'connected', w.server.message);
  assert.equal(w.launches.length, 1, 'one sign-in window');
});
