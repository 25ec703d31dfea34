// OAuth for remote MCP servers, as the MCP authorization spec (2025-11-25,
// plus the 2025-03-26 fallbacks) asks of a client, in small functions that
// client.js strings together. Nothing here keeps state between calls.
//
// Flow: a 401 from the MCP server → protected-resource metadata (RFC 9728):
// the WWW-Authenticate resource_metadata URL, then
// /.well-known/oauth-protected-resource/<path>, then the root one; its
// `resource` must name this server → authorization-server metadata (RFC 8414
// then OpenID Connect, path-inserted forms first; `issuer` must equal the
// URL it was found from) → a client id: pre-registered, a Client ID Metadata
// Document URL when the AS supports them, else RFC 7591 registration →
// authorization code with PKCE S256, `state` and the RFC 8707 `resource` →
// token request → refresh before expiry. Without protected-resource metadata
// (2025-03-26 servers) the authorization server is the server's origin, and
// without its metadata the endpoints are /authorize, /token and /register.
//
// Every URL taken from metadata is checked by ssrf.js before it is fetched or
// opened (ctx.check). Tokens go only to the token endpoint (codes, refresh
// tokens) and are never logged. A client secret (one the server issued at
// registration, or a pre-registered one from the server's config) goes only
// to the token endpoint too, as client_secret_basic or client_secret_post
// (tokenRequest), and is never logged.

import { RemoteError } from './errors.js';
import { fetchJson } from './http.js';

/** Time limit of one metadata, registration or token request. */
export const OAUTH_TIMEOUT_MS = 15_000;

/** The name Browser Bridge registers under. */
export const CLIENT_NAME = 'Browser Bridge';

/**
 * @typedef {object} OAuthContext
 * @property {object} platform see platform.js
 * @property {(url: string|URL, purpose: string) => Promise<URL>} check ssrf checks
 * @property {(level: string, msg: string, fields?: object) => void} log
 */

// ---------------------------------------------------------------------------
// WWW-Authenticate

/**
 * Parses a WWW-Authenticate header into its challenges (RFC 9110 §11.6.1):
 * auth-params with tokens or quoted strings (backslash escapes), several
 * challenges separated by commas, a token68 where one stands alone.
 * @param {string|null} header
 * @returns {{scheme: string, params: Record<string, string>, token68?: string}[]}
 */
export function parseChallenges(header) {
  const out = [];
  if (!header) return out;
  const s = header;
  let i = 0;
  const ws = () => {
    while (i < s.length && (s[i] === ' ' || s[i] === '\t')) i++;
  };
  const token = () => {
    const m = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+/.exec(s.slice(i));
    if (!m) return '';
    i += m[0].length;
    return m[0];
  };
  const quoted = () => {
    let v = '';
    i++; // opening quote
    while (i < s.length && s[i] !== '"') {
      if (s[i] === '\\' && i + 1 < s.length) i++;
      v += s[i++];
    }
    i++; // closing quote
    return v;
  };
  let cur = null;
  while (i < s.length) {
    ws();
    if (s[i] === ',') {
      i++;
      continue;
    }
    const start = i;
    const name = token();
    if (!name) {
      i++; // skip a stray character
      continue;
    }
    ws();
    if (s[i] === '=' && cur && !/^=+\s*(,|$)/.test(s.slice(i))) {
      // auth-param of the current challenge
      i++;
      ws();
      const value = s[i] === '"' ? quoted() : token();
      cur.params[name.toLowerCase()] = value;
      continue;
    }
    // A new challenge: scheme [token68 | auth-params]
    i = start + name.length;
    cur = { scheme: name, params: {} };
    out.push(cur);
    ws();
    const m = /^[A-Za-z0-9\-._~+/]+=*/.exec(s.slice(i));
    if (m && !/^\s*=/.test(s.slice(i + m[0].length)) && /^\s*(,|$)/.test(s.slice(i + m[0].length))) {
      cur.token68 = m[0];
      i += m[0].length;
    }
  }
  return out;
}

