// The one TypeScript SDK MCP client the Go tests drive (testutil.StartTSClient):
// the official @modelcontextprotocol/sdk (installed in tools/npm by
// scripts/install-test-tools.sh), Client and StreamableHTTPClientTransport
// as an application uses them, optionally with an authProvider (the SDK's
// OAuthClientProvider) as a desktop app writes one: dynamic registration,
// PKCE, tokens in memory.
//
//   node tsclient.mjs --modules tools/npm/node_modules --url URL [--name NAME]
//        [--oauth loopback | --oauth APP-REDIRECT-URI]
//
// --oauth loopback serves its redirect URI on 127.0.0.1 here (RFC 8252);
// --oauth cursor://… registers the app's own scheme, which the system would
// hand to the app: the Go test, playing the person and the system, writes
// {"op":"redirect","url":"cursor://…?code=…"} on stdin.
//
// stdout, one JSON object a line. First, with --oauth:
//   {"event":"authorize","url":"…","registered":["…"]}   sign in at url
//   {"event":"redirected","state":true,"iss":"…"}         the browser came back
// then, signed in or not:
//   {"event":"connected","window":"a","sessionId":"…","protocolVersion":"…","tools":[…],"auth":AUTH}
// Commands on stdin, one JSON object a line; each is answered by a line
// with its id, in the order the work ends (calls run concurrently):
//   {"op":"call","id":N,"window":"a","name":"…","arguments":{…},"timeoutMs":60000,"progress":false}
//     → {"id":N,"sessionId":"…","result":{CallToolResult},"errors":[…],"auth":AUTH}
//       or {"id":N,"sessionId":"…","error":"…","errors":[…],"auth":AUTH};
//       with "progress":true, {"id":N,"event":"progress"} first, at the
//       call's first progress notification (and the timeout is reset by each)
//   {"op":"open","id":N,"window":"b"} a second window of the app (its own
//       connection) starting with a copy of window a's tokens
//     → {"id":N,"sessionId":"…","auth":AUTH}
//   {"op":"spoil","id":N,"window":"a"} the window's access token goes bad,
//       as an expired one would → {"id":N,"auth":AUTH} (AUTH from before)
//   {"op":"close"} terminates every window's session (DELETE)
//     → {"event":"closed","clientId":"…","access":[…],"refresh":[…],"errors":[…]}
//       (every token ever saved) and exit 0. stdin ending closes too.
// AUTH is {"saves":N,"access":"…","refresh":"…"}: the window's token saves
// so far and its tokens now (null without --oauth). `errors` are what the
// SDK reported through onerror since the window's previous answer (a broken
// GET stream, a failed reconnection). A failure outside a command prints
// {"event":"failed","step":"…","error":"…"} and exits 1.

import http from 'node:http';
import path from 'node:path';
import readline from 'node:readline';
import { randomBytes } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const { values: opts } = parseArgs({
  options: {
    modules: { type: 'string' },
    url: { type: 'string' },
    name: { type: 'string', default: 'e2e-ts' },
    oauth: { type: 'string' },
  },
});
if (!opts.modules || !opts.url) {
  console.error('tsclient.mjs: --modules DIR (tools/npm/node_modules) and --url URL are required');
  process.exit(2);
}

