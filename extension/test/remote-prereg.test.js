// Pre-registered confidential clients (config clientId + clientSecret): the
// secret authenticates the client at the token endpoint only, with
// client_secret_basic or client_secret_post as the authorization server's
// metadata says, for the code exchange and for refresh; it never reaches
// another endpoint, the authorization URL, the server's storage keys or a log.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { REFRESH_AHEAD_MS, RemoteServer } from '../remote/client.js';
import { secretAuthMethod, tokenRequest } from '../remote/oauth.js';
import { FakeAuthServer, FakeMcpServer, FakeNet, testPlatform } from './remote/testing.js';

// Characters that form encoding (RFC 6749 §2.3.1) must escape in Basic credentials.
const SECRET = 'S3cr3t: x/+=%&é'.replace('é', 'e');
const CLIENT_ID = 'pre client:1';

/**
 * A server whose authorization server knows CLIENT_ID with SECRET (checked,
 * with the method) and offers no registration.
 */
function world({ methods, method = 'client_secret_basic', config = {}, era = 'streamable' } = {}) {
  const net = new FakeNet();
  const metadata = { token_endpoint_auth_methods_supported: methods };
  const as = new FakeAuthServer(net, { registration: false, metadata });
  as.clients.set(CLIENT_ID, { secret: SECRET, method });
  const mcp = new FakeMcpServer(net, { auth: as, era });
  const t = testPlatform(net);
  const server = new RemoteServer(
    { id: 'srv', url: mcp.url.href, clientId: CLIENT_ID, clientSecret: SECRET, ...config },
    t.platform,
  );
  return { net, as, mcp, server, ...t };
}

function basicOf(id, secret) {
  const enc = (s) => encodeURIComponent(s).replace(/%20/g, '+');
  return `Basic ${btoa(`${enc(id)}:${enc(secret)}`)}`;
}

/** Every place the secret could leak to, other than the token endpoint's client authentication. */
function assertNoLeak(w, secret = SECRET) {
  const forms = [secret, encodeURIComponent(secret), encodeURIComponent(secret).replace(/%20/g, '+'), btoa(secret)];
  const tokenUrl = `${w.as.base}/token`;
  for (const r of w.net.requests) {
    const where = `${r.method} ${r.url.href}`;
    const isToken = r.url.origin + r.url.pathname === tokenUrl;
    const headers = Object.entries(r.headers).filter(([k]) => !(isToken && k === 'authorization'));
    const body = isToken ? r.body.replace(/(^|&)client_secret=[^&]*/, '') : r.body;
    for (const f of forms) {
      assert.ok(!r.url.href.includes(f), `${where}: the secret in the URL`);
      assert.ok(!body.includes(f), `${where}: the secret in the body`);
      assert.ok(!JSON.stringify(headers).includes(f), `${where}: the secret in a header`);
    }
    if (!isToken) {
      assert.ok(!/^Basic /i.test(r.headers.authorization || ''), `${where}: Basic credentials`);
    }
  }
  const basic = basicOf(CLIENT_ID, secret).slice(6);
  const logged = JSON.stringify(w.logs);
  for (const f of [...forms, basic]) assert.ok(!logged.includes(f), 'the secret in a log call');
  for (const [key, value] of w.platform.storage.map) {
    const s = JSON.stringify(value);
    for (const f of [...forms, basic]) assert.ok(!s.includes(f), `the secret in storage key ${key}`);
  }
  for (const l of w.launches) {
    for (const f of forms) assert.ok(!l.url.includes(f), 'the secret in the authorization URL');
  }
  assert.ok(!w.server.message.includes(secret));
}