/**
 * The Bearer challenge of a WWW-Authenticate header, if any.
 * @param {string|null} header
 * @returns {{scope: string[], resourceMetadata?: string, error?: string, errorDescription?: string}|null}
 */
export function bearerChallenge(header) {
  const c = parseChallenges(header).find((x) => x.scheme.toLowerCase() === 'bearer');
  if (!c) return null;
  const p = c.params;
  const out = { scope: p.scope ? p.scope.split(/\s+/).filter(Boolean) : [] };
  if (p.resource_metadata) out.resourceMetadata = p.resource_metadata;
  if (p.error) out.error = p.error;
  if (p.error_description) out.errorDescription = p.error_description;
  return out;
}

// ---------------------------------------------------------------------------
// Protected-resource metadata (RFC 9728)

/**
 * The canonical resource identifier of an MCP server URL (RFC 8707): no
 * fragment, scheme and host in lower case, no trailing slash on a bare origin.
 * @param {string|URL} serverUrl
 */
export function canonicalResource(serverUrl) {
  const u = new URL(String(serverUrl));
  u.hash = '';
  const s = u.href;
  return u.pathname === '/' && !u.search ? s.replace(/\/$/, '') : s;
}

/**
 * The well-known protected-resource metadata URLs of a server, in the order
 * the spec tries them: path-inserted (when the URL has a path), then root.
 * @param {string|URL} serverUrl
 * @returns {string[]}
 */
export function protectedResourceUrls(serverUrl) {
  const u = new URL(String(serverUrl));
  const root = `${u.origin}/.well-known/oauth-protected-resource`;
  const path = u.pathname.replace(/\/$/, '');
  return path ? [`${root}${path}`, root] : [root];
}

/**
 * Whether protected-resource metadata's `resource` may stand for the server
 * at serverUrl: same origin, and its path is the server's path or a parent
 * of it (the root metadata names the origin).
 * @param {string} resource
 * @param {string|URL} serverUrl
 */
export function resourceMatches(resource, serverUrl) {
  let r;
  try {
    r = new URL(resource);
  } catch {
    return false;
  }
  const s = new URL(String(serverUrl));
  if (r.origin !== s.origin || r.hash) return false;
  const rp = r.pathname.replace(/\/$/, '');
  const sp = s.pathname.replace(/\/$/, '');
  return sp === rp || sp.startsWith(`${rp}/`);
}

/**
 * Finds the server's protected-resource metadata: the URL from the
 * challenge, then the well-known URLs. Returns null when there is none (a
 * 2025-03-26 server). Throws when the metadata names another resource.
 * @param {OAuthContext} ctx
 * @param {{serverUrl: URL, challenge?: {resourceMetadata?: string}|null}} args
 * @returns {Promise<{url: string, metadata: object}|null>}
 */
export async function discoverProtectedResource(ctx, { serverUrl, challenge }) {
  const candidates = [];
  if (challenge?.resourceMetadata) candidates.push(challenge.resourceMetadata);
  for (const u of protectedResourceUrls(serverUrl)) if (!candidates.includes(u)) candidates.push(u);
  for (const url of candidates) {
    let checked;
    try {
      checked = await ctx.check(url, 'metadata');
    } catch (err) {
      ctx.log('warn', 'protected-resource metadata URL refused', {
        url: String(url).slice(0, 200),
        reason: err.message,
      });
      continue;
    }
    let got;
    try {
      got = await fetchJson(
        ctx.platform,
        checked,
        { headers: { Accept: 'application/json' } },
        { timeoutMs: OAUTH_TIMEOUT_MS, what: `the metadata at ${checked.host}` },
      );
    } catch (err) {
      if (err.category === 'timeout' || err.category === 'network') {
        ctx.log('info', 'protected-resource metadata not reachable', { url: checked.href, reason: err.message });
        continue;
      }
      throw err;
    }
    const m = got.json;
    if (
      !got.ok ||
      !m ||
      typeof m !== 'object' ||
      !Array.isArray(m.authorization_servers) ||
      !m.authorization_servers.length ||
      typeof m.resource !== 'string'
    ) {
      ctx.log('debug', 'no protected-resource metadata here', { url: checked.href, status: got.status });
      continue;
    }
    if (!resourceMatches(m.resource, serverUrl)) {
      throw new RemoteError(
        'auth',
        `The server's metadata says it is ${m.resource}, which is not ${canonicalResource(serverUrl)}; refusing to sign in, since the token could be meant for another service.`,
      );
    }
    return { url: checked.href, metadata: m };
  }
  return null;
}

