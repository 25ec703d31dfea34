// OAuth for remote servers: WWW-Authenticate parsing, RFC 9728 discovery
// and its fallbacks, RFC 8414 / OIDC discovery with the issuer check,
// registration order (pre-registered → CIMD → DCR), PKCE S256 and `resource`,
// state and iss checks, token endpoint client authentication, and refusal of
// authorization endpoints that are not https.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  authServerMetadataUrls,
  bearerChallenge,
  canonicalResource,
  parseChallenges,
  parseRedirect,
  protectedResourceUrls,
  resourceMatches,
  selectScopes,
} from '../remote/oauth.js';
import { RemoteServer } from '../remote/client.js';
import { FakeAuthServer, FakeMcpServer, FakeNet, json, testPlatform } from './remote/testing.js';

test('WWW-Authenticate: challenges and the Bearer parameters', () => {
  const cases = [
    [
      'scope, metadata, error',
      'Bearer error="insufficient_scope", scope="files:read files:write", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"',
      {
        scope: ['files:read', 'files:write'],
        resourceMetadata: 'https://mcp.example.com/.well-known/oauth-protected-resource/mcp',
        error: 'insufficient_scope',
      },
    ],
    ['bare Bearer', 'Bearer', { scope: [] }],
    [
      'token values and case-insensitive scheme',
      'bearer error=invalid_token, scope=read',
      { scope: ['read'], error: 'invalid_token' },
    ],
    ['Bearer after another challenge', 'Basic realm="x", Bearer realm="api", scope="a"', { scope: ['a'] }],
    ['Bearer after a token68 challenge', 'Negotiate abc==, Bearer scope="b"', { scope: ['b'] }],
    [
      'escaped quotes and commas',
      'Bearer error_description="bad \\"token\\", really", error="invalid_token"',
      { scope: [], error: 'invalid_token', errorDescription: 'bad "token", really' },
    ],
    ['no Bearer', 'Basic realm="x"', null],
    ['no header', null, null],
  ];
  for (const [name, header, want] of cases) assert.deepEqual(bearerChallenge(header), want, name);
  assert.deepEqual(
    parseChallenges('Basic abc==, Bearer a=1').map((c) => c.scheme),
    ['Basic', 'Bearer'],
  );
});

test("well-known URLs in the spec's order", () => {
  const prm = [
    [
      'https://mcp.example.com/mcp',
      [
        'https://mcp.example.com/.well-known/oauth-protected-resource/mcp',
        'https://mcp.example.com/.well-known/oauth-protected-resource',
      ],
    ],
    ['https://mcp.example.com/', ['https://mcp.example.com/.well-known/oauth-protected-resource']],
    [
      'https://example.com/a/b/',
      [
        'https://example.com/.well-known/oauth-protected-resource/a/b',
        'https://example.com/.well-known/oauth-protected-resource',
      ],
    ],
  ];
  for (const [url, want] of prm) assert.deepEqual(protectedResourceUrls(url), want, url);
  const as = [
    [
      'https://auth.example.com',
      [
        'https://auth.example.com/.well-known/oauth-authorization-server',
        'https://auth.example.com/.well-known/openid-configuration',
      ],
    ],
    [
      'https://auth.example.com/tenant1',
      [
        'https://auth.example.com/.well-known/oauth-authorization-server/tenant1',
        'https://auth.example.com/.well-known/openid-configuration/tenant1',
        'https://auth.example.com/tenant1/.well-known/openid-configuration',
      ],
    ],
  ];
  for (const [issuer, want] of as) assert.deepEqual(authServerMetadataUrls(issuer), want, issuer);
});

test('resource matching and the canonical resource', () => {
  const cases = [
    ['https://mcp.example.com/mcp', 'https://mcp.example.com/mcp', true],
    ['https://mcp.example.com', 'https://mcp.example.com/mcp', true], // root metadata names the origin
    ['https://mcp.example.com/', 'https://mcp.example.com/mcp', true],
    ['https://mcp.example.com/api', 'https://mcp.example.com/api/mcp', true],
    ['https://mcp.example.com/mc', 'https://mcp.example.com/mcp', false], // not a path segment
    ['https://evil.example.com/mcp', 'https://mcp.example.com/mcp', false],
    ['http://mcp.example.com/mcp', 'https://mcp.example.com/mcp', false],
    ['https://mcp.example.com/other', 'https://mcp.example.com/mcp', false],
    ['not a url', 'https://mcp.example.com/mcp', false],
  ];
  for (const [resource, server, want] of cases) {
    assert.equal(resourceMatches(resource, server), want, `${resource} for ${server}`);
  }
  assert.equal(canonicalResource('https://MCP.Example.com/mcp#frag'), 'https://mcp.example.com/mcp');
  assert.equal(canonicalResource('https://mcp.example.com/'), 'https://mcp.example.com');
});

