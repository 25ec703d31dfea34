// The gate in tools.call and on the relay's methods (sw/gate.js) with the
// waiting calls, grants and pause of sw/approvals.js: a blocked call is a
// tool error that names the site, an ask waits for the popup's or the
// notification's answer (with progress meanwhile), times out, and pause
// ends what waits and refuses what comes.
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeChrome } from './fake-chrome.js';
import * as rpc from '../sw/rpc.js';
import * as tools from '../sw/tools.js';
import * as gate from '../sw/gate.js';
import * as approvals from '../sw/approvals.js';
import * as store from '../sw/store.js';
import coreTools from '../tools/core.js';
import updatePlan from '../tools/update_plan.js';

let fake;
let sent;
let ran;

const pageTool = (name) => ({
  name,
  description: `Stands for ${name}.`,
  inputSchema: { type: 'object', properties: { tabId: { type: 'integer' }, action: { type: 'string' } } },
  async run() {
    ran.push(name);
    return `${name} ran`;
  },
});

const flush = async () => {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
};

async function waitFor(cond, what) {
  for (let i = 0; i < 500; i++) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 2));
  }
  assert.fail(`never: ${what}`);
}

beforeEach(async () => {
  await tools.flushRecentCalls(); // the last test's, into its own storage
  fake = installFakeChrome();
  fake.storage.onChanged.addListener((c, area) => gate.onStorageChanged(c, area));
  gate.onStorageChanged({ policy: {} }, 'local');
  fake.notifications.onButtonClicked.addListener((id, b) => approvals.onNotificationButton(id, b));
  fake.notifications.onClosed.addListener((id, byUser) => approvals.onNotificationClosed(id, byUser));
  sent = [];
  ran = [];
  rpc.setTransport({ send: (m) => (sent.push(m), true), linkUp: () => true });
  rpc.register('tools/call', (p, ctx) => tools.call(p, ctx));
  tools.clear();
  tools.register(coreTools, updatePlan, ['read_page', 'form_input', 'javascript_tool', 'upload_image'].map(pageTool));
});

const LOCAL = { id: 'local-s1', client: 'Claude Code' };
let nextId = 0;

/** Starts a tools/call; returns a promise of its reply. */
function start(name, args = {}, { id = `local-s1:${++nextId}`, meta = { 'browserbridge/session': LOCAL } } = {}) {
  const done = rpc.receive({
    jsonrpc: '2.0',
    id,
    method: 'tools/call',
    params: { name, arguments: args, _meta: meta },
  });
  return done.then(() => sent.find((m) => m.id === id));
}

const text = (reply) => reply.result?.content?.[0]?.text ?? reply.error?.message;
const setPolicy = (p) => store.set('local', store.LOCAL.policy, p);
const pending = () => store.get('session', store.SESSION.approvals, []);

async function userTabIn(session, url) {
  const tab = fake.userTab(url);
  await flush();
  await rpc.receive({
    jsonrpc: '2.0',
    id: `${session.id}:tab${++nextId}`,
    method: 'tools/call',
    params: { name: 'tabs_context', arguments: {}, _meta: { 'browserbridge/session': session } },
  });
  return tab.id;
}

test('under the default policy every call runs, with no approval and no tab lookup', async () => {
  const tab = await userTabIn(LOCAL, 'https://bank.example/');
  let gets = 0;
  const get = fake.tabs.get;
  fake.tabs.get = (...a) => (gets++, get(...a));
  for (const name of ['read_page', 'form_input', 'javascript_tool', 'upload_image']) {
    const r = await start(name, { tabId: tab });
    assert.equal(r.result.isError, undefined, text(r));
  }
  assert.deepEqual(ran, ['read_page', 'form_input', 'javascript_tool', 'upload_image']);
  assert.equal(gets, 0);
  assert.deepEqual(await pending(), []);
});

test('a blocked call is a tool error naming the site, the class and the rule; the tool does not run', async () => {
  await setPolicy({ sites: [{ pattern: '*.bank.example', read: 'allow', act: 'block', script: 'block' }] });
  const tab = await userTabIn(LOCAL, 'https://www.bank.example/account');
  const r = await start('form_input', { tabId: tab });
  assert.equal(r.result.isError, true);
  assert.match(
    text(r),
    /blocks form_input \(act\) on https:\/\/www\.bank\.example: the rule for "\*\.bank\.example" says act = block/,
  );
  assert.deepEqual(ran, []);
  assert.equal((await start('read_page', { tabId: tab })).result.isError, undefined);
  // navigate is act on its destination, before any tab moves.
  const nav = await start('navigate', { url: 'https://pay.bank.example/' });
  assert.match(text(nav), /blocks navigate \(act\) on https:\/\/pay\.bank\.example/);
  assert.equal(fake.tabsById.size, 1, 'no tab was opened for a blocked navigate');
  // The refusal is in the popup's recent calls: an audit trail.
  await tools.flushRecentCalls();
  const calls = await store.get('session', store.SESSION.recentCalls, []);
  assert.ok(calls.some((c) => c.tool === 'form_input' && !c.ok && /blocks/.test(c.error)));
});

