// Remote MCP servers on the worker's side (sw/remote.js): the list the bridge
// sees, tool calls and their errors, token refresh alarms, recovery after a
// worker restart, remote.changed, the options page's requests, and the MCP
// Apps bridge of apps.js. A fake RemoteServer stands for remote/client.js.
import { test, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeChrome } from './fake-chrome.js';
import * as remote from '../sw/remote.js';
import { workTracker } from './remote/work.js';
import * as rpc from '../sw/rpc.js';
import { checkUrl } from '../remote/ssrf.js';
import { checkAppMessage, createAppBridge } from '../apps.js';

const HOUR = 3600_000;
const TOOLS = [
  { name: 'search', description: 'Search pages', inputSchema: { type: 'object' } },
  { name: 'create_page', description: 'Create a page', inputSchema: { type: 'object' } },
  {
    name: 'show_chart',
    description: 'A chart',
    inputSchema: { type: 'object' },
    _meta: { ui: { resourceUri: 'ui://charts/main' } },
  },
];

class RemoteError extends Error {
  constructor(category, message) {
    super(message);
    this.category = category;
  }
}

/**
 * A RemoteServer with the contract of remote/client.js. What connect does
 * comes from FakeServer.plan[id] (default: connected with TOOLS); everything
 * it is asked is recorded.
 */
class FakeServer {
  static instances = [];
  static plan = {};
  constructor(config, platform, { onChange } = {}) {
    this.config = config;
    this.platform = platform;
    this.onChange = onChange;
    this._state = 'disconnected';
    this._message = '';
    this._tools = [];
    this.expiry = 0;
    this.calls = [];
    this.log = [];
    FakeServer.instances.push(this);
  }
  get state() {
    return this._state;
  }
  get message() {
    return this._message;
  }
  get tools() {
    return this._tools;
  }
  set(state, message = '', tools = this._tools) {
    this._state = state;
    this._message = message;
    this._tools = tools;
    this.onChange?.();
  }
  async connect({ interactive = false } = {}) {
    this.log.push(`connect ${interactive}`);
    const plan = FakeServer.plan[this.config.id];
    if (plan?.connect) return plan.connect(this);
    this.set('connecting');
    this.set('connected', '', TOOLS);
  }
  async signIn() {
    this.log.push('signIn');
    this.expiry = Date.now() + HOUR;
    this.set('authenticated');
  }
  async callTool(name, args, opts = {}) {
    this.calls.push({ name, args, meta: opts.meta });
    const plan = FakeServer.plan[this.config.id];
    if (plan?.callTool) return plan.callTool(this, name, args);
    if (name === 'show_chart') {
      return { content: [{ type: 'text', text: 'chart' }], _meta: { ui: { resourceUri: 'ui://charts/main' } } };
    }
    return { content: [{ type: 'text', text: `${this.config.id} ${name} ${JSON.stringify(args)}` }] };
  }
  async readResource(uri) {
    this.log.push(`read ${uri}`);
    return { contents: [{ uri, mimeType: 'text/html;profile=mcp-app', text: '<p>app</p>' }] };
  }
  async refreshToken() {
    this.log.push('refresh');
    const plan = FakeServer.plan[this.config.id];
    if (plan?.refreshToken) return plan.refreshToken(this);
    this.expiry = Date.now() + 2 * HOUR;
    this.onChange?.();
  }
  tokenExpiry() {
    return this.expiry;
  }
  async disconnect() {
    this.log.push('disconnect');
    this.set('disconnected');
  }
  async signOut() {
    this.log.push('signOut');
    this.expiry = 0;
    this._tools = [];
    this.set('needs-auth', 'Sign in to use this server.');
  }
}

let fake;
let notes;
let managers = [];
const manager = () => {
  const work = workTracker();
  const mgr = new remote.RemoteManager({ RemoteServer: FakeServer, notify: (m) => notes.push(m), onWork: work.onWork });
  mgr.idle = work.idle; // the test's, not the extension's (test/remote/work.js)
  managers.push(mgr);
  return mgr;
};
const setConfig = (c) => chrome.storage.local.set({ [remote.CONFIG_KEY]: c });
const config = async () => (await chrome.storage.local.get(remote.CONFIG_KEY))[remote.CONFIG_KEY];
const live = (id) => FakeServer.instances.filter((s) => s.config.id === id).at(-1);

