// An OAuth-protected MCP server for the end-to-end tests, built from the
// real server-side building blocks of @modelcontextprotocol/sdk (installed
// in tools/npm by scripts/install-test-tools.sh): mcpAuthRouter (RFC 8414
// metadata, RFC 9728 protected resource metadata, RFC 7591 dynamic client
// registration, /authorize with PKCE S256, /token, /revoke),
// requireBearerAuth, McpServer and the Streamable HTTP transport. Only the
// OAuthServerProvider (the in-memory store of clients, codes and tokens) is
// ours, because the SDK's demo provider has a fixed one-hour token and no
// refresh tokens.
//
// Tools: whoami (the OAuth client, the first 16 hex digits of the SHA-256
// of the access token, its expiry) and echo ({text} → text).
//
// One origin is both the authorization server (issuer http://HOST:PORT/)
// and the resource server (http://HOST:PORT/mcp). The SDK accepts an http
// issuer on localhost and 127.0.0.1 only.
//
//   node server.mjs --modules tools/npm/node_modules [--host 127.0.0.1]
//        [--port 0] [--access-ttl 3600] [--refresh-ttl 86400]
//        [--consent] [--no-rotate]
//
// --access-ttl is in seconds and may be fractional (e.g. 2). --consent
// makes /authorize answer with an HTML page and an "Approve" button instead
// of redirecting straight back (auto-approve). --no-rotate keeps refresh
// tokens valid after use (default: rotate, the old one is revoked).
//
// On startup it prints one JSON line to stdout:
//   {"issuer":"http://127.0.0.1:PORT/","mcp":"http://127.0.0.1:PORT/mcp"}
//
// Test hooks (not OAuth): GET /test/stats (counters, how many tokens are
// live, and `issued`: every access and refresh token value handed out, so
// that a test can look for them where they must not be), POST /test/expire
// (every access token expires now; refresh tokens stay).

