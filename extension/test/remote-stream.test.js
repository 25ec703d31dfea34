// Server → client messages of RemoteServer over fake servers: the standalone
// GET stream of Streamable HTTP (opening, list_changed, resuming with
// Last-Event-ID, `retry`, 405, 401 refresh, closing), list_changed from a
// POST's event stream and from the legacy event stream, the one new
// initialize after a 404 session, and progress and cancellation of tool calls.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LIST_CHANGED_DELAY_MS, RemoteServer } from '../remote/client.js';
import { RETRY_PRESETS } from '../remote/state.js';
import { FakeAuthServer, FakeMcpServer, FakeNet, testPlatform } from './remote/testing.js';

function world({ mcp = {}, as = {}, platform = {} } = {}) {
  const net = new FakeNet();
  const a = mcp.auth === undefined || mcp.auth === null ? null : new FakeAuthServer(net, as);
  const m = new FakeMcpServer(net, { listChanged: true, getStream: true, ...mcp, auth: a });
  const t = testPlatform(net, platform);
  const changes = [];
  const slept = [];
  t.platform.sleep = async (ms) => {
    slept.push(ms);
    await new Promise((r) => setTimeout(r, 1));
  };
  const server = new RemoteServer({ id: 'srv', url: m.url.href }, t.platform, {
    onChange: (s) => changes.push({ state: s.state, tools: s.tools.map((x) => x.name) }),
  });
  return { net, as: a, mcp: m, server, changes, slept, ...t };
}

/** Waits (real time, bounded) until cond() holds. */
async function until(cond, what, ms = 2000) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

const gets = (w) => w.net.requests.filter((r) => r.method === 'GET' && r.url.href === w.mcp.url.href);
const tools = (n, prefix = 't') =>
  Array.from({ length: n }, (_, i) => ({ name: `${prefix}${i}`, inputSchema: { type: 'object' } }));

test('the GET stream opens after initialize and its list_changed refreshes every page of tools, then onChange fires once', async () => {
  const w = world({ mcp: { pageSize: 2, tools: tools(3) } });
  await w.server.connect();
  assert.equal(w.server.state, 'connected', w.server.message);
  await until(() => w.mcp.standalone, 'the GET stream');
  const [g] = w.mcp.gets;
  assert.equal(g.headers.accept, 'text/event-stream');
  assert.equal(g.headers['mcp-session-id'], 's-1');
  assert.equal(g.headers['mcp-protocol-version'], '2025-11-25');
  assert.equal(g.headers['last-event-id'], undefined);
  w.changes.length = 0;
  w.mcp.calls.length = 0;
  // A burst counts once.
  w.mcp.setTools(tools(5, 'n'));
  w.mcp.notify('notifications/tools/list_changed');
  w.mcp.notify('notifications/tools/list_changed');
  await until(() => w.changes.length, 'onChange');
  await new Promise((r) => setTimeout(r, LIST_CHANGED_DELAY_MS * 2));
  assert.deepEqual(w.changes, [{ state: 'connected', tools: ['n0', 'n1', 'n2', 'n3', 'n4'] }]);
  assert.deepEqual(
    w.mcp.calls.map((c) => [c.msg.method, c.msg.params?.cursor]),
    [
      ['tools/list', undefined],
      ['tools/list', '2'],
      ['tools/list', '4'],
    ],
  );
  assert.match(w.server.message, /5 tools/);
  assert.equal(gets(w).length, 1, 'the stream stays open');
  await w.server.disconnect();
});

test('no GET stream when the server does not declare tools.listChanged, nor in the stateless era', async () => {
  for (const mcp of [{ listChanged: false }, { era: 'stateless' }]) {
    const w = world({ mcp });
    await w.server.connect();
    assert.equal(w.server.state, 'connected');
    await new Promise((r) => setTimeout(r, 10));
    assert.equal(gets(w).length, 0, JSON.stringify(mcp));
    await w.server.disconnect();
  }
});