// The SDK's ESM build, imported by path: this file does not live under
// tools/npm, so bare specifiers would not resolve.
const sdkDir = path.join(path.resolve(opts.modules), '@modelcontextprotocol', 'sdk');
const sdk = (p) => import(pathToFileURL(path.join(sdkDir, 'dist', 'esm', p)).href);
const { Client } = await sdk('client/index.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
const { UnauthorizedError } = await sdk('client/auth.js');

const emit = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
const message = (err) => String(err?.message ?? err);
let step = 'start';
const fail = (err) => {
  emit({ event: 'failed', step, error: String(err?.stack ?? message(err)) });
  process.exit(1);
};
const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();

// The redirect comes back to a listener here (loopback) or, for an app's
// own scheme, from the test on stdin.
const loopback = opts.oauth === 'loopback';
let gotRedirect;
const redirected = new Promise((resolve) => (gotRedirect = resolve));
let redirectUrl = opts.oauth;
let listener;
if (loopback) {
  listener = http.createServer((req, res) => {
    const u = new URL(req.url, 'http://127.0.0.1');
    if (u.pathname !== '/callback') {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8' }).end('Signed in; you may close this window.');
    gotRedirect(new URL(`${redirectUrl}${u.search}`));
  });
  await new Promise((resolve) => listener.listen(0, '127.0.0.1', resolve));
  redirectUrl = `http://127.0.0.1:${listener.address().port}/callback`;
}

// The app's one registration and PKCE verifier, as an app keeps them in
// its settings; every token saved, so the Go test can check none is logged.
const saved = { access: [], refresh: [] };
let clientInfo;
let verifier;
let expectedState;
const windows = new Map();

// newWindow is one window of the app: its own token store and connection.
const newWindow = (id, initial) => {
  const w = { id, tokens: initial, saves: 0, reported: [] };
  w.provider = {
    get redirectUrl() {
      return redirectUrl;
    },
    get clientMetadata() {
      return {
        client_name: opts.name,
        redirect_uris: [redirectUrl],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
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
    },
  };
  w.connect = async () => {
    w.transport = new StreamableHTTPClientTransport(
      new URL(opts.url),
      opts.oauth ? { authProvider: w.provider } : undefined,
    );
    w.client = new Client({ name: opts.name, version: '1.0.0' });
    w.client.onerror = (err) => w.reported.push(message(err));
    await w.client.connect(w.transport);
  };
  w.drain = () => w.reported.splice(0);
  w.auth = () =>
    opts.oauth
      ? { saves: w.saves, access: w.tokens?.access_token ?? '', refresh: w.tokens?.refresh_token ?? '' }
      : null;
  windows.set(id, w);
  return w;
};

// signIn: the first connect meets 401 and the SDK sends the person to the
// authorization page (UnauthorizedError after redirectToAuthorization);
// the browser comes back with a code, which finishAuth exchanges.
const signIn = async (w) => {
  step = 'first connect';
  try {
    await w.connect();
    throw new Error('the server let an unauthenticated client connect');
  } catch (err) {
    if (!(err instanceof UnauthorizedError)) throw err;
  }
  if (!w.authorizeUrl) throw new Error('the SDK did not send the person to sign in');
  emit({ event: 'authorize', url: w.authorizeUrl, registered: clientInfo?.redirect_uris ?? [] });

  step = 'waiting for the redirect';
  let back;
  if (loopback) {
    back = await redirected;
    listener.close();
  } else {
    const { value: line, done } = await lines.next();
    if (done) throw new Error('stdin closed before the redirect');
    const cmd = JSON.parse(line);
    if (cmd.op !== 'redirect') throw new Error(`stdin said ${line} instead of the redirect`);
    back = new URL(cmd.url);
    if (`${back.protocol}//${back.host}${back.pathname}` !== redirectUrl)
      throw new Error(`redirected to ${back}, not to ${redirectUrl}`);
  }
  const q = back.searchParams;
  if (q.get('error'))
    throw new Error(`the authorization server answered error=${q.get('error')}: ${q.get('error_description')}`);
  emit({ event: 'redirected', state: q.get('state') === expectedState, iss: q.get('iss') ?? '' });
  if (q.get('state') !== expectedState) throw new Error('the redirect carries another state than the request');
  if (!q.get('code')) throw new Error(`the redirect has no code: ${back}`);

  step = 'finishAuth';
  await w.transport.finishAuth(q.get('code'));
};

const windowOf = (cmd) => {
  const w = windows.get(cmd.window ?? 'a');
  if (!w) throw new Error(`no window ${JSON.stringify(cmd.window)}`);
  return w;
};

// call runs one tool call and answers it; calls run concurrently.
const call = async (cmd) => {
  const w = windowOf(cmd);
  const answer = { id: cmd.id, sessionId: w.transport.sessionId };
  try {
    const options = { timeout: cmd.timeoutMs ?? 60000 };
    if (cmd.progress) {
      let first = true;
      options.resetTimeoutOnProgress = true;
      options.onprogress = () => {
        if (first) emit({ id: cmd.id, event: 'progress' });
        first = false;
      };
    }
    answer.result = await w.client.callTool({ name: cmd.name, arguments: cmd.arguments ?? {} }, undefined, options);
  } catch (err) {
    answer.error = message(err);
  }
  emit({ ...answer, sessionId: w.transport.sessionId, errors: w.drain(), auth: w.auth() });
};

const close = async () => {
  step = 'close';
  const errors = [];
  for (const w of windows.values()) {
    await w.transport.terminateSession().catch((err) => errors.push(`terminateSession: ${message(err)}`));
    await w.client.close();
    errors.push(...w.drain());
  }
  emit({ event: 'closed', clientId: clientInfo?.client_id ?? '', ...saved, errors });
  process.exit(0);
};

try {
  const a = newWindow('a', undefined);
  if (opts.oauth) await signIn(a);
  step = 'connect';
  await a.connect();
  const { tools } = await a.client.listTools();
  emit({
    event: 'connected',
    window: 'a',
    sessionId: a.transport.sessionId,
    protocolVersion: a.transport.protocolVersion,
    tools: tools.map((t) => t.name),
    auth: a.auth(),
  });
} catch (err) {
  fail(err);
}

step = 'commands';
for (;;) {
  const { value: line, done } = await lines.next();
  if (done) break;
  if (!line.trim()) continue;
  let cmd;
  try {
    cmd = JSON.parse(line);
  } catch (err) {
    emit({ error: `not a JSON command: ${err.message}` });
    continue;
  }
  try {
    switch (cmd.op) {
      case 'call':
        call(cmd).catch((err) => emit({ id: cmd.id, error: message(err) }));
        break;
      case 'open': {
        const w = newWindow(cmd.window, { ...windowOf({ window: 'a' }).tokens });
        await w.connect();
        emit({ id: cmd.id, sessionId: w.transport.sessionId, auth: w.auth() });
        break;
      }
      case 'spoil': {
        const w = windowOf(cmd);
        const before = w.auth();
        w.tokens = { ...w.tokens, access_token: 'spoiled-' + randomBytes(8).toString('hex') };
        emit({ id: cmd.id, auth: before });
        break;
      }
      case 'close':
        await close();
        break;
      default:
        emit({ id: cmd.id, error: `unknown op ${JSON.stringify(cmd.op)}` });
    }
  } catch (err) {
    emit({ id: cmd.id, error: message(err) });
  }
}
await close();
