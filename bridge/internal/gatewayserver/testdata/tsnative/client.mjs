// A native app signing in to the public gateway with the official
// TypeScript SDK (@modelcontextprotocol/sdk, installed in tools/npm by
// scripts/install-test-tools.sh), as Cursor does: its redirect URI is the
// app's own scheme (--redirect cursor://…), which the operating system
// would hand to the app; here the Go test plays the person and the system,
// and writes the redirect it caught to this script's stdin. Then two
// clients of the app (two windows) holding one token refresh it at once.
//
//   node client.mjs --modules tools/npm/node_modules --url http://127.0.0.1:PORT/servers/NAME/mcp \
//        --redirect cursor://anysphere.cursor-retrieval/oauth/callback
//
// stdout, one JSON object a line, in this order:
//   {"event":"authorize","url":"…","registered":["cursor://…"]}
//        the SDK registered (redirect_uris as the server answered) and
//        sends the person to url; the test answers on stdin with
//        {"redirect":"cursor://…?code=…&state=…&iss=…"}
//   {"event":"connected","tools":[…],"text":"…"}    signed in; echo answered
//   {"event":"raced","texts":[…,…],"saves":[n,n],"refresh":[…,…]}
//        both windows' access tokens went bad at once; both calls met
//        401, both refreshed with the one refresh token, both retried
//   {"event":"after","texts":[…,…]}                 both carry on
//   {"event":"done","access":[…],"refresh":[…]}     every token saved
// or {"event":"failed","step":"…","error":"…"} and exit 1.

import path from 'node:path';
import readline from 'node:readline';
import { randomBytes } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const { values: opts } = parseArgs({
    options: {
        modules: { type: 'string' },
        url: { type: 'string' },
        redirect: { type: 'string' }
    }
});
if (!opts.modules || !opts.url || !opts.redirect) {
    console.error('client.mjs: --modules, --url and --redirect are required');
    process.exit(2);
}

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

const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const saved = { access: [], refresh: [] };
let clientInfo;
let verifier;
let expectedState;

// appWindow is one window of the app: its own token store, the app's one
// registration (as an app keeps it in its settings).
const appWindow = initial => {
    const w = { tokens: initial, saves: 0 };
    w.provider = {
        get redirectUrl() {
            return opts.redirect;
        },
        get clientMetadata() {
            return {
                client_name: 'Cursor (Browser Bridge test)',
                redirect_uris: [opts.redirect],
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
        tokens: () => w.tokens,
        saveTokens(t) {
            w.saves++;
            w.tokens = t;
            saved.access.push(t.access_token);
            if (t.refresh_token) saved.refresh.push(t.refresh_token);
        },
        redirectToAuthorization(url) {
            w.authorizeUrl = String(url);
        },
        saveCodeVerifier(v) {
            verifier = v;
        },
        codeVerifier() {
            if (!verifier) throw new Error('no code verifier saved');
            return verifier;
        }
    };
    w.connect = async () => {
        w.transport = new StreamableHTTPClientTransport(new URL(opts.url), { authProvider: w.provider });
        w.client = new Client({ name: 'cursor-test', version: '1.0.0' });
        await w.client.connect(w.transport);
    };
    return w;
};

const echo = async (w, message) => {
    const res = await w.client.callTool({ name: 'echo', arguments: { message } });
    if (res.isError) throw new Error(`echo answered isError: ${JSON.stringify(res.content)}`);
    return res.content
        .filter(c => c.type === 'text')
        .map(c => c.text)
        .join('\n');
};

try {
    step = 'first connect';
    const first = appWindow(undefined);
    try {
        await first.connect();
        throw new Error('the server let an unauthenticated client connect');
    } catch (err) {
        if (!(err instanceof UnauthorizedError)) throw err;
    }
    if (!first.authorizeUrl) throw new Error('the SDK did not send the person to sign in');
    emit({ event: 'authorize', url: first.authorizeUrl, registered: clientInfo?.redirect_uris ?? [] });

    step = 'waiting for the redirect';
    const { value: line, done } = await lines.next();
    if (done) throw new Error('stdin closed before the redirect');
    const back = new URL(JSON.parse(line).redirect);
    if (`${back.protocol}//${back.host}${back.pathname}` !== opts.redirect)
        throw new Error(`redirected to ${back}, not to ${opts.redirect}`);
    if (back.searchParams.get('state') !== expectedState) throw new Error('the redirect carries another state');
    const code = back.searchParams.get('code');
    if (!code) throw new Error(`the redirect has no code: ${back}`);

    step = 'finishAuth';
    await first.transport.finishAuth(code);
    step = 'connect after sign-in';
    const a = appWindow(first.tokens);
    a.saves = first.saves;
    await a.connect();
    const { tools } = await a.client.listTools();
    emit({ event: 'connected', tools: tools.map(t => t.name), text: await echo(a, 'from window A') });

    // A second window of the app starts with the same tokens.
    step = 'second window';
    const b = appWindow({ ...a.tokens });
    await b.connect();
    if (!a.tokens?.refresh_token) throw new Error('the token response had no refresh_token');

    // Both access tokens go bad (as expired ones would); each window's
    // next call meets 401 and refreshes with the one refresh token.
    step = 'racing refreshes';
    const before = [a.saves, b.saves];
    a.tokens = { ...a.tokens, access_token: 'spoiled-' + randomBytes(8).toString('hex') };
    b.tokens = { ...b.tokens, access_token: 'spoiled-' + randomBytes(8).toString('hex') };
    const texts = await Promise.all([echo(a, 'race A'), echo(b, 'race B')]);
    emit({
        event: 'raced',
        texts,
        saves: [a.saves - before[0], b.saves - before[1]],
        refresh: [a.tokens.refresh_token, b.tokens.refresh_token]
    });

    step = 'after the race';
    emit({ event: 'after', texts: await Promise.all([echo(a, 'still A'), echo(b, 'still B')]) });

    step = 'close';
    for (const w of [a, b]) {
        await w.transport.terminateSession().catch(() => {});
        await w.client.close();
    }
    emit({ event: 'done', ...saved });
    process.exit(0);
} catch (err) {
    fail(err);
}