test("a dropped GET stream is reopened with Last-Event-ID after the stream's retry, and missed events are replayed", async () => {
  const w = world({ mcp: { streamRetry: 7 } });
  await w.server.connect();
  await until(() => w.mcp.standalone, 'the GET stream');
  w.mcp.notify('notifications/message', { level: 'info', data: 'hello' }); // id g2 (g1 was the priming event's p1)
  await until(() => w.logs.some((l) => l.msg === 'server log message'), 'the first event');
  w.mcp.dropStandalone();
  w.mcp.opts.tools = tools(2, 'late');
  w.mcp.notify('notifications/tools/list_changed'); // sent while no stream is open
  await until(() => w.changes.some((c) => c.tools.includes('late0')), 'the replayed list_changed');
  const [first, second] = w.mcp.gets;
  assert.equal(first.headers['last-event-id'], undefined);
  assert.equal(second.headers['last-event-id'], 'g2');
  assert.equal(second.headers['mcp-session-id'], 's-1');
  assert.deepEqual(w.slept, [7], 'the retry the stream asked for');
  await w.server.disconnect();
});

test('without a retry field the Standard preset paces the reopening; failures in a row give up after maxRetries', async () => {
  const w = world();
  const real = w.mcp.handle.bind(w.mcp);
  let failGets = 0;
  w.net.on(w.mcp.url.href, (req) =>
    req.method === 'GET' && failGets-- > 0 ? new Response('busy', { status: 503 }) : real(req),
  );
  await w.server.connect();
  await until(() => w.mcp.standalone, 'the GET stream');
  failGets = 100;
  w.mcp.dropStandalone();
  const { maxRetries, initialDelay } = RETRY_PRESETS.Standard;
  await until(() => w.logs.some((l) => /keeps failing/.test(l.msg)), 'giving up');
  assert.equal(gets(w).length, 1 + 1 + maxRetries, 'the first stream, then one try and maxRetries retries');
  assert.deepEqual(w.slept, [initialDelay, initialDelay, initialDelay * 2, initialDelay * 4]);
  // The next request that works starts it again.
  failGets = 0;
  await w.server.callTool('echo', {});
  await until(() => gets(w).length === 2 + maxRetries + 1 && !w.mcp.standalone.stream.closed, 'the stream again');
  await w.server.disconnect();
});

test('405 on the GET means no stream: it is never asked for again', async () => {
  const w = world({ mcp: { getStream: false } });
  await w.server.connect();
  await until(() => w.logs.some((l) => /offers no event stream/.test(l.msg)), 'the 405');
  await w.server.callTool('echo', {});
  w.mcp.notify('notifications/tools/list_changed');
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(gets(w).length, 1);
  assert.deepEqual(w.slept, []);
  await w.server.disconnect();
});

test('disconnect() and signOut() close the GET stream and stop reopening it', async () => {
  const w = world();
  await w.server.connect();
  await until(() => w.mcp.standalone, 'the GET stream');
  const stream = w.mcp.standalone.stream;
  await w.server.disconnect();
  await until(() => stream.closed, 'the stream closed by the client');
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(gets(w).length, 1);
  assert.deepEqual(w.slept, []);
  // list_changed after disconnect does nothing.
  const before = w.changes.length;
  w.mcp.notify('notifications/tools/list_changed');
  await new Promise((r) => setTimeout(r, LIST_CHANGED_DELAY_MS + 20));
  assert.equal(w.changes.length, before);

  const v = world({ mcp: { auth: true } });
  await v.server.signIn();
  await until(() => v.mcp.standalone, 'the GET stream');
  const s2 = v.mcp.standalone.stream;
  await v.server.signOut();
  await until(() => s2.closed, 'the stream closed by sign-out');
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(gets(v).length, 1);
});

test('a 401 on the GET stream refreshes the token like a request does; the token goes to the server only', async () => {
  const w = world({ mcp: { auth: true } });
  await w.server.signIn();
  assert.equal(w.server.state, 'connected', w.server.message);
  await until(() => w.mcp.standalone, 'the GET stream');
  const refreshes = () => w.as.tokenRequests.filter((r) => r.params.grant_type === 'refresh_token').length;
  w.as.expireTokens();
  w.mcp.dropStandalone();
  await until(
    () => gets(w).length === 3 && w.mcp.standalone && !w.mcp.standalone.stream.closed,
    'the stream with a new token',
  );
  assert.equal(refreshes(), 1);
  const [g1, g2, g3] = gets(w);
  assert.equal(g2.headers.authorization, g1.headers.authorization, 'the old token was refused');
  assert.notEqual(g3.headers.authorization, g1.headers.authorization);
  assert.ok(w.as.tokens.has(g3.headers.authorization.slice(7)));
  for (const r of w.net.requests) {
    if (/^Bearer /.test(r.headers.authorization || '')) {
      assert.equal(r.url.origin, 'https://mcp.example.com', r.url.href);
    }
  }
  assert.equal(w.server.state, 'connected');
  await w.server.disconnect();
});