test('scope selection: challenge, then scopes_supported, else none; unions; offline_access', () => {
  const cases = [
    ['from the challenge', { challenge: { scope: ['a'] }, prm: { scopes_supported: ['a', 'b'] } }, ['a']],
    ['from scopes_supported', { challenge: { scope: [] }, prm: { scopes_supported: ['a', 'b'] } }, ['a', 'b']],
    ['omitted', { challenge: null, prm: {} }, []],
    ['configured scopes are added', { challenge: { scope: ['a'] }, configured: ['c'] }, ['a', 'c']],
    ['step-up asks for the union', { challenge: { scope: ['b', 'w'] }, previous: ['b'] }, ['b', 'w']],
    [
      'offline_access when the AS lists it',
      { prm: { scopes_supported: ['a'] }, asMetadata: { scopes_supported: ['a', 'offline_access'] } },
      ['a', 'offline_access'],
    ],
    [
      'no offline_access when the AS does not',
      { prm: { scopes_supported: ['a', 'offline_access'] }, asMetadata: { scopes_supported: ['a'] } },
      ['a'],
    ],
    ['no offline_access alone', { asMetadata: { scopes_supported: ['offline_access'] } }, []],
  ];
  for (const [name, args, want] of cases) assert.deepEqual(selectScopes(args), want, name);
});

test('parseRedirect checks the address, state, iss and errors', () => {
  const want = { redirectUri: 'https://ext.chromiumapp.org/oauth', state: 's1', issuer: 'https://auth.example.com' };
  const cases = [
    ['good', 'https://ext.chromiumapp.org/oauth?code=c1&state=s1', 'c1'],
    ['good with iss', 'https://ext.chromiumapp.org/oauth?code=c1&state=s1&iss=https%3A%2F%2Fauth.example.com', 'c1'],
    ['state mismatch', 'https://ext.chromiumapp.org/oauth?code=c1&state=other', /state mismatch/],
    ['state missing', 'https://ext.chromiumapp.org/oauth?code=c1', /state mismatch/],
    [
      'iss mismatch',
      'https://ext.chromiumapp.org/oauth?code=c1&state=s1&iss=https%3A%2F%2Fevil.example.com',
      /iss mismatch/,
    ],
    ['declined', 'https://ext.chromiumapp.org/oauth?error=access_denied&state=s1', /declined/],
    [
      'other error',
      'https://ext.chromiumapp.org/oauth?error=server_error&error_description=down&state=s1',
      /refused: down/,
    ],
    ['elsewhere', 'https://evil.example.com/oauth?code=c1&state=s1', /unexpected address/],
    ['no code', 'https://ext.chromiumapp.org/oauth?state=s1', /no authorization code/],
  ];
  for (const [name, url, expect] of cases) {
    if (typeof expect === 'string') assert.equal(parseRedirect(url, want), expect, name);
    else {
      assert.throws(
        () => parseRedirect(url, want),
        (e) => e.category === 'auth' && expect.test(e.message),
        name,
      );
    }
  }
  assert.throws(
    () => parseRedirect('https://ext.chromiumapp.org/oauth?code=c&state=s1', { ...want, issRequired: true }),
    /iss mismatch/,
  );
});

/** A protected MCP server and its authorization server on a fake network. */
function world({ mcp = {}, as = {}, platform = {} } = {}) {
  const net = new FakeNet();
  const a = new FakeAuthServer(net, as);
  const m = new FakeMcpServer(net, { auth: a, ...mcp });
  const t = testPlatform(net, platform);
  const server = new RemoteServer({ id: 'srv', url: m.url.href, ...(mcp.config || {}) }, t.platform);
  return { net, as: a, mcp: m, server, ...t };
}

function wellKnownGets(net) {
  return net.requests
    .filter((r) => r.method === 'GET' && r.url.pathname.includes('.well-known'))
    .map((r) => r.url.href);
}