test('client_secret_basic: the code exchange and a refresh carry Basic credentials, the body no secret', async () => {
  const w = world({ methods: ['client_secret_basic', 'client_secret_post', 'none'] });
  await w.server.signIn();
  assert.equal(w.server.state, 'connected', w.server.message);
  assert.equal(w.as.registrations.length, 0);
  assert.equal(w.as.authorizations[0].client_id, CLIENT_ID);
  const [code] = w.as.tokenRequests;
  assert.equal(code.params.grant_type, 'authorization_code');
  assert.equal(code.authorization, basicOf(CLIENT_ID, SECRET));
  assert.equal(code.params.client_secret, undefined);
  assert.equal(code.params.client_id, undefined, 'client_secret_basic authenticates in the header alone');

  // The token nears its expiry: the refresh authenticates the same way.
  w.clock.t += 3600_000 - REFRESH_AHEAD_MS + 1000;
  assert.equal(await w.server.refreshToken(), true);
  const refresh = w.as.tokenRequests.at(-1);
  assert.equal(refresh.params.grant_type, 'refresh_token');
  assert.equal(refresh.authorization, basicOf(CLIENT_ID, SECRET));
  assert.equal(refresh.params.client_secret, undefined);
  assert.equal((await w.server.callTool('echo', { a: 1 })).content[0].text, '{"a":1}');

  const stored = w.platform.storage.map.get('oauth.srv.client');
  assert.equal(stored.via, 'pre');
  assert.equal(stored.token_endpoint_auth_method, 'client_secret_basic');
  assert.equal(stored.client_secret, undefined, 'the secret stays in the config');
  await w.server.signOut();
  assertNoLeak(w);
});

test('client_secret_post when the server lists only that: id and secret in the body, no Authorization', async () => {
  const w = world({ methods: ['client_secret_post'], method: 'client_secret_post' });
  await w.server.signIn();
  assert.equal(w.server.state, 'connected', w.server.message);
  const [code] = w.as.tokenRequests;
  assert.equal(code.authorization, undefined);
  assert.equal(code.params.client_id, CLIENT_ID);
  assert.equal(code.params.client_secret, SECRET);

  w.clock.t += 3600_000;
  assert.equal(await w.server.refreshToken(), true);
  const refresh = w.as.tokenRequests.at(-1);
  assert.equal(refresh.params.grant_type, 'refresh_token');
  assert.equal(refresh.authorization, undefined);
  assert.equal(refresh.params.client_secret, SECRET);
  await w.server.signOut();
  assertNoLeak(w);
});

test('the secret never goes to the MCP server, metadata, authorization, revocation or the log, in every era', async () => {
  for (const era of ['stateless', 'streamable', 'sse']) {
    const w = world({ methods: ['client_secret_basic'], era });
    await w.server.signIn();
    assert.equal(w.server.state, 'connected', `${era}: ${w.server.message}`);
    await w.server.callTool('echo', {});
    w.as.expireTokens(); // a 401: refresh with the secret, then the call again
    await w.server.callTool('echo', {});
    await w.server.signOut(); // revocation: client_id only
    const revoke = w.net.to(`${w.as.base}/revoke`);
    assert.equal(revoke.length, 1, era);
    assert.equal(new URLSearchParams(revoke[0].body).get('client_id'), CLIENT_ID);
    assert.ok(w.net.to(w.mcp.url.origin).length > 0);
    assert.ok(w.as.tokenRequests.length >= 2, era);
    assertNoLeak(w);
  }
});

test('no secret: a pre-registered public client sends its id and nothing else', async () => {
  const w = world({ methods: ['none', 'client_secret_basic'], method: 'none', config: { clientSecret: undefined } });
  w.as.clients.set(CLIENT_ID, { method: 'none' });
  await w.server.signIn();
  assert.equal(w.server.state, 'connected', w.server.message);
  const [code] = w.as.tokenRequests;
  assert.equal(code.authorization, undefined);
  assert.equal(code.params.client_id, CLIENT_ID);
  assert.equal(code.params.client_secret, undefined);
});