test('a session the server ended: concurrent requests share one new initialize, and the GET stream follows the new session', async () => {
  const w = world();
  await w.server.connect();
  await until(() => w.mcp.standalone, 'the GET stream');
  w.mcp.sessions.clear();
  const results = await Promise.all([1, 2, 3].map((n) => w.server.callTool('echo', { n })));
  assert.deepEqual(
    results.map((r) => r.content[0].text),
    ['{"n":1}', '{"n":2}', '{"n":3}'],
  );
  assert.equal(w.mcp.calls.filter((c) => c.msg.method === 'initialize').length, 2, 'one new initialize');
  await until(
    () => w.mcp.standalone?.sid === 's-2' && !w.mcp.standalone.stream.closed,
    'the stream of the new session',
  );
  assert.equal(w.server.state, 'connected');
  await w.server.disconnect();
});

test('a session ended again right after the new initialize is an error, not a loop', async () => {
  const w = world({ mcp: { getStream: false } });
  await w.server.connect();
  const real = w.mcp.handle.bind(w.mcp);
  w.net.on(w.mcp.url.href, async (req) => {
    const res = await real(req);
    if (req.method === 'POST' && JSON.parse(req.body).method === 'tools/call') w.mcp.sessions.clear();
    return req.method === 'POST' && JSON.parse(req.body).method === 'tools/call'
      ? new Response('gone', { status: 404 })
      : res;
  });
  await assert.rejects(w.server.callTool('echo', {}), (e) => e.data?.sessionExpired === true);
  assert.equal(w.mcp.calls.filter((c) => c.msg.method === 'initialize').length, 2);
  await w.server.disconnect();
});

