// The remote-server state machine (spec 000): the states, the transitions a
// RemoteServer makes on each path, and the retry presets.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { STATES, TRANSITIONS, RETRY_PRESETS, canTransition, retryDelay, withRetry } from '../remote/state.js';
import { RemoteError, isTransient } from '../remote/errors.js';
import { RemoteServer } from '../remote/client.js';
import { FakeAuthServer, FakeMcpServer, FakeNet, testPlatform } from './remote/testing.js';

test('the states are the ten of the API, and every transition names known states', () => {
  assert.deepEqual(STATES, [
    'disconnected',
    'needs-auth',
    'registering',
    'authorizing',
    'authenticated',
    'connecting',
    'connected',
    'error',
    'token-refresh',
    'invalid-token',
  ]);
  for (const [from, tos] of Object.entries(TRANSITIONS)) {
    assert.ok(STATES.includes(from), from);
    for (const to of tos) assert.ok(STATES.includes(to), `${from} → ${to}`);
  }
  assert.deepEqual(Object.keys(TRANSITIONS).sort(), [...STATES].sort());
});

test('canTransition follows the diagram', () => {
  const cases = [
    ['disconnected', 'connecting', true],
    ['disconnected', 'connected', false],
    ['connecting', 'connected', true],
    ['connecting', 'needs-auth', true],
    ['needs-auth', 'registering', true],
    ['registering', 'authorizing', true],
    ['authorizing', 'authenticated', true],
    ['authenticated', 'connecting', true],
    ['connected', 'token-refresh', true],
    ['token-refresh', 'connected', true],
    ['token-refresh', 'invalid-token', true],
    ['connected', 'error', true],
    ['invalid-token', 'registering', true],
    ['needs-auth', 'connected', false],
    ['authorizing', 'connected', false],
    ['error', 'connected', false],
    ['connected', 'disconnected', true], // always allowed
    ['error', 'error', true], // staying, to change the message
    ['connected', 'cloudflare-error', false], // not a state here: error with category 'cloudflare'
  ];
  for (const [from, to, want] of cases) assert.equal(canTransition(from, to), want, `${from} → ${to}`);
});

test("retry presets are spec 000's, and delays grow exponentially up to the cap", () => {
  assert.deepEqual(
    { ...RETRY_PRESETS.Quick },
    { maxRetries: 2, initialDelay: 500, maxDelay: 2000, backoffMultiplier: 2 },
  );
  assert.deepEqual(
    { ...RETRY_PRESETS.Standard },
    { maxRetries: 3, initialDelay: 1000, maxDelay: 10000, backoffMultiplier: 2 },
  );
  assert.deepEqual(
    [0, 1, 2, 3, 4].map((n) => retryDelay(RETRY_PRESETS.Quick, n)),
    [500, 1000, 2000, 2000, 2000],
  );
  assert.deepEqual(
    [0, 1, 2, 3, 4].map((n) => retryDelay(RETRY_PRESETS.Standard, n)),
    [1000, 2000, 4000, 8000, 10000],
  );
});

test('withRetry retries transient errors only, at most maxRetries times, sleeping the preset delays', async () => {
  const cases = [
    ['transient until the last try', ['network', 'server', 'timeout'], 'ok', [1000, 2000, 4000]],
    ['always transient', ['network', 'network', 'network', 'network'], 'network', [1000, 2000, 4000]],
    ['auth is not retried', ['auth'], 'auth', []],
    ['ssrf is not retried', ['ssrf'], 'ssrf', []],
  ];
  for (const [name, failures, want, wantSleeps] of cases) {
    const sleeps = [];
    let calls = 0;
    let got;
    try {
      got = await withRetry(
        async () => {
          const c = failures[calls++];
          if (c) throw new RemoteError(c, c);
          return 'ok';
        },
        RETRY_PRESETS.Standard,
        { shouldRetry: isTransient, sleep: async (ms) => sleeps.push(ms) },
      );
    } catch (err) {
      got = err.category;
    }
    assert.equal(got, want, name);
    assert.deepEqual(sleeps, wantSleeps, name);
  }
});

test('withRetry honours a longer Retry-After, capped by the preset', async () => {
  const sleeps = [];
  let n = 0;
  await withRetry(
    async () => {
      if (n++ === 0) throw new RemoteError('server', 'busy', { status: 429, retryAfter: 60_000 });
      return 1;
    },
    RETRY_PRESETS.Quick,
    { shouldRetry: isTransient, sleep: async (ms) => sleeps.push(ms) },
  );
  assert.deepEqual(sleeps, [2000]);
});

/** A server's states, deduplicated in a row, as onChange saw them. */
function recorder() {
  const seen = [];
  return {
    seen,
    onChange: (s) => {
      if (seen.at(-1) !== s.state) seen.push(s.state);
    },
  };
}

function world(mcpOpts = {}, asOpts = {}) {
  const net = new FakeNet();
  const as = mcpOpts.auth === null ? null : new FakeAuthServer(net, asOpts);
  const mcp = new FakeMcpServer(net, { auth: as, ...mcpOpts });
  const t = testPlatform(net);
  return { net, as, mcp, ...t };
}