beforeEach(() => {
  fake = installFakeChrome();
  notes = [];
  managers = [];
  FakeServer.instances = [];
  FakeServer.plan = {};
});

// A test's managers finish their background work (state records, a pending
// remote.changed) before the next test's fake chrome and notes replace its own.
afterEach(() => Promise.all(managers.map((m) => m.idle())));

test('slugs and names are DNS labels, unique and at most 63 characters', () => {
  assert.equal(remote.slug('My Server_1!'), 'my-server-1');
  assert.equal(remote.slug('---'), 'server');
  assert.equal(remote.slug('x'.repeat(80)).length, 63);
  const names = remote.serverNames([
    { id: 'Notion' },
    { id: 'notion' },
    { id: 'NOTION!' },
    { id: 'y'.repeat(70) },
    { id: 'y'.repeat(64) },
  ]);
  assert.deepEqual([...names.values()].slice(0, 3), ['notion', 'notion-2', 'notion-3']);
  for (const n of names.values()) assert.match(n, /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/);
  assert.equal(new Set(names.values()).size, 5);
});

test('remote.list has the enabled servers only, without the tools turned off', async () => {
  await setConfig({
    custom: [
      { id: 'acme', title: 'Acme', url: 'https://mcp.acme.dev/mcp' },
      { id: 'off', title: 'Off', url: 'https://off.example/mcp' },
    ],
    enabled: { notion: true, acme: true },
    disabledTools: { notion: ['create_page'] },
  });
  const mgr = manager();
  const first = await mgr.list();
  assert.deepEqual(
    first.servers.map((s) => s.name),
    ['notion', 'acme'],
  );
  await mgr.idle();
  const { servers } = await mgr.list();
  const notion = servers.find((s) => s.name === 'notion');
  assert.equal(notion.title, 'Notion');
  assert.equal(notion.url, 'https://mcp.notion.com/mcp');
  assert.equal(notion.state, 'connected');
  assert.deepEqual(
    notion.tools.map((t) => t.name),
    ['search', 'show_chart'],
  );
  assert.deepEqual(
    servers.find((s) => s.name === 'acme').tools.map((t) => t.name),
    ['search', 'create_page', 'show_chart'],
  );
  assert.deepEqual(
    FakeServer.instances.map((s) => s.config.id).sort(),
    ['acme', 'notion'],
    'a disabled server was started',
  );
  assert.deepEqual(live('notion').log, ['connect false'], 'connected interactively, or twice');
});

test('a custom server gets its headers and scopes; the platform keeps its keys under its prefix', async () => {
  const mgr = manager();
  await assert.rejects(mgr.pageMessage({ type: 'remote.addServer', url: 'http://mcp.acme.dev/mcp' }), /https/);
  const { id } = await mgr.pageMessage({
    type: 'remote.addServer',
    url: 'https://mcp.acme.dev/mcp',
    headers: 'X-Api-Key: k1\n\nX-Team: t',
    scopes: 'read, write read',
  });
  assert.equal(id, 'acme');
  await mgr.idle();
  const srv = live('acme');
  assert.deepEqual(srv.config, {
    id: 'acme',
    url: 'https://mcp.acme.dev/mcp',
    headers: { 'X-Api-Key': 'k1', 'X-Team': 't' },
    scopes: ['read', 'write'],
  });
  assert.equal(srv.platform.redirectUri, `https://${chrome.runtime.id}.chromiumapp.org/oauth`);
  assert.equal(srv.platform.developerMode, false);
  await srv.platform.storage.set('tokens', { access_token: 'a' });
  assert.deepEqual((await chrome.storage.local.get('remote.auth.acme.tokens'))['remote.auth.acme.tokens'], {
    access_token: 'a',
  });
  assert.deepEqual(await srv.platform.storage.get('tokens'), { access_token: 'a' });
  assert.equal(srv.platform.randomBytes(16).length, 16);
  assert.equal((await srv.platform.sha256(new TextEncoder().encode('abc'))).length, 32);

  // The same host again gets another id; the same URL is refused.
  await assert.rejects(mgr.pageMessage({ type: 'remote.addServer', url: 'https://mcp.acme.dev/mcp' }), /already/);
  assert.equal((await mgr.pageMessage({ type: 'remote.addServer', url: 'https://mcp.acme.dev/other' })).id, 'acme-2');

  // Removing forgets its tokens and its switches; built-ins cannot be removed.
  await mgr.pageMessage({ type: 'remote.removeServer', id: 'acme' });
  assert.ok(srv.log.includes('signOut') && srv.log.includes('disconnect'));
  assert.deepEqual(
    Object.keys(await chrome.storage.local.get(null)).filter((k) => k.startsWith('remote.auth.acme.')),
    [],
  );
  assert.deepEqual(
    (await config()).custom.map((s) => s.id),
    ['acme-2'],
  );
  assert.ok(!('acme' in (await config()).enabled));
  await assert.rejects(mgr.pageMessage({ type: 'remote.removeServer', id: 'notion' }), /built in/);
});