test('protected-resource discovery: header → path-aware well-known → root well-known → none', async () => {
  const cases = [
    [
      'header names a custom URL',
      (w) => {
        w.mcp.prmUrl = 'https://mcp.example.com/custom/metadata.json';
        w.net.on(w.mcp.prmUrl, () => json(w.mcp.prmDocument()));
      },
      ['https://mcp.example.com/custom/metadata.json'],
    ],
    [
      'path-aware well-known (no header)',
      (w) => {
        w.mcp.opts.prmInHeader = false;
      },
      ['https://mcp.example.com/.well-known/oauth-protected-resource/mcp'],
    ],
    [
      'root well-known after the path-aware one',
      (w) => {
        w.mcp.opts.prmInHeader = false;
        w.mcp.opts.prm = 'root';
        w.net.routes.delete('https://mcp.example.com/.well-known/oauth-protected-resource/mcp');
        w.net.on('https://mcp.example.com/.well-known/oauth-protected-resource', () => json(w.mcp.prmDocument()));
      },
      [
        'https://mcp.example.com/.well-known/oauth-protected-resource/mcp',
        'https://mcp.example.com/.well-known/oauth-protected-resource',
      ],
    ],
  ];
  for (const [name, setup, wantPrm] of cases) {
    const w = world();
    setup(w);
    await w.server.signIn();
    assert.equal(w.server.state, 'connected', `${name}: ${w.server.message}`);
    const gets = w.net.requests
      .filter((r) => r.method === 'GET' && /protected-resource|custom/.test(r.url.pathname))
      .map((r) => r.url.href);
    assert.deepEqual(gets, wantPrm, name);
    assert.equal(w.as.authorizations[0].resource, w.mcp.prmDocument().resource, `${name}: resource from the metadata`);
  }
});

test("a 2025-03-26 server: no protected-resource metadata, the AS is the server's origin", async () => {
  // The authorization server lives on the MCP server's origin.
  const w = world({ mcp: { prm: 'none' }, as: { issuer: 'https://mcp.example.com' } });
  await w.server.signIn();
  assert.equal(w.server.state, 'connected', w.server.message);
  assert.deepEqual(wellKnownGets(w.net), [
    'https://mcp.example.com/.well-known/oauth-protected-resource/mcp',
    'https://mcp.example.com/.well-known/oauth-protected-resource',
    'https://mcp.example.com/.well-known/oauth-authorization-server',
  ]);
  assert.equal(w.as.authorizations[0].resource, 'https://mcp.example.com/mcp');
});

test('a 2025-03-26 server without any metadata: the default endpoints', async () => {
  const w = world({ mcp: { prm: 'none' }, as: { issuer: 'https://mcp.example.com', metadataAt: 'none' } });
  await w.server.signIn();
  assert.equal(w.server.state, 'connected', w.server.message);
  assert.equal(w.net.to('https://mcp.example.com/register', 'POST').length, 1);
  assert.equal(w.launches.length, 1);
  assert.match(w.launches[0].url, /^https:\/\/mcp\.example\.com\/authorize\?/);
  assert.equal(w.net.to('https://mcp.example.com/token', 'POST').length, 1);
});

test('authorization-server discovery: RFC 8414 then OIDC, path-inserted first', async () => {
  const cases = [
    [
      'no path, RFC 8414',
      'https://auth.example.com',
      'oauth',
      ['https://auth.example.com/.well-known/oauth-authorization-server'],
    ],
    [
      'no path, OIDC',
      'https://auth.example.com',
      'oidc',
      [
        'https://auth.example.com/.well-known/oauth-authorization-server',
        'https://auth.example.com/.well-known/openid-configuration',
      ],
    ],
    [
      'path, RFC 8414 path-inserted',
      'https://auth.example.com/tenant1',
      'oauth',
      ['https://auth.example.com/.well-known/oauth-authorization-server/tenant1'],
    ],
    [
      'path, OIDC path-appended',
      'https://auth.example.com/tenant1',
      'oidc',
      [
        'https://auth.example.com/.well-known/oauth-authorization-server/tenant1',
        'https://auth.example.com/.well-known/openid-configuration/tenant1',
        'https://auth.example.com/tenant1/.well-known/openid-configuration',
      ],
    ],
  ];
  for (const [name, issuer, metadataAt, want] of cases) {
    const w = world({ as: { issuer, metadataAt } });
    await w.server.signIn();
    assert.equal(w.server.state, 'connected', `${name}: ${w.server.message}`);
    assert.deepEqual(
      wellKnownGets(w.net).filter((u) => !u.includes('protected-resource')),
      want,
      name,
    );
  }
});