test('internal pages stay blocked', async () => {
  const r = await start('navigate', { url: 'chrome://settings' });
  assert.match(text(r), /never lets agents act on browser-internal pages/);
});

for (const [answer, how] of [
  ['once', 'the popup'],
  ['deny', 'the popup'],
  ['once', 'the notification'],
  ['deny', 'the notification'],
]) {
  test(`an ask waits, with a badge, a notification and progress, until ${how} answers ${answer}`, async () => {
    await setPolicy({ unlisted: 'ask' });
    const tab = await userTabIn(LOCAL, 'https://shop.example/');
    const reply = start(
      'form_input',
      { tabId: tab },
      { meta: { 'browserbridge/session': LOCAL, progressToken: 'p1' } },
    );
    await waitFor(async () => (await pending()).length === 1, 'the call waits');
    const [rec] = await pending();
    assert.deepEqual(
      [rec.tool, rec.cls, rec.site, rec.client, rec.remote],
      ['form_input', 'act', 'https://shop.example', 'Claude Code', false],
    );
    assert.equal(fake.badge.text, '1');
    const note = fake.notificationsById.get(`approval:${rec.id}`);
    assert.deepEqual(
      note.buttons.map((b) => b.title),
      ['Allow once', 'Allow https://shop.example for Claude Code'],
    );
    const progress = sent.find((m) => m.method === 'notifications/progress');
    assert.equal(progress.params.progressToken, 'p1');
    assert.match(
      progress.params.message,
      /Waiting for the person to approve form_input \(act\) on https:\/\/shop\.example/,
    );
    assert.deepEqual(ran, []);
    if (how === 'the popup') {
      assert.equal(await approvals.answer(rec.id, answer), true);
    } else if (answer === 'once') {
      fake.notifications.onButtonClicked.dispatch(`approval:${rec.id}`, 0);
    } else {
      fake.notifications.onClosed.dispatch(`approval:${rec.id}`, true);
    }
    const r = await reply;
    if (answer === 'once') {
      assert.equal(r.result.isError, undefined, text(r));
      assert.deepEqual(ran, ['form_input']);
    } else {
      assert.match(text(r), /The person denied form_input \(act\) on https:\/\/shop\.example/);
      assert.deepEqual(ran, []);
    }
    assert.deepEqual(await pending(), []);
    assert.equal(fake.badge.text, '');
    assert.equal(fake.notificationsById.size, 0);
    // Allowed once is once: the next call asks again.
    start('form_input', { tabId: tab });
    await waitFor(async () => (await pending()).length === 1, 'the next call asks again');
    await approvals.pause();
    await approvals.resume();
  });
}

test('an ask times out with a tool error', async () => {
  await setPolicy({ unlisted: 'ask', timeoutMs: 1000 });
  const tab = await userTabIn(LOCAL, 'https://slow.example/');
  const t0 = Date.now();
  const r = await start('read_page', { tabId: tab });
  assert.ok(Date.now() - t0 >= 990);
  assert.match(text(r), /Nobody approved read_page \(read\) on https:\/\/slow\.example within 1 s/);
  assert.deepEqual(await pending(), []);
});

test('"allow this site for this client" grants the site to that client only', async () => {
  await setPolicy({ unlisted: 'ask' });
  const tab = await userTabIn(LOCAL, 'https://mail.example/');
  const first = start('form_input', { tabId: tab });
  await waitFor(async () => (await pending()).length === 1, 'the call waits');
  fake.notifications.onButtonClicked.dispatch(`approval:${(await pending())[0].id}`, 1);
  assert.equal((await first).result.isError, undefined);
  // The same client, another session: no question now, for reading too.
  const other = { id: 'local-s2', client: 'Claude Code' };
  for (const name of ['form_input', 'read_page']) {
    const r = await start(
      name,
      { tabId: tab },
      { id: `local-s2:${++nextId}`, meta: { 'browserbridge/session': other } },
    );
    assert.equal(r.result.isError, undefined, name);
  }
  // Another client is still asked.
  const cursor = { id: 'local-s3', client: 'Cursor' };
  start('read_page', { tabId: tab }, { id: `local-s3:${++nextId}`, meta: { 'browserbridge/session': cursor } });
  await waitFor(async () => (await pending()).some((p) => p.client === 'Cursor'), 'Cursor is asked');
  await approvals.pause();
  await approvals.resume();
});

