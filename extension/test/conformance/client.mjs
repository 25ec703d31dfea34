#!/usr/bin/env node
// The conformance suite's client command: a RemoteServer on a Node platform.
//
//   node @modelcontextprotocol/conformance/dist/index.js client --suite auth \
//     --command "node extension/test/conformance/client.mjs"
//
// The suite starts a mock MCP server (and authorization server) per
// scenario, appends the server's URL to the command, names the scenario in
// MCP_CONFORMANCE_SCENARIO and passes scenario data in MCP_CONFORMANCE_CONTEXT
// (JSON; auth/pre-registration: {name, client_id, client_secret}, which
// become the server config's clientId and clientSecret, as a custom server
// the user added with credentials would have). This client signs in, lists
// the tools and calls the first one, as the extension would; it exits 0 when
// all of that worked.
//
// The platform stands for the extension's: storage is in memory, fetch and
// crypto are Node's, and launchWebAuthFlow stands for chrome.identity — the
// suite's authorization server approves at once, so the flow fetches the
// authorization URL and follows its redirects until one points at the
// redirect URI, as the browser window would. developerMode is on because the
// suite's servers listen on http://localhost; resolve is dns.lookup, so
// every host is checked the way ssrf.js checks it in Node.

import { createHash, randomBytes } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { RemoteServer } from '../../remote/client.js';
import { memoryStorage } from '../remote/memory-storage.js';

/** Where chrome.identity would send the browser back to. */
const REDIRECT_URI = 'https://conformance.chromiumapp.org/oauth';

/** The Client ID Metadata Document URL the suite's basic-cimd scenario expects. */
const CLIENT_METADATA_URL = 'https://conformance-test.local/client-metadata.json';

const serverUrl = process.argv.at(-1);
const scenario = process.env.MCP_CONFORMANCE_SCENARIO || '';
let context = {};
try {
  context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT || '{}');
} catch {
  context = {};
}

function log(level, msg, fields = {}) {
  process.stderr.write(`${level} ${msg} ${JSON.stringify(fields)}\n`);
}

const platform = {
  fetch: (url, init) => fetch(url, init),
  now: () => Date.now(),
  storage: memoryStorage(),
  redirectUri: REDIRECT_URI,
  randomBytes: (n) => new Uint8Array(randomBytes(n)),
  sha256: async (bytes) => new Uint8Array(createHash('sha256').update(bytes).digest()),
  log,
  developerMode: true,
  resolve: async (host) => (await lookup(host, { all: true })).map((a) => a.address),
  clientMetadataUrl: CLIENT_METADATA_URL,
  clientInfo: { name: 'browser-bridge-conformance', version: '0.1.0' },
  async launchWebAuthFlow({ url }) {
    let next = url;
    for (let hop = 0; hop < 10; hop++) {
      const res = await fetch(next, { redirect: 'manual' });
      await res.body?.cancel();
      const location = res.headers.get('location');
      if (!location) throw new Error(`the authorization server answered HTTP ${res.status} without a redirect`);
      const target = new URL(location, next).href;
      if (target.startsWith(REDIRECT_URI)) return target;
      next = target;
    }
    throw new Error('too many redirects');
  },
};

async function main() {
  if (process.env.NODE_TEST_CONTEXT && !/^https?:/.test(serverUrl || '')) {
    // `node --test extension/test/` runs every script under test/, this one
    // too, with no server: it is the suite's client, not a test.
    return 0;
  }
  if (!serverUrl || !/^https?:/.test(serverUrl)) {
    log('error', 'usage: client.mjs <server-url>');
    return 2;
  }
  const config = { id: 'conformance', url: serverUrl };
  if (typeof context.client_id === 'string' && context.client_id) {
    config.clientId = context.client_id;
    if (typeof context.client_secret === 'string' && context.client_secret) config.clientSecret = context.client_secret;
  }
  const server = new RemoteServer(config, platform, {
    onChange: (s) => log('info', `state ${s.state}`, { message: s.message }),
  });
  log('info', 'scenario', { scenario, url: serverUrl });
  await server.signIn();
  if (server.state !== 'connected') {
    log('error', 'not connected', { state: server.state, message: server.message });
    return 1;
  }
  const tool = server.tools[0];
  if (tool) {
    const result = await server.callTool(tool.name, {}, { interactive: true });
    process.stdout.write(`${JSON.stringify({ tool: tool.name, result })}\n`);
  }
  await server.disconnect();
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    log('error', 'failed', { category: err?.category, message: err?.message || String(err) });
    process.exit(1);
  },
);
