// A TypeScript SDK client (@modelcontextprotocol/sdk, installed in tools/npm
// by scripts/install-test-tools.sh) that signs in to the public gateway and
// carries on in one session across a restart of the gateway (issue 33): the
// SDK does not recover from 404 "session not found" by itself, so the
// session must survive. The person is played by the Go test (Chromium),
// the restart too: it restarts the gateway when told, and says so on stdin.
//
//   node client.mjs --modules tools/npm/node_modules --url http://127.0.0.1:PORT/servers/NAME/mcp
//
// stdout, one JSON object a line, in this order:
//   {"event":"authorize","url":"…"}      sign in at url (redirect to a loopback listener here)
//   {"event":"called","text":"…","sessionId":"…"}   signed in; echo answered
//   {"event":"inflight"}                 a long call runs (its first progress came): restart now;
//                                        the test writes {"restarted":true,"awaitInflight":B} on stdin when
//                                        the gateway is back (B: wait for the long call's end)
//   {"event":"after","text":"…","sessionId":"…","inflightError":"…"}
//        echo in the same session after the restart, and how the long call ended
//   {"event":"done"}
// or {"event":"failed","step":"…","error":"…"} and exit 1.

import http from 'node:http';
import path from 'node:path';
import readline from 'node:readline';
import { randomBytes } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const { values: opts } = parseArgs({
    options: {
        modules: { type: 'string' },
        url: { type: 'string' }
    }
});
if (!opts.modules || !opts.url) {
    console.error('client.mjs: --modules DIR (tools/npm/node_modules) and --url URL are required');
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
            client_name: 'Browser Bridge e2e (TypeScript SDK, restart)',
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
        tokens = t;
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
    const client = new Client({ name: 'e2e-ts-restart', version: '1.0.0' });
    // The GET stream breaks with the restart; the SDK's reconnecting is
    // its own business, not this test's.
    client.onerror = () => {};
    return { transport, client };
};
const echoText = async (client, message) => {
    const res = await client.callTool({ name: 'echo', arguments: { message } });
    if (res.isError) throw new Error(`echo answered isError: ${JSON.stringify(res.content)}`);
    return res.content
        .filter(c => c.type === 'text')
        .map(c => c.text)
        .join('\n');
};

try {
    step = 'first connect';
    const first = newClient();
    try {
        await first.client.connect(first.transport);
        throw new Error('the server let an unauthenticated client connect');
    } catch (err) {
        if (!(err instanceof UnauthorizedError)) throw err;
    }
    step = 'waiting for the redirect';
    const params = await redirected;
    server.close();
    if (params.get('state') !== expectedState) throw new Error('the redirect carries another state than the request');
    step = 'finishAuth';
    await first.transport.finishAuth(params.get('code'));

    step = 'connect after sign-in';
    const { transport, client } = newClient();
    await client.connect(transport);
    emit({ event: 'called', text: await echoText(client, 'before the restart'), sessionId: transport.sessionId });

    // A long call, in flight when the gateway stops: it must end with an
    // error naming the restart, not hang.
    step = 'long call';
    let inflight;
    const started = new Promise(resolve => (inflight = resolve));
    const long = client
        .callTool(
            { name: 'trigger-long-running-operation', arguments: { duration: 600, steps: 600 } },
            undefined,
            { onprogress: () => inflight(), timeout: 300000, resetTimeoutOnProgress: true }
        )
        .then(
            res => `no error: ${JSON.stringify(res)}`,
            err => String(err?.message ?? err)
        );
    await started;
    emit({ event: 'inflight' });

    step = 'waiting for the restart';
    const { value: line, done } = await lines.next();
    const said = done ? {} : JSON.parse(line);
    if (!said.restarted) throw new Error(`stdin said ${line} instead of the restart`);
    // After a clean stop the gateway answered the long call before it
    // exited; after a crash nothing did, and the SDK waits for its
    // broken stream's answer until its timeout: not awaited then.
    const inflightError = said.awaitInflight ? await long : 'not awaited';

    step = 'echo after the restart';
    const text = await echoText(client, 'after the restart');
    emit({ event: 'after', text, sessionId: transport.sessionId, inflightError });

    step = 'close';
    await transport.terminateSession();
    await client.close();
    emit({ event: 'done' });
    process.exit(0);
} catch (err) {
    fail(err);
}