test('the method follows the metadata: basic by default, none when only public clients are taken, refused otherwise', async () => {
  assert.equal(secretAuthMethod({}, true), 'client_secret_basic', 'RFC 8414 default');
  assert.equal(
    secretAuthMethod({ token_endpoint_auth_methods_supported: ['client_secret_post', 'client_secret_basic'] }, true),
    'client_secret_basic',
  );
  assert.equal(
    secretAuthMethod({ token_endpoint_auth_methods_supported: ['none', 'client_secret_post'] }, true),
    'client_secret_post',
  );
  assert.equal(secretAuthMethod({ token_endpoint_auth_methods_supported: ['none'] }, true), 'none');
  assert.equal(secretAuthMethod({ token_endpoint_auth_methods_supported: ['client_secret_basic'] }, false), 'none');
  assert.throws(
    () => secretAuthMethod({ token_endpoint_auth_methods_supported: ['private_key_jwt'] }, true),
    /neither client_secret_basic nor client_secret_post/,
  );

  // Metadata without the list: Basic.
  const d = world({ methods: undefined });
  await d.server.signIn();
  assert.equal(d.server.state, 'connected', d.server.message);
  assert.equal(d.as.tokenRequests[0].authorization, basicOf(CLIENT_ID, SECRET));

  // Only public clients: the secret stays home.
  const n = world({ methods: ['none'], method: 'none' });
  n.as.clients.set(CLIENT_ID, { method: 'none' });
  await n.server.signIn();
  assert.equal(n.server.state, 'connected', n.server.message);
  assert.equal(n.as.tokenRequests[0].authorization, undefined);
  assert.equal(n.as.tokenRequests[0].params.client_secret, undefined);
  assertNoLeak(n);

  // Only private_key_jwt: refused before any window opens.
  const j = world({ methods: ['private_key_jwt'] });
  await j.server.signIn();
  assert.equal(j.server.state, 'error');
  assert.match(j.server.message, /client secret/);
  assert.equal(j.launches.length, 0);
  assert.equal(j.as.tokenRequests.length, 0);
  assertNoLeak(j);
});

test('a wrong secret ends in an error that does not repeat it; a secret without a client id is refused', async () => {
  const w = world({ methods: ['client_secret_basic'], config: { clientSecret: 'wrong secret' } });
  await w.server.signIn();
  assert.notEqual(w.server.state, 'connected');
  assert.equal(w.as.tokenRequests.length, 1, 'no registration retry for a pre-registered client');
  assert.match(w.server.message, /invalid_client/);
  assertNoLeak(w, 'wrong secret');

  const x = world({ config: { clientId: undefined } });
  await x.server.signIn();
  assert.equal(x.server.state, 'error');
  assert.match(x.server.message, /without a client ID/);
  assert.equal(x.launches.length, 0);
  assert.equal(x.net.to(x.as.origin).length, 0, 'refused before discovery');
  assertNoLeak(x);

  assert.throws(
    () => new RemoteServer({ id: 'y', url: 'https://a.example.com/', clientSecret: 42 }, x.platform),
    /clientSecret must be a string/,
  );
});

test('tokenRequest: Basic credentials are form-encoded before base64 (RFC 6749 §2.3.1)', async () => {
  const net = new FakeNet();
  const seen = [];
  net.on('https://as.example.com/token', (req) => {
    seen.push(req);
    return new Response(JSON.stringify({ access_token: 'at', token_type: 'Bearer' }), {
      headers: { 'content-type': 'application/json' },
    });
  });
  const logs = [];
  const ctx = { platform: testPlatform(net).platform, check: async (u) => new URL(u), log: (...a) => logs.push(a) };
  const asMetadata = { token_endpoint: 'https://as.example.com/token' };
  await tokenRequest(ctx, {
    asMetadata,
    client: { client_id: 'a b', client_secret: 'c:d+e', token_endpoint_auth_method: 'client_secret_basic' },
    params: { grant_type: 'refresh_token', refresh_token: 'rt' },
  });
  assert.equal(seen[0].headers.authorization, `Basic ${btoa('a+b:c%3Ad%2Be')}`);
  assert.equal(new URLSearchParams(seen[0].body).get('client_secret'), null);
  await tokenRequest(ctx, {
    asMetadata,
    client: { client_id: 'a b', client_secret: 'c:d+e', token_endpoint_auth_method: 'client_secret_post' },
    params: { grant_type: 'refresh_token', refresh_token: 'rt' },
  });
  assert.equal(seen[1].headers.authorization, undefined);
  assert.equal(new URLSearchParams(seen[1].body).get('client_secret'), 'c:d+e');
  assert.deepEqual(logs, []);
});