test('developer mode allows http://localhost and 127.0.0.1, nothing else', async () => {
  const mgr = manager();
  await assert.rejects(
    mgr.pageMessage({ type: 'remote.addServer', url: 'http://localhost:8080/mcp' }),
    /developer mode/,
  );
  await mgr.pageMessage({ type: 'remote.setDeveloperMode', enabled: true });
  const { id } = await mgr.pageMessage({
    type: 'remote.addServer',
    url: 'http://127.0.0.1:8080/mcp',
    title: 'Local test',
  });
  assert.equal(id, 'local-test');
  assert.equal(live('local-test').platform.developerMode, true);
  await assert.rejects(
    mgr.pageMessage({ type: 'remote.addServer', url: 'http://192.168.1.2/mcp' }),
    /only for localhost/,
  );
});

test('addresses that remote/ssrf.js refuses at connect are refused when a server is added', async () => {
  const mgr = manager();
  for (const developerMode of [false, true]) {
    await mgr.pageMessage({ type: 'remote.setDeveloperMode', enabled: developerMode });
    for (const url of [
      'https://198.18.0.1/mcp',
      'https://224.0.0.1/mcp',
      'https://240.0.0.1/mcp',
      'https://[64:ff9b::a00:1]/mcp',
      'https://[2002:a00:1::1]/mcp',
    ]) {
      await assert.rejects(mgr.pageMessage({ type: 'remote.addServer', url }), /must be on the public internet/, url);
    }
  }
  assert.deepEqual((await config()).custom, []);
  assert.equal(FakeServer.instances.length, 0, 'a refused server was started');
});