// ---------------------------------------------------------------------------
// Authorization-server metadata (RFC 8414, OpenID Connect Discovery)

/**
 * The metadata URLs of an authorization server, in the order the MCP spec
 * tries them. With a path: RFC 8414 path-inserted, OIDC path-inserted, OIDC
 * path-appended; without: RFC 8414, then OIDC.
 * @param {string} issuer
 * @returns {string[]}
 */
export function authServerMetadataUrls(issuer) {
  const u = new URL(issuer);
  const path = u.pathname.replace(/\/$/, '');
  if (!path) {
    return [`${u.origin}/.well-known/oauth-authorization-server`, `${u.origin}/.well-known/openid-configuration`];
  }
  return [
    `${u.origin}/.well-known/oauth-authorization-server${path}`,
    `${u.origin}/.well-known/openid-configuration${path}`,
    `${u.origin}${path}/.well-known/openid-configuration`,
  ];
}

/** Two issuer identifiers are the same, a trailing slash aside. */
export function sameIssuer(a, b) {
  return typeof a === 'string' && typeof b === 'string' && a.replace(/\/$/, '') === b.replace(/\/$/, '');
}

/**
 * Fetches an authorization server's metadata, checking its issuer (exactly,
 * or — for a 2025-03-26 server whose AS is its own origin — the same origin)
 * and that it offers the authorization code flow with PKCE S256.
 * @param {OAuthContext} ctx
 * @param {{issuer: string, legacy?: boolean}} args
 * @returns {Promise<object|null>} null when no metadata URL answered
 */
export async function discoverAuthServer(ctx, { issuer, legacy = false }) {
  for (const url of authServerMetadataUrls(issuer)) {
    const checked = await ctx.check(url, 'metadata');
    let got;
    try {
      got = await fetchJson(
        ctx.platform,
        checked,
        { headers: { Accept: 'application/json' } },
        { timeoutMs: OAUTH_TIMEOUT_MS, what: `the sign-in server ${checked.host}` },
      );
    } catch (err) {
      if (err.category === 'timeout' || err.category === 'network') {
        ctx.log('info', 'authorization-server metadata not reachable', { url: checked.href, reason: err.message });
        continue;
      }
      throw err;
    }
    const m = got.json;
    if (!got.ok || !m || typeof m !== 'object') continue;
    const issuerOk = legacy
      ? typeof m.issuer === 'string' && safeOrigin(m.issuer) === new URL(issuer).origin
      : sameIssuer(m.issuer, issuer);
    if (!issuerOk) {
      throw new RemoteError(
        'auth',
        `The sign-in server's metadata at ${checked.href} names the issuer ${JSON.stringify(String(m.issuer ?? ''))}, not ${issuer}; refusing it.`,
      );
    }
    validateAuthServer(m, checked.href);
    return m;
  }
  return null;
}

function validateAuthServer(m, where) {
  if (typeof m.authorization_endpoint !== 'string' || typeof m.token_endpoint !== 'string') {
    throw new RemoteError(
      'auth',
      `The sign-in server's metadata at ${where} lacks an authorization or token endpoint.`,
    );
  }
  if (Array.isArray(m.response_types_supported) && !m.response_types_supported.includes('code')) {
    throw new RemoteError('auth', `The sign-in server at ${where} does not offer the authorization code flow.`);
  }
  if (!Array.isArray(m.code_challenge_methods_supported) || !m.code_challenge_methods_supported.includes('S256')) {
    throw new RemoteError(
      'auth',
      `The sign-in server at ${where} does not say it supports PKCE with S256, which MCP requires; signing in would not be safe.`,
    );
  }
}