test('pause ends the waiting calls and refuses new ones until resume; the shortcut toggles it', async () => {
  await setPolicy({ unlisted: 'ask' });
  const tab = await userTabIn(LOCAL, 'https://a.example/');
  const waiting = start('read_page', { tabId: tab });
  await waitFor(async () => (await pending()).length === 1, 'the call waits');
  await approvals.pause();
  assert.match(
    text(await waiting),
    /paused all agents in Browser Bridge while read_page \(read\) on https:\/\/a\.example waited/,
  );
  assert.equal(fake.badge.text, '||');
  const r = await start('tabs_context');
  assert.match(text(r), /The person paused all agents in Browser Bridge, so tabs_context was not run/);
  await approvals.togglePause();
  assert.equal((await start('tabs_context')).result.isError, undefined);
  await approvals.togglePause();
  assert.match(text(await start('tabs_context')), /paused/);
  await approvals.resume();
});

test("the organization's policy (chrome.storage.managed) wins, and the gate follows its changes", async () => {
  // background.js passes every storage change, the managed area's too, to the gate and to approvals.
  fake.storage.onChanged.addListener((c, area) => {
    if (area === 'managed') approvals.onManagedChanged();
  });
  await setPolicy({ sites: [{ pattern: 'corp.example', read: 'allow', act: 'allow', script: 'allow' }] });
  const tab = await userTabIn(LOCAL, 'https://corp.example/');
  assert.equal((await start('javascript_tool', { tabId: tab })).result.isError, undefined);
  // IT pushes a rule: it is consulted before the person's, from the next call on.
  await fake.storage.managed.set({ sites: [{ pattern: '*.example', read: 'allow', act: 'allow', script: 'block' }] });
  assert.match(
    text(await start('javascript_tool', { tabId: tab })),
    /The organization's site policy blocks javascript_tool \(script\) on https:\/\/corp\.example: its rule for "\*\.example"/,
  );
  // IT asks on every site: a waiting call; then IT pauses agents, which ends it.
  await fake.storage.managed.set({ sites: [], unlisted: 'ask' });
  const other = await userTabIn(LOCAL, 'https://elsewhere.test/');
  const waiting = start('read_page', { tabId: other });
  await waitFor(async () => (await pending()).length === 1, 'the call waits under the managed ask');
  await fake.storage.managed.set({ paused: true });
  assert.match(
    text(await waiting),
    /The person's organization paused all agents in Browser Bridge \(a managed policy\), so read_page/,
  );
  await waitFor(() => fake.badge.text === '||', 'the badge says paused');
  assert.match(
    text(await start('tabs_context')),
    /The person's organization paused all agents in Browser Bridge \(a managed policy\)/,
  );
  // The person can neither resume nor toggle it off.
  await assert.rejects(approvals.resume(), /Your organization paused agents/);
  await approvals.togglePause();
  assert.match(text(await start('tabs_context')), /organization paused/);
  const audit = await import('../sw/audit.js');
  await audit.flush();
  const last = (await store.get('local', store.LOCAL.audit, [])).at(-1);
  assert.deepEqual([last.tool, last.decision, last.why], ['tabs_context', 'paused', 'pausedByOrganization']);
  await fake.storage.managed.remove(['paused', 'sites', 'unlisted']);
  assert.equal((await start('tabs_context')).result.isError, undefined);
});

test('remote clients: marked by the request id, act scope by default, no borrowing a local session', async () => {
  const tab = await userTabIn(LOCAL, 'https://a.example/');
  // A relay call that names a local session in its _meta is still the relay connection's, and remote.
  const r = await start(
    'javascript_tool',
    { tabId: tab },
    { id: 'conn-xyz:1', meta: { 'browserbridge/session': LOCAL } },
  );
  assert.match(
    text(r),
    /javascript_tool needs the full \(scripts, uploads, dev tools\) scope, and Claude Code \(remote\) has the read and act scope/,
  );
  assert.equal((await start('form_input', { tabId: tab }, { id: 'conn-xyz:2', meta: {} })).result.isError, undefined);
  const recs = await store.get('session', store.SESSION.sessions, {});
  assert.ok(recs['conn-xyz'], 'the relay connection has its own session');
  // The person gives remote clients the full scope.
  await setPolicy({ scopes: { 'remote:relay': 'full' } });
  const meta = { 'browserbridge/session': { id: 'conn-xyz', client: 'relay', remote: true } };
  assert.equal((await start('javascript_tool', { tabId: tab }, { id: 'conn-xyz:3', meta })).result.isError, undefined);
});