test('metadata that must be refused: issuer mismatch, no PKCE S256, another resource', async () => {
  const cases = [
    [
      'issuer mismatch',
      { as: { metadata: { issuer: 'https://evil.example.com' } } },
      /names the issuer "https:\/\/evil\.example\.com", not https:\/\/auth\.example\.com/,
    ],
    [
      'no code_challenge_methods_supported',
      { as: { metadata: { code_challenge_methods_supported: undefined } } },
      /PKCE with S256/,
    ],
    ['plain PKCE only', { as: { metadata: { code_challenge_methods_supported: ['plain'] } } }, /PKCE with S256/],
    [
      'resource of another server',
      { mcp: { prmResource: 'https://evil.example.com/mcp' } },
      /says it is https:\/\/evil\.example\.com\/mcp/,
    ],
  ];
  for (const [name, opts, want] of cases) {
    const w = world(opts);
    await w.server.signIn();
    assert.equal(w.server.state, 'error', name);
    assert.match(w.server.message, want, name);
    assert.equal(w.launches.length, 0, `${name}: no window opened`);
    assert.equal(w.as.authorizations.length, 0, name);
  }
});

test('an authorization endpoint that is not https is refused and never opened', async () => {
  const cases = [
    [
      'http',
      'http://auth.example.com/authorize',
      /Refused the authorization endpoint http:\/\/auth\.example\.com\/authorize: it is not https/,
    ],
    ['javascript:', 'javascript:alert(document.cookie)', /only https URLs are allowed, not javascript:/],
    ['file:', 'file:///Applications/Calculator.app', /not file:/],
    ['a command', 'open -a Calculator', /it is not a URL/],
    ['a private address', 'https://192.168.0.1/authorize', /192\.168\.0\.0\/16/],
    ['the metadata service', 'https://169.254.169.254/authorize', /169\.254\.169\.254/],
  ];
  for (const [name, endpoint, want] of cases) {
    const w = world({ as: { metadata: { authorization_endpoint: endpoint } } });
    await w.server.signIn();
    assert.equal(w.server.state, 'error', name);
    assert.match(w.server.message, want, name);
    assert.equal(w.launches.length, 0, `${name}: launchWebAuthFlow never called`);
    assert.equal(w.as.registrations.length, 0, `${name}: refused before registering`);
  }
  // Developer mode allows loopback http, not plain http elsewhere.
  const dev = world({
    as: { metadata: { authorization_endpoint: 'http://auth.example.com/authorize' } },
    platform: { developerMode: true },
  });
  await dev.server.signIn();
  assert.equal(dev.launches.length, 0);
  assert.match(dev.server.message, /not https/);
});

test('a token endpoint that is not https is refused before anything is sent', async () => {
  const w = world({ as: { metadata: { token_endpoint: 'http://auth.example.com/token' } } });
  await w.server.signIn();
  assert.equal(w.server.state, 'error');
  assert.match(w.server.message, /Refused the token endpoint/);
  assert.equal(w.launches.length, 0);
});

test('registration order: pre-registered client id, then CIMD, then DCR', async () => {
  const cimdUrl = 'https://browserbridge.example/oauth/client.json';
  const cases = [
    [
      'pre-registered',
      {
        mcp: { config: { clientId: 'pre-1' } },
        as: { preregistered: 'pre-1', cimd: true },
        platform: { clientMetadataUrl: cimdUrl },
      },
      'pre-1',
      0,
    ],
    ['CIMD when the AS supports it', { as: { cimd: true }, platform: { clientMetadataUrl: cimdUrl } }, cimdUrl, 0],
    ['DCR when the AS does not support CIMD', { platform: { clientMetadataUrl: cimdUrl } }, 'client-1', 1],
    ['DCR when there is no metadata document', { as: { cimd: true } }, 'client-1', 1],
  ];
  for (const [name, opts, clientId, registrations] of cases) {
    const w = world(opts);
    await w.server.signIn();
    assert.equal(w.server.state, 'connected', `${name}: ${w.server.message}`);
    assert.equal(w.as.authorizations[0].client_id, clientId, name);
    assert.equal(w.as.registrations.length, registrations, name);
    assert.equal(w.as.tokenRequests[0].params.client_id, clientId, name);
  }
});