test('validateServerUrl, parseHeaders and parseScopes refuse what they should', () => {
  const ok = [
    ['https://mcp.example.com/mcp', {}],
    ['https://8.8.8.8/mcp', {}],
    ['https://[2606:4700::1]/mcp', {}],
    ['https://[2002:808:808::1]/mcp', {}], // 6to4 of a public address
    ['http://localhost:3000/mcp', { developerMode: true }],
    ['http://127.0.0.1:3000/mcp', { developerMode: true }],
    ['http://[::1]:3000/mcp', { developerMode: true }],
    ['https://localhost/mcp', { developerMode: true }],
    ['https://127.0.0.5/mcp', { developerMode: true }],
    ['https://dev.localhost/mcp', { developerMode: true }],
  ];
  for (const [u, o] of ok) assert.doesNotThrow(() => remote.validateServerUrl(u, o), u);
  const bad = [
    ['ftp://x.example/', {}, /https/],
    ['not a url', {}, /not a URL/],
    ['http://localhost/mcp', {}, /https/],
    ['http://127.0.0.2/mcp', { developerMode: true }, /only for localhost/],
    ['https://localhost/mcp', {}, /developer mode/],
    ['https://127.0.0.1/mcp', {}, /developer mode/],
    ['https://[::1]/mcp', {}, /developer mode/],
    ['https://user:pw@x.example/mcp', {}, /credentials/],
    ['https://x.example/mcp#frag', {}, /fragment/],
    ['https://metadata.google.internal/', {}, /metadata/],
    ['https://intranet/mcp', {}, /local network name/],
    ['https://wiki.corp/mcp', {}, /private network name/],
  ];
  for (const [u, o, re] of bad) assert.throws(() => remote.validateServerUrl(u, o), re, u);

  // Every range remote/ssrf.js refuses at connect is refused when the server
  // is added, in developer mode too (which allows loopback only).
  const ranges = [
    ['https://10.1.2.3/mcp', /private network address \(10\.0\.0\.0\/8\)/],
    ['https://172.20.0.1/mcp', /private network address \(172\.16\.0\.0\/12\)/],
    ['https://192.168.1.2/mcp', /private network address/],
    ['https://100.64.0.1/mcp', /carrier-grade NAT/],
    ['https://169.254.169.254/latest', /cloud metadata address/],
    ['https://169.254.10.1/mcp', /link-local/],
    ['https://0.0.0.0/mcp', /this network/],
    ['https://192.0.0.8/mcp', /IETF protocol/],
    ['https://198.18.0.1/mcp', /benchmarking address \(198\.18\.0\.0\/15\)/],
    ['https://198.19.255.254/mcp', /benchmarking/],
    ['https://224.0.0.251/mcp', /multicast address \(224\.0\.0\.0\/4\)/],
    ['https://239.255.255.250/mcp', /multicast/],
    ['https://240.0.0.1/mcp', /reserved address \(240\.0\.0\.0\/4\)/],
    ['https://255.255.255.255/mcp', /reserved/],
    ['https://[64:ff9b::a00:1]/mcp', /private network address \(10\.0\.0\.0\/8\)/], // NAT64 of 10.0.0.1
    ['https://[64:ff9b::a9fe:a9fe]/mcp', /cloud metadata address/], // NAT64 of 169.254.169.254
    ['https://[2002:c0a8:102::1]/mcp', /private network address \(192\.168/], // 6to4 of 192.168.1.2
    ['https://[2002:c612:1::1]/mcp', /benchmarking/], // 6to4 of 198.18.0.1
    ['https://[::ffff:10.0.0.1]/mcp', /private network address/], // IPv4-mapped
    ['https://[fd00::1]/mcp', /unique local address/],
    ['https://[fe80::1]/mcp', /link-local/],
    ['https://[ff02::1]/mcp', /multicast/],
    ['https://[fd00:ec2::254]/mcp', /cloud metadata/],
  ];
  for (const developerMode of [false, true]) {
    for (const [u, re] of ranges) {
      assert.throws(() => remote.validateServerUrl(u, { developerMode }), re, `${u}, developerMode ${developerMode}`);
      assert.throws(() => remote.validateServerUrl(u, { developerMode }), /must be on the public internet/, u);
    }
  }

  // What the list accepts, the connect-time check accepts too.
  for (const [u, o] of ok) {
    assert.doesNotThrow(() => checkUrl(remote.validateServerUrl(u, o), { ...o, purpose: 'server' }), u);
  }

  assert.deepEqual(remote.parseHeaders('Authorization: Bearer a:b\n  \nX-A:1'), {
    Authorization: 'Bearer a:b',
    'X-A': '1',
  });
  assert.throws(() => remote.parseHeaders('no colon here'), /line 1/);
  assert.throws(() => remote.parseHeaders('Bad Name: x'), /not a valid header name/);
  assert.throws(() => remote.parseHeaders('X: 1\nMcp-Session-Id: 2'), /line 2.*set by Browser Bridge/);
  assert.deepEqual(remote.parseScopes(' a b,c  a '), ['a', 'b', 'c']);
  assert.throws(() => remote.parseScopes('ok "quoted"'), /not a valid OAuth scope/);
});

test('remote.call returns the result and strips the local _meta', async () => {
  await setConfig({ enabled: { notion: true } });
  const mgr = manager();
  const res = await mgr.call({
    server: 'notion',
    name: 'search',
    arguments: { q: 'x' },
    _meta: { 'browserbridge/session': { id: 'local-1', client: 'c' }, progressToken: 'local-1:4', trace: 't' },
  });
  assert.deepEqual(res, { content: [{ type: 'text', text: 'notion search {"q":"x"}' }] });
  assert.deepEqual(live('notion').calls[0].meta, { trace: 't' });
});

test('remote.call maps errors: unknown server and tools turned off are params errors, the rest -32000', async () => {
  await setConfig({
    enabled: { notion: true, linear: true, supabase: true },
    disabledTools: { notion: ['create_page'] },
  });
  FakeServer.plan.linear = { connect: async (s) => s.set('needs-auth', 'Linear needs a sign-in.') };
  FakeServer.plan.supabase = {
    connect: async (s) => s.set('connected', '', TOOLS),
    callTool: async () => {
      throw new RemoteError('network', 'the server did not answer within 30 s');
    },
  };
  const mgr = manager();
  const code = async (params, c, re) => {
    const err = await mgr.call(params).then(
      () => null,
      (e) => e,
    );
    assert.ok(err instanceof rpc.RpcError, `${JSON.stringify(params)}: ${err}`);
    assert.equal(err.code, c, err.message);
    assert.match(err.message, re);
  };
  await code(
    { server: 'nope', name: 'search' },
    -32602,
    /no enabled remote server is named "nope"; enabled: notion, linear, supabase/,
  );
  await code({ server: 'deepwiki', name: 'search' }, -32602, /no enabled remote server/);
  await code({ server: 'notion', name: 'create_page' }, -32602, /turned off/);
  await code({ server: 'notion', name: 'search', arguments: [1] }, -32602, /arguments/);
  await code(
    { server: 'linear', name: 'search' },
    -32000,
    /Linear needs you to sign in: open Browser Bridge's options page.*Linear needs a sign-in\./,
  );
  await code({ server: 'supabase', name: 'search' }, -32000, /^Supabase: the server did not answer within 30 s/);

  // A server that is down is tried once more, then reported.
  let tries = 0;
  FakeServer.plan.notion = {
    connect: async (s) => {
      tries++;
      s.set('error', 'mcp.notion.com answered 502.');
    },
  };
  await setConfig({ enabled: { notion: true } });
  const mgr2 = manager();
  const err = await mgr2.call({ server: 'notion', name: 'search' }).catch((e) => e);
  assert.equal(err.code, -32000);
  assert.match(err.message, /Notion is not connected \(error\)\. mcp\.notion\.com answered 502\./);
  assert.equal(tries, 2);
});

test('refresh alarms are set ahead of expiry, moved after a refresh and cleared on sign-out', async () => {
  await setConfig({ enabled: { notion: true } });
  const expiry = Date.now() + HOUR;
  FakeServer.plan.notion = {
    connect: async (s) => {
      s.expiry = expiry;
      s.set('connected', '', TOOLS);
    },
  };
  const mgr = manager();
  await mgr.list();
  await mgr.idle();
  const name = `${remote.REFRESH_ALARM_PREFIX}notion`;
  assert.deepEqual(fake.alarmsByName.get(name), { when: expiry - remote.REFRESH_AHEAD_MS });

  // Not ours: ignored.
  assert.equal(mgr.onAlarm({ name: 'native-reconnect' }), false);

  // The alarm fires after a worker restart: a new manager refreshes.
  FakeServer.plan.notion = {
    connect: async (s) => {
      s.expiry = Date.now() + 4 * 60_000;
      s.set('connected', '', TOOLS);
    },
  };
  const mgr2 = manager();
  assert.equal(mgr2.onAlarm({ name }), true);
  await mgr2.idle();
  const srv = live('notion');
  assert.deepEqual(srv.log, ['connect false', 'refresh']);
  const when = fake.alarmsByName.get(name).when;
  assert.ok(Math.abs(when - (srv.expiry - remote.REFRESH_AHEAD_MS)) < 1000, 'the alarm did not move to the new expiry');

  await mgr2.pageMessage({ type: 'remote.signOut', id: 'notion' });
  assert.ok(!fake.alarmsByName.has(name));
});

test('a failed refresh of a token that is still valid is retried a minute later', async () => {
  await setConfig({ enabled: { notion: true } });
  FakeServer.plan.notion = {
    connect: async (s) => {
      s.expiry = Date.now() + 2 * 60_000;
      s.set('connected', '', TOOLS);
    },
    refreshToken: async () => {
      throw new RemoteError('network', 'token endpoint unreachable');
    },
  };
  const mgr = manager();
  mgr.onAlarm({ name: `${remote.REFRESH_ALARM_PREFIX}notion` });
  await mgr.idle();
  const { when } = fake.alarmsByName.get(`${remote.REFRESH_ALARM_PREFIX}notion`);
  assert.ok(Math.abs(when - (Date.now() + remote.REFRESH_RETRY_MS)) < 1000);
});

test('a worker restart recovers the list, states and tools from storage', async () => {
  await setConfig({ enabled: { notion: true, context7: true }, disabledTools: { notion: ['search'] } });
  const before = manager();
  await before.list();
  await before.idle();
  const was = await before.list();

  // The new worker's servers are still connecting: the list is answered from storage at once.
  let connected;
  const connecting = new Promise((resolve) => {
    connected = resolve;
  });
  FakeServer.plan.notion = { connect: () => connecting };
  FakeServer.plan.context7 = { connect: () => connecting };
  const after = manager();
  const now = await after.list();
  assert.deepEqual(
    now.servers.map((s) => [s.name, s.tools.map((t) => t.name)]),
    was.servers.map((s) => [s.name, s.tools.map((t) => t.name)]),
  );
  assert.equal(now.servers[0].state, 'disconnected'); // the new instance has not said more yet
  assert.deepEqual(
    now.servers[0].tools.map((t) => t.name),
    ['create_page', 'show_chart'],
  );
  connected(); // so that the connects end and idle() can return
});

test('changes send remote.changed once per burst, and only when the list changes', async () => {
  await setConfig({ enabled: { notion: true } });
  FakeServer.plan.notion = {
    connect: async (s) => {
      await new Promise((r) => setTimeout(r, 5));
      s.set('connected', '', TOOLS);
    },
  };
  const mgr = manager();
  await mgr.list(); // the bridge asks; connected (with tools) follows
  await mgr.idle();
  assert.deepEqual(notes, ['remote.changed']);

  const srv = live('notion');
  srv.set('connected', '', TOOLS); // nothing new
  await mgr.idle();
  assert.deepEqual(notes, ['remote.changed']);

  srv.set('connected', '', [...TOOLS, { name: 'added', inputSchema: { type: 'object' } }]); // the remote's list_changed
  await mgr.idle();
  assert.equal(notes.length, 2);

  await mgr.pageMessage({ type: 'remote.setToolEnabled', id: 'notion', tool: 'added', enabled: false });
  await mgr.idle();
  assert.equal(notes.length, 3);
  assert.deepEqual((await config()).disabledTools, { notion: ['added'] });

  await mgr.pageMessage({ type: 'remote.setEnabled', id: 'linear', enabled: true });
  await mgr.idle();
  assert.equal(notes.length, 4);
  assert.deepEqual(
    (await mgr.list()).servers.map((s) => s.name),
    ['notion', 'linear'],
  );

  await mgr.pageMessage({ type: 'remote.setEnabled', id: 'notion', enabled: false });
  await mgr.idle();
  assert.equal(notes.length, 5);
  assert.ok(srv.log.includes('disconnect'));
  assert.deepEqual(
    (await mgr.list()).servers.map((s) => s.name),
    ['linear'],
  );
  assert.ok(!(await chrome.storage.session.get(remote.STATES_KEY))[remote.STATES_KEY].notion);
});

test('sign-in from the options page enables the server, signs in and connects', async () => {
  FakeServer.plan.notion = {
    connect: async (s) => (s.expiry ? s.set('connected', '', TOOLS) : s.set('needs-auth', 'Sign in to Notion.')),
  };
  const mgr = manager();
  const res = await mgr.pageMessage({ type: 'remote.signIn', id: 'notion' });
  assert.equal(res.state, 'connected');
  assert.deepEqual(live('notion').log, ['connect false', 'signIn', 'connect false']);
  assert.equal((await config()).enabled.notion, true);
  await mgr.idle();
  const st = await mgr.status();
  const notion = st.servers.find((s) => s.id === 'notion');
  assert.equal(notion.state, 'connected');
  assert.deepEqual(
    notion.tools.map((t) => [t.name, t.enabled, t.app]),
    [
      ['search', true, null],
      ['create_page', true, null],
      ['show_chart', true, 'ui://charts/main'],
    ],
  );
  assert.equal(st.servers.find((s) => s.id === 'linear').state, 'disabled');

  // Signing out of a disabled server uses a short-lived instance.
  await mgr.pageMessage({ type: 'remote.setEnabled', id: 'notion', enabled: false });
  const n = FakeServer.instances.length;
  await mgr.pageMessage({ type: 'remote.signOut', id: 'notion' });
  assert.equal(FakeServer.instances.length, n + 1);
  assert.deepEqual(live('notion').log, ['signOut']);
});

test('MCP Apps: the worker serves the ui:// resource with the last result, and app calls stay on their server', async () => {
  await setConfig({ enabled: { notion: true }, disabledTools: { notion: ['create_page'] } });
  const mgr = manager();
  await mgr.call({ server: 'notion', name: 'show_chart', arguments: {} });
  await mgr.idle();
  const app = await mgr.pageMessage({ type: 'remote.openApp', server: 'notion', uri: 'ui://charts/main' });
  assert.equal(app.html, '<p>app</p>');
  assert.deepEqual(app.toolResult.content, [{ type: 'text', text: 'chart' }]);
  await assert.rejects(
    mgr.pageMessage({ type: 'remote.openApp', server: 'notion', uri: 'https://evil.example/' }),
    /ui:\/\//,
  );
  const res = await mgr.pageMessage({ type: 'remote.appCall', server: 'notion', name: 'search', arguments: { q: 1 } });
  assert.match(res.content[0].text, /notion search/);
  await assert.rejects(
    mgr.pageMessage({ type: 'remote.appCall', server: 'notion', name: 'create_page' }),
    /turned off/,
  );
  await assert.rejects(
    mgr.pageMessage({ type: 'remote.appCall', server: 'linear', name: 'search' }),
    /No enabled remote server/,
  );
});

test('MCP Apps: the page bridge validates messages and answers tools/call and context/update', async () => {
  const cases = [
    ['not JSON-RPC', { id: 1, method: 'tools/call' }, -32600],
    ['id of a bad type', { jsonrpc: '2.0', id: {}, method: 'tools/call' }, -32600],
    ['unknown method', { jsonrpc: '2.0', id: 2, method: 'resources/read', params: { uri: 'x' } }, -32601],
    ['no tool name', { jsonrpc: '2.0', id: 3, method: 'tools/call', params: {} }, -32602],
    [
      'arguments not an object',
      { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'a', arguments: 'x' } },
      -32602,
    ],
  ];
  for (const [name, msg, code] of cases) assert.equal(checkAppMessage(msg).error?.code, code, name);
  assert.equal(
    checkAppMessage({ jsonrpc: '2.0', method: 'context/update', params: {} }).ignore,
    true,
    'notifications are not answered',
  );

  const posted = [];
  const called = [];
  const bridge = createAppBridge({
    post: (m) => posted.push(m),
    callTool: async (name, args) => {
      called.push([name, args]);
      if (name === 'fails') throw new Error('Notion: the tool failed.');
      return { content: [{ type: 'text', text: 'ok' }] };
    },
  });
  await bridge.receive({
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: { name: 'search', arguments: { q: 'a' } },
  });
  await bridge.receive({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'fails' } });
  await bridge.receive({ jsonrpc: '2.0', id: 3, method: 'context/update', params: { text: 'hi' } });
  await bridge.receive({ jsonrpc: '2.0', id: 4, method: 'nope' });
  await bridge.receive('garbage');
  assert.deepEqual(called, [
    ['search', { q: 'a' }],
    ['fails', {}],
  ]);
  assert.deepEqual(posted, [
    { jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: 'ok' }] } },
    { jsonrpc: '2.0', id: 2, error: { code: -32000, message: 'Notion: the tool failed.' } },
    { jsonrpc: '2.0', id: 3, result: { ok: true } },
    { jsonrpc: '2.0', id: 4, error: { code: -32601, message: 'method not available to MCP Apps: nope' } },
    { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'message is not a JSON-RPC 2.0 request' } },
  ]);
});