test("the relay's direct methods cross the same gate", async () => {
  const calls = [];
  const guarded = gate.guardRelay(
    { forwardCDPCommand: async () => calls.push('cdp'), click: async () => calls.push('click') },
    rpc.RpcError,
  );
  const ctx = { session: { id: 'conn-q', client: 'relay conn-q' }, signal: new AbortController().signal };
  await assert.rejects(guarded.forwardCDPCommand({ method: 'Runtime.evaluate' }, ctx), (e) => {
    assert.equal(e.code, -32000);
    assert.match(e.message, /forwardCDPCommand needs the full .* scope, and relay \(remote\)/);
    return true;
  });
  await guarded.click({ x: 1, y: 1 }, ctx);
  assert.deepEqual(calls, ['click']);
  await approvals.pause();
  await assert.rejects(guarded.click({ x: 1, y: 1 }, ctx), /paused all agents/);
  await approvals.resume();
});

test('an approved plan grants its sites to that session; a denied one grants nothing', async () => {
  await setPolicy({ unlisted: 'ask' });
  const tab = await userTabIn(LOCAL, 'https://docs.example/');
  const plan = start('update_plan', {
    plan: [{ step: 'Read the docs', status: 'pending' }],
    domains: ['docs.example'],
  });
  await waitFor(async () => (await pending()).length === 1, 'the plan waits');
  const [rec] = await pending();
  assert.deepEqual([rec.cls, rec.site], ['plan', 'docs.example']);
  await approvals.answer(rec.id, 'once');
  assert.equal((await plan).result.isError, undefined);
  for (const name of ['read_page', 'form_input']) {
    assert.equal((await start(name, { tabId: tab })).result.isError, undefined, name);
  }
  // Scripts were not in the plan's grant.
  start('javascript_tool', { tabId: tab });
  await waitFor(async () => (await pending()).some((p) => p.tool === 'javascript_tool'), 'a script still asks');
  await approvals.pause();
  await approvals.resume();
  // Another session of the same client has no grant from this plan.
  const other = { id: 'local-s9', client: 'Claude Code' };
  start('read_page', { tabId: tab }, { id: `local-s9:${++nextId}`, meta: { 'browserbridge/session': other } });
  await waitFor(async () => (await pending()).some((p) => p.session === 'local-s9'), 'another session is asked');
  const [deny] = (await pending()).filter((p) => p.session === 'local-s9');
  await approvals.answer(deny.id, 'deny');
  const denied = start(
    'update_plan',
    { plan: [{ step: 'x', status: 'pending' }], domains: ['x.example'] },
    {
      id: `local-s9:${++nextId}`,
      meta: { 'browserbridge/session': other },
    },
  );
  await waitFor(async () => (await pending()).some((p) => p.cls === 'plan'), 'the second plan waits');
  await approvals.answer((await pending()).find((p) => p.cls === 'plan').id, 'deny');
  assert.match(text(await denied), /did not approve the plan \(sites: x\.example\)/);
});

test('a stale record (its worker is gone) is dropped at start and when answered', async () => {
  await store.set('session', store.SESSION.approvals, [{ id: 'old', tool: 'find', cls: 'read', site: 'x' }]);
  assert.equal(await approvals.answer('old', 'once'), false);
  assert.deepEqual(await pending(), []);
  await store.set('session', store.SESSION.approvals, [{ id: 'old2', tool: 'find', cls: 'read', site: 'x' }]);
  await approvals.clearStale();
  assert.deepEqual(await pending(), []);
});

test('irreversible clicks ask on allowed sites when the person turned that on', async () => {
  await setPolicy({ confirmIrreversible: true });
  const tab = await userTabIn(LOCAL, 'https://shop.example/');
  tools.register(pageTool('computer'));
  fake.scripting.executeScript = async () => [{ frameId: 0, result: { text: 'Place order', download: false } }];
  const click = start('computer', { action: 'left_click', tabId: tab, coordinate: [10, 10] });
  await waitFor(async () => (await pending()).length === 1, 'the click waits');
  const [rec] = await pending();
  assert.equal(rec.why, 'irreversible');
  assert.match(fake.notificationsById.get(`approval:${rec.id}`).title, /irreversible/);
  await approvals.answer(rec.id, 'once');
  assert.equal((await click).result.isError, undefined);
  fake.scripting.executeScript = async () => [{ frameId: 0, result: { text: 'Next page', download: false } }];
  assert.equal(
    (await start('computer', { action: 'left_click', tabId: tab, coordinate: [10, 10] })).result.isError,
    undefined,
  );
});
