// An OAuth-signing-in MCP client for the end-to-end tests, built on the
// official TypeScript SDK (@modelcontextprotocol/sdk, installed in tools/npm
// by scripts/install-test-tools.sh): Client and StreamableHTTPClientTransport
// with an authProvider (the SDK's OAuthClientProvider interface), as a
// desktop application would write one: a loopback redirect URI served here
// (RFC 8252), dynamic client registration, PKCE, tokens kept in memory.
//
//   node client.mjs --modules tools/npm/node_modules --url https://…/servers/NAME/mcp
//
// It prints one JSON object a line on stdout, in this order:
//   {"event":"authorize","url":"…"}      open this in a browser and sign in
//   {"event":"redirected","state":true,"iss":"…"}  the browser came back (state matched)
//   {"event":"connected","tools":["echo",…],"sessionId":"…"}
//   {"event":"called","text":"…"}        echo's answer
//   {"event":"refreshed","saves":N,"changed":true,"text":"…"}
//        the access token was spoiled; the next call got 401, the SDK
//        refreshed (saveTokens called again) and retried it
//   {"event":"done","clientId":"…","access":[…],"refresh":[…]}
//        every token saved, so the Go test can check that none is logged
// or {"event":"failed","step":"…","error":"…"} and exit 1.
// The redirect listener gives up after --wait-ms (default 120000).

import http from 'node:http';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const { values: opts } = parseArgs({
    options: {
        modules: { type: 'string' },
        url: { type: 'string' },
        message: { type: 'string', default: 'hello from the TypeScript SDK' },
        'wait-ms': { type: 'string', default: '120000' }
    }
});
if (!opts.modules || !opts.url) {
    console.error('client.mjs: --modules DIR (tools/npm/node_modules) and --url URL are required');
    process.exit(2);
}

// The SDK's ESM build, imported by path: this file does not live under
// tools/npm, so bare specifiers would not resolve.
const sdkDir = path.join(path.resolve(opts.modules), '@modelcontextprotocol', 'sdk');
const sdk = p => import(pathToFileURL(path.join(sdkDir, 'dist', 'esm', p)).href);
const { Client } = await sdk('client/index.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
const { UnauthorizedError } = await sdk('client/auth.js');

const emit = obj => process.stdout.write(JSON.stringify(obj) + '\n');
let step = 'start';
const fail = err => {
    emit({ event: 'failed', step, error: String(err?.stack ?? err?.message ?? err) });
    process.exit(1);
};

// The loopback redirect listener: it takes the first redirect to
// /callback and answers the browser with a short page.
let gotRedirect;
const redirected = new Promise(resolve => (gotRedirect = resolve));
const server = http.createServer((req, res) => {
    const u = new URL(req.url, 'http://127.0.0.1');
    if (u.pathname !== '/callback') {
        res.writeHead(404).end();
        return;
    }
    res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8' }).end('Signed in; you may close this window.');
    gotRedirect(u.searchParams);
});
await new Promise(resolve => server.listen(0, '127.0.0.1', resolve));
const redirectUrl = `http://127.0.0.1:${server.address().port}/callback`;

// The provider keeps everything in memory, as the SDK's examples do.
const saved = { access: [], refresh: [] };
let saves = 0;
let verifier;
let clientInfo;
let tokens;
let expectedState;
const provider = {
    get redirectUrl() {
        return redirectUrl;
    },
    get clientMetadata() {
        return {
            client_name: 'Browser Bridge e2e (TypeScript SDK)',
            redirect_uris: [redirectUrl],
            grant_types: ['authorization_code', 'refresh_token'],
            response_types: ['code'],
            token_endpoint_auth_method: 'none'
        };
    },
    state() {
        expectedState = randomBytes(16).toString('hex');
        return expectedState;
    },
    clientInformation: () => clientInfo,
    saveClientInformation(info) {
        clientInfo = info;
    },
    tokens: () => tokens,
    saveTokens(t) {
        saves++;
        tokens = t;
        saved.access.push(t.access_token);
        if (t.refresh_token) saved.refresh.push(t.refresh_token);
    },
    redirectToAuthorization(url) {
        emit({ event: 'authorize', url: String(url) });
    },
    saveCodeVerifier(v) {
        verifier = v;
    },
    codeVerifier() {
        if (!verifier) throw new Error('no code verifier saved');
        return verifier;
    }
};

const newClient = () => {
    const transport = new StreamableHTTPClientTransport(new URL(opts.url), { authProvider: provider });
    const client = new Client({ name: 'e2e-ts-oauth', version: '1.0.0' });
    return { transport, client };
};
const echoText = async client => {
    const res = await client.callTool({ name: 'echo', arguments: { message: opts.message } });
    if (res.isError) throw new Error(`echo answered isError: ${JSON.stringify(res.content)}`);
    return res.content
        .filter(c => c.type === 'text')
        .map(c => c.text)
        .join('\n');
};

try {
    // 1. The first connect meets 401, registers, and sends the person to
    // the authorization page: the SDK's way of saying so is
    // UnauthorizedError after redirectToAuthorization.
    step = 'first connect';
    const first = newClient();
    try {
        await first.client.connect(first.transport);
        throw new Error('the server let an unauthenticated client connect');
    } catch (err) {
        if (!(err instanceof UnauthorizedError)) throw err;
    }

    // 2. The browser comes back to the loopback listener.
    step = 'waiting for the redirect';
    const timeout = setTimeout(
        () => fail(new Error(`no redirect to ${redirectUrl} within ${opts['wait-ms']} ms`)),
        Number(opts['wait-ms'])
    );
    const params = await redirected;
    clearTimeout(timeout);
    server.close();
    if (params.get('error'))
        throw new Error(
            `the authorization server answered error=${params.get('error')}: ${params.get('error_description')}`
        );
    const code = params.get('code');
    if (!code) throw new Error(`the redirect has no code: ${params}`);
    emit({ event: 'redirected', state: params.get('state') === expectedState, iss: params.get('iss') ?? '' });
    if (params.get('state') !== expectedState) throw new Error('the redirect carries another state than the request');

    // 3. finishAuth exchanges the code; a new connection uses the token.
    step = 'finishAuth';
    await first.transport.finishAuth(code);
    step = 'connect after sign-in';
    const { transport, client } = newClient();
    await client.connect(transport);
    const { tools } = await client.listTools();
    emit({ event: 'connected', tools: tools.map(t => t.name), sessionId: transport.sessionId });

    step = 'call echo';
    emit({ event: 'called', text: await echoText(client) });

    // 4. The access token goes bad (as an expired one would); the next
    // request meets 401 and the SDK refreshes with the refresh token.
    step = 'refresh';
    if (!tokens?.refresh_token) throw new Error('the token response had no refresh_token');
    const before = { saves, access: tokens.access_token };
    tokens = { ...tokens, access_token: 'spoiled-' + randomBytes(8).toString('hex') };
    const text = await echoText(client);
    emit({ event: 'refreshed', saves: saves - before.saves, changed: tokens.access_token !== before.access, text });

    step = 'close';
    await transport.terminateSession().catch(() => {});
    await client.close();
    emit({ event: 'done', clientId: clientInfo?.client_id ?? '', ...saved });
    process.exit(0);
} catch (err) {
    fail(err);
}