test("DCR registers a public client for the extension's redirect URI", async () => {
  const w = world();
  await w.server.signIn();
  assert.deepEqual(w.as.registrations[0], {
    client_name: 'Browser Bridge',
    redirect_uris: ['https://extension-id.chromiumapp.org/oauth'],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
    application_type: 'web',
  });
  // Another instance (the service worker restarted) reuses the stored registration.
  w.as.expireTokens();
  const again = new RemoteServer({ id: 'srv', url: w.mcp.url.href }, w.platform);
  w.as.refreshTokens.clear();
  await again.signIn();
  assert.equal(again.state, 'connected', again.message);
  assert.equal(w.as.registrations.length, 1);
  assert.equal(w.as.authorizations.length, 2);
  // Sign-out forgets it.
  await again.signOut();
  assert.equal(w.platform.storage.map.has('oauth.srv.client'), false);
});

test('no way to get a client id is a config error that says what to do', async () => {
  const w = world({ as: { registration: false } });
  await w.server.signIn();
  assert.equal(w.server.state, 'error');
  assert.match(
    w.server.message,
    /does not let Browser Bridge register itself.*client ID registered for https:\/\/extension-id\.chromiumapp\.org\/oauth/,
  );
});

test('the authorization request: PKCE S256, state, resource, redirect URI; the token request matches', async () => {
  const w = world({ mcp: { scope: 'files:read' } });
  await w.server.signIn();
  assert.equal(w.server.state, 'connected', w.server.message);
  const q = w.as.authorizations[0];
  assert.equal(q.response_type, 'code');
  assert.equal(q.code_challenge_method, 'S256');
  assert.match(q.code_challenge, /^[A-Za-z0-9_-]{43}$/);
  assert.match(q.state, /^[A-Za-z0-9_-]{22}$/);
  assert.equal(q.resource, 'https://mcp.example.com/mcp');
  assert.equal(q.redirect_uri, 'https://extension-id.chromiumapp.org/oauth');
  assert.equal(q.scope, 'files:read');
  const t = w.as.tokenRequests[0].params;
  assert.equal(t.grant_type, 'authorization_code');
  assert.match(t.code_verifier, /^[A-Za-z0-9_-]{43}$/);
  assert.equal(t.resource, q.resource);
  assert.equal(t.redirect_uri, q.redirect_uri);
  assert.equal(w.launches[0].interactive, true);
});

test('a redirect with a foreign state or iss is refused, and no token is asked for', async () => {
  const cases = [
    ['state', (url) => url.replace(/state=[^&]+/, 'state=forged'), /state mismatch/],
    ['iss', (url) => `${url}&iss=${encodeURIComponent('https://evil.example.com')}`, /iss mismatch/],
  ];
  for (const [name, tamper, want] of cases) {
    const w = world();
    const real = w.platform.launchWebAuthFlow;
    w.platform.launchWebAuthFlow = async (args) => tamper(await real(args));
    await w.server.signIn();
    assert.equal(w.server.state, 'error', name);
    assert.match(w.server.message, want, name);
    assert.equal(w.as.tokenRequests.length, 0, name);
  }
});

test('a closed sign-in window leaves the server in needs-auth', async () => {
  const w = world();
  w.platform.launchWebAuthFlow = async () => {
    throw new Error('The user did not approve access.');
  };
  await w.server.signIn();
  assert.equal(w.server.state, 'needs-auth');
  assert.match(w.server.message, /did not finish \(The user did not approve access\.\)/);
});

test('token endpoint client authentication follows the registration', async () => {
  const cases = [
    ['none', undefined, (r) => !r.authorization && r.params.client_id && !r.params.client_secret],
    ['client_secret_basic', 'client_secret_basic', (r) => /^Basic /.test(r.authorization) && !r.params.client_secret],
    [
      'client_secret_post',
      'client_secret_post',
      (r) => !r.authorization && r.params.client_id && r.params.client_secret,
    ],
  ];
  for (const [name, secret, ok] of cases) {
    const w = world({ as: { secret } });
    await w.server.signIn();
    assert.equal(w.server.state, 'connected', `${name}: ${w.server.message}`);
    assert.ok(ok(w.as.tokenRequests[0]), name);
    assert.ok(
      !/^Bearer/i.test(w.as.tokenRequests[0].authorization || ''),
      `${name}: no bearer token at the token endpoint`,
    );
  }
});