test("list_changed on a POST's event stream and on the legacy event stream refreshes the tools", async () => {
  const w = world({ mcp: { getStream: false } });
  await w.server.connect();
  w.mcp.opts.tools = [...w.mcp.opts.tools, ...tools(1, 'fresh')];
  w.mcp.piggyback.push({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
  const r = await w.server.callTool('echo', { a: 1 });
  assert.equal(r.content[0].text, '{"a":1}');
  await until(() => w.server.tools.some((t) => t.name === 'fresh0'), 'the new tools');
  assert.deepEqual(w.changes.at(-1), { state: 'connected', tools: ['echo', 'fresh0'] });
  await w.server.disconnect();

  const v = world({ mcp: { era: 'sse', url: 'https://mcp.example.com/sse', getStream: false } });
  await v.server.connect();
  assert.equal(v.server.transport, 'sse');
  v.changes.length = 0;
  v.mcp.setTools(tools(2, 'legacy'));
  await until(() => v.changes.length, 'onChange');
  assert.deepEqual(v.changes, [{ state: 'connected', tools: ['legacy0', 'legacy1'] }]);
  await v.server.disconnect();
});

test('progress: a token in _meta, and notifications/progress reach their own caller only, in increasing order', async () => {
  for (const era of ['streamable', 'stateless', 'sse']) {
    const w = world({
      mcp: { era, progress: 3, getStream: false, ...(era === 'sse' ? { url: 'https://mcp.example.com/sse' } : {}) },
    });
    await w.server.connect();
    const a = [];
    const b = [];
    const [ra, rb] = await Promise.all([
      w.server.callTool('echo', { who: 'a' }, { onProgress: (p) => a.push(p) }),
      w.server.callTool(
        'echo',
        { who: 'b' },
        { onProgress: (p) => b.push(p), meta: { progressToken: 42, other: 'kept' } },
      ),
    ]);
    assert.equal(ra.content[0].text, '{"who":"a"}', era);
    assert.equal(rb.content[0].text, '{"who":"b"}', era);
    const calls = w.mcp.calls.filter((c) => c.msg.method === 'tools/call');
    const ta = calls.find((c) => c.msg.params.arguments.who === 'a').msg.params._meta.progressToken;
    assert.equal(typeof ta, 'string', era);
    assert.equal(calls.find((c) => c.msg.params.arguments.who === 'b').msg.params._meta.other, 'kept', era);
    if (era !== 'sse') {
      // Legacy SSE answers on the shared stream, not per POST: the fake sends no progress there.
      assert.deepEqual(
        a.map((p) => [p.progressToken, p.progress, p.total]),
        [
          [ta, 1, 3],
          [ta, 2, 3],
          [ta, 3, 3],
        ],
        era,
      );
      assert.deepEqual(
        b.map((p) => p.progress),
        [1, 2, 3],
        era,
      );
      assert.ok(
        b.every((p) => p.progressToken === 42),
        era,
      );
    }
    await w.server.disconnect();
  }
  // Progress that does not go up, and progress for no one, are dropped.
  const w = world({ mcp: { getStream: false, hang: 'slow', tools: [{ name: 'slow' }] } });
  await w.server.connect();
  const seen = [];
  const ctl = new AbortController();
  const call = w.server.callTool('slow', {}, { onProgress: (p) => seen.push(p.progress), signal: ctl.signal });
  await until(() => w.mcp.hanging.length && seen.length, 'the first progress');
  const { msg, stream } = w.mcp.hanging[0];
  const token = msg.params._meta.progressToken;
  for (const [t, progress] of [
    [token, 1],
    [token, 0.5],
    ['someone-else', 5],
    [token, 2],
  ]) {
    stream.send({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: t, progress } });
  }
  stream.send({ jsonrpc: '2.0', id: msg.id, result: { content: [] } });
  assert.deepEqual(await call, { content: [] });
  assert.deepEqual(seen, [1, 2]);
  await w.server.disconnect();
});

test('an aborted call rejects at once and sends notifications/cancelled with its request id', async () => {
  for (const era of ['streamable', 'sse']) {
    const w = world({
      mcp: {
        era,
        getStream: false,
        hang: 'slow',
        tools: [{ name: 'slow' }],
        ...(era === 'sse' ? { url: 'https://mcp.example.com/sse' } : {}),
      },
    });
    if (era === 'sse') {
      // The legacy fake answers on its stream; make 'slow' never answer there.
      const post = w.mcp.legacyPost.bind(w.mcp);
      w.net.on('https://mcp.example.com/messages', (req) => {
        const m = JSON.parse(req.body);
        if (m.method === 'tools/call') {
          w.mcp.calls.push({ msg: m, headers: req.headers });
          w.mcp.hanging.push({ msg: m });
          return new Response('Accepted', { status: 202 });
        }
        return post(req);
      });
    }
    await w.server.connect();
    const ctl = new AbortController();
    const call = w.server.callTool('slow', {}, { signal: ctl.signal, onProgress: () => {} });
    await until(() => w.mcp.hanging.length, `${era}: the call`);
    ctl.abort();
    await assert.rejects(call, (e) => e.category === 'cancelled', era);
    await until(() => w.mcp.calls.some((c) => c.msg.method === 'notifications/cancelled'), `${era}: the cancellation`);
    const cancelled = w.mcp.calls.find((c) => c.msg.method === 'notifications/cancelled');
    assert.equal(cancelled.msg.params.requestId, w.mcp.hanging[0].msg.id, era);
    if (era === 'streamable') await until(() => w.mcp.hanging[0].stream.closed, 'the answer stream closed');
    assert.equal(w.server.state, 'connected', era);
    await w.server.disconnect();
  }
  // Aborted before it was sent: nothing to cancel.
  const w = world({ mcp: { getStream: false } });
  await w.server.connect();
  const ctl = new AbortController();
  ctl.abort();
  await assert.rejects(w.server.callTool('echo', {}, { signal: ctl.signal }), (e) => e.category === 'cancelled');
  assert.ok(!w.mcp.calls.some((c) => ['tools/call', 'notifications/cancelled'].includes(c.msg.method)));
});