import path from 'node:path';
import { createHash, randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const { values: opts } = parseArgs({
    options: {
        modules: { type: 'string' },
        host: { type: 'string', default: '127.0.0.1' },
        port: { type: 'string', default: '0' },
        'access-ttl': { type: 'string', default: '3600' },
        'refresh-ttl': { type: 'string', default: '86400' },
        consent: { type: 'boolean', default: false },
        'no-rotate': { type: 'boolean', default: false }
    }
});
if (!opts.modules) {
    console.error('server.mjs: --modules DIR (tools/npm/node_modules) is required');
    process.exit(2);
}
const accessTTL = Number(opts['access-ttl']) * 1000;
const refreshTTL = Number(opts['refresh-ttl']) * 1000;

// The SDK's ESM build, imported by path: this file does not live under
// tools/npm, so bare specifiers would not resolve. express and zod are
// resolved from the SDK's own directory, so the app and the SDK share one
// copy of each.
const sdkDir = path.join(path.resolve(opts.modules), '@modelcontextprotocol', 'sdk');
const sdk = p => import(pathToFileURL(path.join(sdkDir, 'dist', 'esm', p)).href);
const fromSdk = createRequire(path.join(sdkDir, 'package.json'));
const express = (await import(pathToFileURL(fromSdk.resolve('express')).href)).default;
const { z } = await import(pathToFileURL(fromSdk.resolve('zod')).href);
const { mcpAuthRouter, getOAuthProtectedResourceMetadataUrl } = await sdk('server/auth/router.js');
const { requireBearerAuth } = await sdk('server/auth/middleware/bearerAuth.js');
const { InvalidGrantError, InvalidRequestError, InvalidTokenError } = await sdk('server/auth/errors.js');
const { McpServer } = await sdk('server/mcp.js');
const { StreamableHTTPServerTransport } = await sdk('server/streamableHttp.js');
const { createMcpExpressApp } = await sdk('server/express.js');

const stats = { registrations: 0, authorizations: 0, consentPages: 0, codeExchanges: 0, refreshes: 0, rejected: 0, mcpCalls: 0 };
const issued = { access: [], refresh: [] };

class Clients {
    clients = new Map();
    async getClient(id) {
        return this.clients.get(id);
    }
    async registerClient(client) {
        stats.registrations++;
        this.clients.set(client.client_id, client);
        return client;
    }
}

// Auto-approving in-memory provider with access-token expiry and refresh.
class Provider {
    clientsStore = new Clients();
    codes = new Map(); // code -> {clientId, params}
    access = new Map(); // token -> {clientId, scopes, resource, expiresAt}
    refresh = new Map(); // token -> {clientId, scopes, resource, expiresAt}
    pending = new Map(); // consent id -> {client, params}

    async authorize(client, params, res) {
        stats.authorizations++;
        if (opts.consent) {
            stats.consentPages++;
            const id = randomUUID();
            this.pending.set(id, { client, params });
            res.type('html').send(`<!doctype html><title>Consent</title>
<h1>Allow ${escapeHTML(client.client_name ?? client.client_id)}?</h1>
<form method="post" action="/consent"><input type="hidden" name="id" value="${id}">
<button id="approve" name="decision" value="approve">Approve</button>
<button id="deny" name="decision" value="deny">Deny</button></form>`);
            return;
        }
        this.redirectWithCode(client, params, res);
    }

    redirectWithCode(client, params, res) {
        const code = randomUUID();
        this.codes.set(code, { clientId: client.client_id, params });
        const target = new URL(params.redirectUri);
        target.searchParams.set('code', code);
        if (params.state !== undefined) target.searchParams.set('state', params.state);
        res.redirect(302, target.href);
    }

    async challengeForAuthorizationCode(client, code) {
        const c = this.codes.get(code);
        if (!c || c.clientId !== client.client_id) throw new InvalidGrantError('unknown authorization code');
        return c.params.codeChallenge;
    }

    async exchangeAuthorizationCode(client, code, _verifier, redirectUri, resource) {
        const c = this.codes.get(code);
        if (!c || c.clientId !== client.client_id) throw new InvalidGrantError('unknown authorization code');
        if (redirectUri !== undefined && redirectUri !== c.params.redirectUri) throw new InvalidGrantError('redirect_uri does not match');
        this.codes.delete(code);
        stats.codeExchanges++;
        return this.issue(client.client_id, c.params.scopes ?? [], resource ?? c.params.resource);
    }

    async exchangeRefreshToken(client, refreshToken, scopes, resource) {
        const r = this.refresh.get(refreshToken);
        if (!r || r.clientId !== client.client_id || r.expiresAt < Date.now()) throw new InvalidGrantError('invalid refresh token');
        if (!opts['no-rotate']) this.refresh.delete(refreshToken);
        stats.refreshes++;
        return this.issue(client.client_id, scopes?.length ? scopes : r.scopes, resource ?? r.resource, opts['no-rotate'] ? refreshToken : undefined);
    }

    issue(clientId, scopes, resource, keepRefresh) {
        const now = Date.now();
        const accessToken = randomUUID();
        this.access.set(accessToken, { clientId, scopes, resource, expiresAt: now + accessTTL });
        issued.access.push(accessToken);
        let refreshToken = keepRefresh;
        if (!refreshToken) {
            refreshToken = randomUUID();
            issued.refresh.push(refreshToken);
            this.refresh.set(refreshToken, { clientId, scopes, resource, expiresAt: now + refreshTTL });
        }
        return {
            access_token: accessToken,
            token_type: 'Bearer',
            expires_in: Math.max(1, Math.round(accessTTL / 1000)),
            refresh_token: refreshToken,
            scope: scopes.join(' ')
        };
    }

    async verifyAccessToken(token) {
        const a = this.access.get(token);
        if (!a || a.expiresAt <= Date.now()) {
            stats.rejected++;
            throw new InvalidTokenError(a ? 'Token has expired' : 'Invalid token');
        }
        // requireBearerAuth compares expiresAt in seconds; round down so a
        // token is never accepted there after it expired here.
        return { token, clientId: a.clientId, scopes: a.scopes, expiresAt: Math.floor(a.expiresAt / 1000), resource: a.resource };
    }

    async revokeToken(_client, { token }) {
        this.access.delete(token);
        this.refresh.delete(token);
    }
}

function escapeHTML(s) {
    return String(s).replace(/[&<>"']/g, c => `&#${c.charCodeAt(0)};`);
}

const provider = new Provider();
const app = createMcpExpressApp({ host: opts.host });
const server = app.listen(Number(opts.port), opts.host, err => {
    if (err) {
        console.error(err);
        process.exit(1);
    }
});
await new Promise(resolve => server.once('listening', resolve));
const hostPart = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
const origin = `http://${hostPart}:${server.address().port}`;
const issuerUrl = new URL(`${origin}/`);
const mcpUrl = new URL(`${origin}/mcp`);

// The routers are mounted after listen because the issuer names the port.
const noLimit = { rateLimit: false };
app.use(
    mcpAuthRouter({
        provider,
        issuerUrl,
        resourceServerUrl: mcpUrl,
        scopesSupported: ['mcp:tools'],
        resourceName: 'Browser Bridge e2e OAuth MCP server',
        authorizationOptions: noLimit,
        tokenOptions: noLimit,
        clientRegistrationOptions: noLimit,
        revocationOptions: noLimit
    })
);

app.post('/consent', express.urlencoded({ extended: false }), (req, res) => {
    const p = provider.pending.get(req.body?.id);
    if (!p) throw new InvalidRequestError('unknown consent id');
    provider.pending.delete(req.body.id);
    if (req.body.decision !== 'approve') {
        const target = new URL(p.params.redirectUri);
        target.searchParams.set('error', 'access_denied');
        if (p.params.state !== undefined) target.searchParams.set('state', p.params.state);
        res.redirect(302, target.href);
        return;
    }
    provider.redirectWithCode(p.client, p.params, res);
});

app.get('/test/stats', (_req, res) => {
    res.json({ ...stats, accessTokens: provider.access.size, refreshTokens: provider.refresh.size, issued });
});
app.post('/test/expire', (_req, res) => {
    for (const a of provider.access.values()) a.expiresAt = 0;
    res.json({ expired: provider.access.size });
});

const bearer = requireBearerAuth({
    verifier: provider,
    resourceMetadataUrl: getOAuthProtectedResourceMetadataUrl(mcpUrl),
    expectedResource: mcpUrl
});

function newMcpServer() {
    const mcp = new McpServer({ name: 'browserbridge-e2e-oauth', version: '1.0.0' });
    // token is the first 16 hex digits of the SHA-256 of the access token:
    // which token a request carried, without the token itself.
    mcp.registerTool('whoami', { description: 'The OAuth client, token fingerprint and expiry of this request.' }, async extra => {
        const a = extra.authInfo;
        const token = a?.token ? createHash('sha256').update(a.token).digest('hex').slice(0, 16) : undefined;
        return {
            content: [{ type: 'text', text: JSON.stringify({ clientId: a?.clientId, scopes: a?.scopes, expiresAt: a?.expiresAt, token }) }]
        };
    });
    mcp.registerTool('echo', { description: 'Returns its text argument.', inputSchema: { text: z.string() } }, async ({ text }) => ({
        content: [{ type: 'text', text }]
    }));
    return mcp;
}

// Stateless Streamable HTTP: a fresh server and transport per request, so
// every request is authorized on its own and no session outlives a token.
app.post('/mcp', bearer, async (req, res) => {
    stats.mcpCalls++;
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    const mcp = newMcpServer();
    res.on('close', () => {
        transport.close();
        mcp.close();
    });
    await mcp.connect(transport);
    await transport.handleRequest(req, res, req.body);
});
app.all('/mcp', bearer, (_req, res) => {
    res.status(405).set('Allow', 'POST').json({ jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed.' }, id: null });
});

process.stdout.write(JSON.stringify({ issuer: issuerUrl.href, mcp: mcpUrl.href }) + '\n');
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => server.close(() => process.exit(0)));
