// A Streamable HTTP MCP client for the end-to-end tests, built on the
// official TypeScript SDK (@modelcontextprotocol/sdk, installed in tools/npm
// by scripts/install-test-tools.sh): Client and
// StreamableHTTPClientTransport with their defaults, as an application
// would use them. The Go test drives it line by line, so that it can do
// things to the bridge (kill it) between two calls of one session.
//
//   node client.mjs --modules tools/npm/node_modules --url http://127.0.0.1:PORT/mcp [--name NAME]
//
// It connects (initialize), then prints one JSON line:
//   {"event":"connected","sessionId":"…","protocolVersion":"…"}
// and reads commands, one JSON object a line, on stdin:
//   {"op":"call","id":1,"name":"navigate","arguments":{…},"timeoutMs":60000}
//     → {"id":1,"sessionId":"…","result":{CallToolResult},"errors":[…]}
//       or {"id":1,"sessionId":"…","error":"…","errors":[…]}
//   {"op":"close"} → terminates the session (DELETE), prints {"event":"closed"} and exits.
// `errors` are what the SDK reported through onerror since the previous
// answer (a broken GET stream, a failed reconnection). stdin ending closes
// the client too.

import path from 'node:path';
import readline from 'node:readline';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const { values: opts } = parseArgs({
    options: {
        modules: { type: 'string' },
        url: { type: 'string' },
        name: { type: 'string', default: 'e2e-ts' }
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

const emit = obj => process.stdout.write(JSON.stringify(obj) + '\n');
let reported = [];
const drain = () => {
    const out = reported;
    reported = [];
    return out;
};

const transport = new StreamableHTTPClientTransport(new URL(opts.url));
const client = new Client({ name: opts.name, version: '1.0.0' });
client.onerror = err => reported.push(String(err?.message ?? err));
try {
    await client.connect(transport);
} catch (err) {
    emit({ event: 'connect-failed', error: String(err?.message ?? err) });
    process.exit(1);
}
emit({ event: 'connected', sessionId: transport.sessionId, protocolVersion: transport.protocolVersion });

async function close() {
    try {
        await transport.terminateSession();
    } catch (err) {
        reported.push(`terminateSession: ${err?.message ?? err}`);
    }
    await client.close();
    emit({ event: 'closed', errors: drain() });
    process.exit(0);
}

for await (const line of readline.createInterface({ input: process.stdin })) {
    if (!line.trim()) continue;
    let cmd;
    try {
        cmd = JSON.parse(line);
    } catch (err) {
        emit({ error: `not a JSON command: ${err.message}` });
        continue;
    }
    if (cmd.op === 'close') await close();
    if (cmd.op !== 'call') {
        emit({ id: cmd.id, error: `unknown op ${JSON.stringify(cmd.op)}` });
        continue;
    }
    try {
        const result = await client.callTool({ name: cmd.name, arguments: cmd.arguments ?? {} }, undefined, {
            timeout: cmd.timeoutMs ?? 60000
        });
        emit({ id: cmd.id, sessionId: transport.sessionId, result, errors: drain() });
    } catch (err) {
        emit({ id: cmd.id, sessionId: transport.sessionId, error: String(err?.message ?? err), errors: drain() });
    }
}
await close();