/**
 * The endpoints a 2025-03-26 server without any metadata has by default.
 * @param {URL} serverUrl
 */
export function defaultEndpoints(serverUrl) {
  const o = serverUrl.origin;
  return {
    issuer: o,
    authorization_endpoint: `${o}/authorize`,
    token_endpoint: `${o}/token`,
    registration_endpoint: `${o}/register`,
    code_challenge_methods_supported: ['S256'],
    'x-browserbridge-defaults': true,
  };
}

function safeOrigin(s) {
  try {
    return new URL(s).origin;
  } catch {
    return '';
  }
}

// ---------------------------------------------------------------------------
// Scopes

/**
 * The scopes to ask for (MCP "scope selection strategy"): the challenge's
 * scope, else the protected-resource metadata's scopes_supported, else none;
 * plus the configured scopes and those already asked for (step-up asks for
 * the union); plus offline_access when the authorization server lists it
 * and something else is asked for (SEP-2207: a refresh token is wanted).
 * @param {{challenge?: {scope: string[]}|null, prm?: object|null, asMetadata?: object|null,
 *   configured?: string[], previous?: string[]}} args
 * @returns {string[]}
 */
export function selectScopes({ challenge, prm, asMetadata, configured = [], previous = [] }) {
  let base = [];
  if (challenge?.scope?.length) base = challenge.scope;
  else if (Array.isArray(prm?.scopes_supported)) base = prm.scopes_supported.filter((x) => typeof x === 'string');
  const out = union(previous, base, configured);
  if (
    out.length &&
    Array.isArray(asMetadata?.scopes_supported) &&
    asMetadata.scopes_supported.includes('offline_access')
  ) {
    return union(out, ['offline_access']);
  }
  return out.filter((s) => s !== 'offline_access' || asMetadata?.scopes_supported?.includes('offline_access'));
}

/** The union of scope lists, in first-seen order. */
export function union(...lists) {
  const seen = new Set();
  for (const l of lists) for (const s of l || []) if (s) seen.add(s);
  return [...seen];
}

// ---------------------------------------------------------------------------
// PKCE, state, authorization request and redirect