function noUnexpectedTransitions(logs) {
  const bad = logs.filter((l) => l.msg === 'unexpected state transition');
  assert.deepEqual(bad, [], 'every transition is in TRANSITIONS');
}

test('state paths: open server, sign-in needed, interactive sign-in', async () => {
  const cases = [
    ['open server', { auth: null }, false, ['connecting', 'connected']],
    ['protected, not interactive', {}, false, ['connecting', 'needs-auth']],
    [
      'protected, interactive',
      {},
      true,
      ['connecting', 'registering', 'authorizing', 'authenticated', 'connecting', 'connected'],
    ],
  ];
  for (const [name, opts, interactive, want] of cases) {
    const w = world(opts);
    const r = recorder();
    const s = new RemoteServer({ id: 'a', url: w.mcp.url.href }, w.platform, { onChange: r.onChange });
    assert.equal(s.state, 'disconnected', name);
    assert.deepEqual(s.tools, [], name);
    await s.connect({ interactive });
    assert.deepEqual(r.seen, want, name);
    noUnexpectedTransitions(w.logs);
  }
});

test('needs-auth says what to do, and signIn from there connects', async () => {
  const w = world();
  const r = recorder();
  const s = new RemoteServer({ id: 'a', url: w.mcp.url.href }, w.platform, { onChange: r.onChange });
  await s.connect();
  assert.equal(s.state, 'needs-auth');
  assert.match(s.message, /^Sign in to mcp\.example\.com to use its tools\.$/);
  assert.equal(w.launches.length, 0, 'no window without interactive');
  await s.signIn();
  assert.equal(s.state, 'connected');
  assert.match(s.message, /Connected to mcp\.example\.com: 1 tool\./);
  assert.deepEqual(
    s.tools.map((t) => t.name),
    ['echo'],
  );
  assert.deepEqual(r.seen, [
    'connecting',
    'needs-auth',
    'connecting',
    'registering',
    'authorizing',
    'authenticated',
    'connecting',
    'connected',
  ]);
  noUnexpectedTransitions(w.logs);
});

test('connected → token-refresh → connected, and a refused refresh → invalid-token', async () => {
  const w = world();
  const s = new RemoteServer({ id: 'a', url: w.mcp.url.href }, w.platform);
  await s.signIn();
  const r = recorder();
  const s2 = new RemoteServer({ id: 'a', url: w.mcp.url.href }, w.platform, { onChange: r.onChange });
  await s2.connect();
  assert.equal(s2.state, 'connected', 'tokens from storage are used by a new instance');
  assert.equal(await s2.refreshToken(), true);
  assert.deepEqual(r.seen, ['connecting', 'connected', 'token-refresh', 'connected']);

  w.as.refreshTokens.clear(); // the server forgot the refresh token
  assert.equal(await s2.refreshToken(), false);
  assert.equal(s2.state, 'invalid-token');
  assert.match(s2.message, /expired; sign in again/);
  noUnexpectedTransitions(w.logs);
});

test('a rejected token with no refresh token ends in invalid-token, not needs-auth', async () => {
  const w = world({}, { refresh: false });
  const s = new RemoteServer({ id: 'a', url: w.mcp.url.href }, w.platform);
  await s.signIn();
  assert.equal(s.state, 'connected');
  w.as.expireTokens();
  await s.connect();
  assert.equal(s.state, 'invalid-token');
  assert.match(s.message, /no longer valid; sign in again/);
});

test('errors: an unreachable server ends in error after the Standard retries', async () => {
  const w = world({ auth: null });
  const slept = [];
  w.platform.sleep = async (ms) => slept.push(ms);
  const r = recorder();
  const s = new RemoteServer({ id: 'a', url: 'https://down.example.net/mcp' }, w.platform, { onChange: r.onChange });
  await s.connect();
  assert.equal(s.state, 'error');
  assert.match(s.message, /Could not reach the MCP server at down\.example\.net/);
  assert.deepEqual(slept, [1000, 2000, 4000]);
  assert.deepEqual(r.seen, ['connecting', 'error']);
});

test('disconnect and signOut go to disconnected; signOut forgets tokens and registration', async () => {
  const w = world();
  const s = new RemoteServer({ id: 'a', url: w.mcp.url.href }, w.platform);
  await s.signIn();
  await s.disconnect();
  assert.equal(s.state, 'disconnected');
  assert.deepEqual(s.tools, []);
  assert.ok(w.platform.storage.map.has('oauth.a.tokens'));
  await s.signOut();
  assert.equal(s.state, 'disconnected');
  assert.match(s.message, /Signed out of mcp\.example\.com/);
  for (const k of ['oauth.a.tokens', 'oauth.a.client', 'mcp.a.oauth.endpoints']) {
    assert.ok(!w.platform.storage.map.has(k), k);
  }
  assert.equal(s.tokenExpiry(), 0);
  assert.equal(w.net.to('https://auth.example.com/revoke').length, 1, 'the refresh token is revoked');
});

test('a disconnect during connect wins', async () => {
  const w = world({ auth: null });
  const s = new RemoteServer({ id: 'a', url: w.mcp.url.href }, w.platform);
  const p = s.connect();
  await s.disconnect();
  await p;
  assert.equal(s.state, 'disconnected');
});