/** base64url without padding. */
export function base64url(bytes) {
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/**
 * A PKCE verifier (43 characters from 32 random bytes) and its S256 challenge.
 * @param {{randomBytes: (n: number) => Uint8Array, sha256: (b: Uint8Array) => Promise<Uint8Array>}} platform
 */
export async function pkcePair(platform) {
  const verifier = base64url(platform.randomBytes(32));
  const challenge = base64url(await platform.sha256(new TextEncoder().encode(verifier)));
  return { verifier, challenge };
}

/**
 * The authorization request URL.
 * @param {{endpoint: string, clientId: string, redirectUri: string, scopes: string[],
 *   state: string, challenge: string, resource: string}} a
 */
export function authorizationUrl(a) {
  const u = new URL(a.endpoint);
  const q = u.searchParams;
  q.set('response_type', 'code');
  q.set('client_id', a.clientId);
  q.set('redirect_uri', a.redirectUri);
  q.set('state', a.state);
  q.set('code_challenge', a.challenge);
  q.set('code_challenge_method', 'S256');
  q.set('resource', a.resource);
  if (a.scopes.length) q.set('scope', a.scopes.join(' '));
  else q.delete('scope');
  return u.href;
}

/**
 * Takes the code from the URL the authorization server redirected to,
 * checking that it is the redirect URI, that `state` matches and that `iss`
 * (RFC 9207), when present or required, names the issuer.
 * @param {string} redirected
 * @param {{redirectUri: string, state: string, issuer?: string, issRequired?: boolean}} want
 * @returns {string} the authorization code
 */
export function parseRedirect(redirected, { redirectUri, state, issuer, issRequired = false }) {
  let u;
  try {
    u = new URL(redirected);
  } catch {
    throw new RemoteError('auth', 'The sign-in did not come back to Browser Bridge with an answer.');
  }
  const want = new URL(redirectUri);
  if (u.origin !== want.origin || u.pathname !== want.pathname) {
    throw new RemoteError('auth', 'The sign-in came back to an unexpected address; refusing the answer.');
  }
  const q = u.search ? u.searchParams : new URLSearchParams(u.hash.slice(1));
  if (q.get('state') !== state) {
    throw new RemoteError(
      'auth',
      'The sign-in answer does not belong to this sign-in (state mismatch); refusing it. Try again.',
    );
  }
  const iss = q.get('iss');
  if ((iss !== null || issRequired) && issuer && !sameIssuer(iss, issuer)) {
    throw new RemoteError(
      'auth',
      'The sign-in answer came from another sign-in server than expected (iss mismatch); refusing it.',
    );
  }
  const error = q.get('error');
  if (error) {
    const desc = q.get('error_description');
    throw new RemoteError(
      'auth',
      error === 'access_denied' ? 'The sign-in was declined.' : `The sign-in server refused: ${desc || error}.`,
      { data: { oauthError: error } },
    );
  }
  const code = q.get('code');
  if (!code) throw new RemoteError('auth', 'The sign-in answer has no authorization code.');
  return code;
}

// ---------------------------------------------------------------------------
// Client registration (RFC 7591) and the token endpoint

/**
 * The token endpoint authentication a new registration asks for: 'none'
 * (a browser extension cannot keep a secret) unless the server takes only
 * client secrets.
 * @param {object} asMetadata
 */
export function preferredAuthMethod(asMetadata) {
  const supported = asMetadata?.token_endpoint_auth_methods_supported;
  if (!Array.isArray(supported) || !supported.length || supported.includes('none')) return 'none';
  if (supported.includes('client_secret_basic')) return 'client_secret_basic';
  if (supported.includes('client_secret_post')) return 'client_secret_post';
  return 'none';
}

/**
 * How a pre-registered client authenticates at the token endpoint, by the
 * server's token_endpoint_auth_methods_supported: with a secret,
 * client_secret_basic when listed (or when the list is missing: RFC 8414's
 * default), else client_secret_post, else 'none' when the server takes
 * public clients (the secret is then not sent); without a secret, 'none'.
 * @param {object} asMetadata
 * @param {boolean} hasSecret
 * @returns {'none'|'client_secret_basic'|'client_secret_post'}
 * @throws {RemoteError} 'config' when the server takes none of those methods
 */
export function secretAuthMethod(asMetadata, hasSecret) {
  if (!hasSecret) return 'none';
  const supported = asMetadata?.token_endpoint_auth_methods_supported;
  if (!Array.isArray(supported) || !supported.length) return 'client_secret_basic';
  if (supported.includes('client_secret_basic')) return 'client_secret_basic';
  if (supported.includes('client_secret_post')) return 'client_secret_post';
  if (supported.includes('none')) return 'none';
  throw new RemoteError(
    'config',
    `The sign-in server takes neither client_secret_basic nor client_secret_post (it lists ${supported.filter((m) => typeof m === 'string').join(', ')}); Browser Bridge cannot use the client secret configured for it.`,
  );
}

/**
 * Registers Browser Bridge with an authorization server (RFC 7591).
 * @param {OAuthContext} ctx
 * @param {{asMetadata: object, redirectUri: string, scopes: string[]}} args
 * @returns {Promise<{client_id: string, client_secret?: string, token_endpoint_auth_method: string}>}
 */
export async function registerClient(ctx, { asMetadata, redirectUri, scopes }) {
  const endpoint = await ctx.check(asMetadata.registration_endpoint, 'registration');
  const method = preferredAuthMethod(asMetadata);
  const redirect = new URL(redirectUri);
  const loopbackRedirect = redirect.protocol === 'http:' || /^(localhost|127\.|\[::1\])/.test(redirect.host);
  const body = {
    client_name: CLIENT_NAME,
    redirect_uris: [redirectUri],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: method,
    application_type: loopbackRedirect ? 'native' : 'web',
  };
  if (scopes.length) body.scope = scopes.join(' ');
  const got = await fetchJson(
    ctx.platform,
    endpoint,
    {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify(body),
    },
    { timeoutMs: OAUTH_TIMEOUT_MS, what: `the registration endpoint of ${endpoint.host}` },
  );
  const r = got.json;
  if (!got.ok || !r || typeof r.client_id !== 'string' || !r.client_id) {
    const why = r?.error_description || r?.error || `HTTP ${got.status}`;
    throw new RemoteError(
      'auth',
      `Could not register Browser Bridge with the sign-in server ${endpoint.host}: ${why}.`,
      { status: got.status },
    );
  }
  const secret = typeof r.client_secret === 'string' && r.client_secret ? r.client_secret : undefined;
  // RFC 7591: an omitted method means client_secret_basic when a secret was issued.
  const used =
    typeof r.token_endpoint_auth_method === 'string'
      ? r.token_endpoint_auth_method
      : secret
        ? 'client_secret_basic'
        : method;
  const client = { client_id: r.client_id, token_endpoint_auth_method: used };
  if (secret) client.client_secret = secret;
  if (typeof r.client_secret_expires_at === 'number' && r.client_secret_expires_at > 0) {
    client.client_secret_expires_at = r.client_secret_expires_at * 1000;
  }
  return client;
}

/** application/x-www-form-urlencoded of one value (RFC 6749 appendix B). */
function formEncode(s) {
  return encodeURIComponent(s).replace(/%20/g, '+');
}

/**
 * A token request (authorization_code or refresh_token grant), with the
 * client authenticated the way its registration says.
 * @param {OAuthContext} ctx
 * @param {{asMetadata: object, client: {client_id: string, client_secret?: string,
 *   token_endpoint_auth_method?: string}, params: Record<string, string>}} args
 * @returns {Promise<{access_token: string, token_type: string, expires_in?: number,
 *   refresh_token?: string, scope?: string}>}
 */
export async function tokenRequest(ctx, { asMetadata, client, params }) {
  const endpoint = await ctx.check(asMetadata.token_endpoint, 'token');
  const body = new URLSearchParams(params);
  const headers = { 'Content-Type': 'application/x-www-form-urlencoded', Accept: 'application/json' };
  const method = client.client_secret ? client.token_endpoint_auth_method || 'client_secret_basic' : 'none';
  if (method === 'client_secret_basic') {
    headers.Authorization = `Basic ${btoa(`${formEncode(client.client_id)}:${formEncode(client.client_secret)}`)}`;
  } else if (method === 'client_secret_post') {
    body.set('client_id', client.client_id);
    body.set('client_secret', client.client_secret);
  } else {
    body.set('client_id', client.client_id);
  }
  const got = await fetchJson(
    ctx.platform,
    endpoint,
    { method: 'POST', headers, body: body.toString() },
    { timeoutMs: OAUTH_TIMEOUT_MS, what: `the token endpoint of ${endpoint.host}` },
  );
  const t = got.json;
  if (!got.ok || !t || typeof t.access_token !== 'string' || !t.access_token) {
    const oauthError = typeof t?.error === 'string' ? t.error : undefined;
    if (got.status >= 500 || got.status === 429) {
      throw new RemoteError(
        'server',
        `The sign-in server ${endpoint.host} failed (HTTP ${got.status}); try again later.`,
        { status: got.status },
      );
    }
    const why = t?.error_description || oauthError || `HTTP ${got.status}`;
    throw new RemoteError('auth', `The sign-in server ${endpoint.host} refused to issue a token: ${why}.`, {
      status: got.status,
      data: { oauthError },
    });
  }
  if (t.token_type && String(t.token_type).toLowerCase() !== 'bearer') {
    throw new RemoteError(
      'auth',
      `The sign-in server issued a ${t.token_type} token; Browser Bridge only uses Bearer tokens.`,
    );
  }
  return t;
}
