// A tab group per MCP session: distinct groups and colours, current tabs,
// adoption, no fighting over active tabs, session.ended (ungroup or close),
// and state kept in chrome.storage.session.
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeChrome } from './fake-chrome.js';
import * as sessions from '../sw/sessions.js';
import * as rpc from '../sw/rpc.js';

let fake;
const A = { id: 'local-a', client: 'Claude Code' };
const B = { id: 'local-b', client: 'Cursor' };
const flush = async () => {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
};
const stored = async () => (await chrome.storage.session.get('sessions')).sessions || {};

beforeEach(() => {
  fake = installFakeChrome();
  sessions.reconcile({}); // a bridge that does not name itself, as before each test's own hello
  fake.tabs.onRemoved.addListener((id) => sessions.onTabRemoved(id));
  fake.tabGroups.onRemoved.addListener((g) => sessions.onGroupRemoved(g));
});

test('two sessions get two groups with distinct colours, titled with the client', async () => {
  const [ta, tb] = await Promise.all([
    sessions.createTab(A, 'https://a.example/'),
    sessions.createTab(B, 'https://b.example/'),
  ]);
  const ga = fake.groupsById.get(fake.tabsById.get(ta.id).groupId);
  const gb = fake.groupsById.get(fake.tabsById.get(tb.id).groupId);
  assert.ok(ga && gb);
  assert.notEqual(ga.id, gb.id);
  assert.equal(ga.title, 'Claude Code');
  assert.equal(gb.title, 'Cursor');
  assert.notEqual(ga.color, gb.color);
  assert.ok(sessions.COLORS.includes(ga.color) && sessions.COLORS.includes(gb.color));

  // A second tab of A joins A's group; no third group appears.
  const ta2 = await sessions.createTab(A, 'https://a2.example/');
  assert.equal(fake.tabsById.get(ta2.id).groupId, ga.id);
  assert.equal(fake.groupsById.size, 2);

  const recs = await stored();
  assert.equal(recs['local-a'].groupId, ga.id);
  assert.equal(recs['local-a'].currentTabId, ta2.id);
  assert.equal(recs['local-b'].color, gb.color);
});

test('sessions never take the active tab from another session', async () => {
  const ta = await sessions.createTab(A, 'https://a.example/');
  assert.equal(fake.tabsById.get(ta.id).active, true);
  const tb = await sessions.createTab(B, 'https://b.example/');
  // A's tab is still the active one in its window; B works in a window of its own.
  assert.equal(fake.tabsById.get(ta.id).active, true);
  assert.notEqual(fake.tabsById.get(tb.id).windowId, fake.tabsById.get(ta.id).windowId);
  // More tabs for B go to B's window; A's tab stays active.
  const tb2 = await sessions.createTab(B);
  assert.equal(fake.tabsById.get(tb2.id).windowId, fake.tabsById.get(tb.id).windowId);
  assert.equal(fake.tabsById.get(ta.id).active, true);
});

test('resolveTab: current tab, then another group tab; a new one only for the tools that open one', async () => {
  // No tab yet: the guiding error, and no tab or window opened to fail in.
  const before = { tabs: fake.tabsById.size, windows: fake.windowsById.size };
  await assert.rejects(
    sessions.resolveTab(A),
    (e) => e instanceof sessions.TabError && /no tab yet\. Call navigate with a url/.test(e.message),
  );
  assert.deepEqual(
    { tabs: fake.tabsById.size, windows: fake.windowsById.size },
    before,
    'resolveTab opened a tab for a session without one',
  );
  const t1 = await sessions.resolveTab(A, undefined, { create: true }); // navigate with a url: opens one in A's group
  assert.notEqual(fake.tabsById.get(t1.id).groupId, -1);
  assert.equal((await sessions.resolveTab(A)).id, t1.id);
  const t2 = await sessions.createTab(A, 'https://two.example/');
  assert.equal((await sessions.resolveTab(A)).id, t2.id);
  await chrome.tabs.remove(t2.id);
  await flush();
  assert.equal((await stored())['local-a'].currentTabId, null);
  assert.equal((await sessions.resolveTab(A)).id, t1.id);
  assert.deepEqual(
    (await sessions.sessionTabs(A)).map((t) => t.id),
    [t1.id],
  );
  // Its last tab closed: back to no tab, and again nothing is opened.
  await chrome.tabs.remove(t1.id);
  await flush();
  const n = fake.tabsById.size;
  await assert.rejects(sessions.resolveTab(A), sessions.TabError);
  assert.equal(fake.tabsById.size, n);
});

test("a named tab: ungrouped ones are adopted, other sessions' are left where they are", async () => {
  const user = fake.userTab();
  const got = await sessions.resolveTab(A, user.id);
  const groupA = (await stored())['local-a'].groupId;
  assert.equal(fake.tabsById.get(user.id).groupId, groupA);
  assert.equal(got.groupId, groupA);
  assert.equal((await stored())['local-a'].currentTabId, user.id);

  const tb = await sessions.createTab(B, 'https://b.example/');
  const groupB = fake.tabsById.get(tb.id).groupId;
  const other = await sessions.resolveTab(A, tb.id);
  assert.equal(other.id, tb.id);
  assert.equal(fake.tabsById.get(tb.id).groupId, groupB, "B's tab was moved");
  assert.equal((await stored())['local-a'].currentTabId, user.id, "B's tab became A's current tab");

  await assert.rejects(
    sessions.resolveTab(A, 9999),
    (e) => e instanceof sessions.TabError && /no tab with id 9999/.test(e.message),
  );
});

test('session.ended ungroups by default and forgets the session', async () => {
  const ta = await sessions.createTab(A, 'https://a.example/');
  const tb = await sessions.createTab(B, 'https://b.example/');
  rpc.setTransport({ send: () => true, linkUp: () => true });
  await rpc.receive({ jsonrpc: '2.0', method: 'session.ended', params: { session: 'local-a', client: 'Claude Code' } });
  await flush();
  assert.ok(fake.tabsById.has(ta.id), 'the tab was closed');
  assert.equal(fake.tabsById.get(ta.id).groupId, -1);
  assert.ok(!('local-a' in (await stored())));
  assert.notEqual(fake.tabsById.get(tb.id).groupId, -1, "B's tabs were touched");
  assert.ok('local-b' in (await stored()));
});

test('session.ended closes the tabs when the setting says so', async () => {
  await chrome.storage.local.set({ settings: { onSessionEnd: 'close' } });
  const ta = await sessions.createTab(A, 'https://a.example/');
  const ta2 = await sessions.createTab(A);
  const tb = await sessions.createTab(B);
  await sessions.sessionEnded('local-a');
  assert.ok(!fake.tabsById.has(ta.id) && !fake.tabsById.has(ta2.id));
  assert.ok(fake.tabsById.has(tb.id));
  await sessions.sessionEnded('local-unknown'); // harmless
});

test('a removed group is recreated on the next call, with a colour no other session has', async () => {
  const ta = await sessions.createTab(A);
  await sessions.createTab(B);
  await chrome.tabs.ungroup([ta.id]); // the user ungrouped it: the group goes away
  await flush();
  assert.equal((await stored())['local-a'].groupId, null);
  const again = await sessions.resolveTab(A);
  const rec = (await stored())['local-a'];
  assert.equal(again.id, ta.id);
  assert.notEqual(rec.groupId, null);
  assert.notEqual(rec.color, (await stored())['local-b'].color);
  assert.equal(fake.tabsById.get(ta.id).groupId, rec.groupId);
});

test('plans, activity and the session list live in storage', async () => {
  await sessions.createTab(A);
  await sessions.setPlan('local-a', { steps: ['open', 'read'] });
  await sessions.setActivity('local-a', { state: 'answering' });
  await sessions.setPlan('conn-xyz', 'relay plan'); // unknown sessions get a record
  const list = await sessions.listSessions();
  assert.deepEqual(list.map((s) => s.id).sort(), ['conn-xyz', 'local-a']);
  const a = list.find((s) => s.id === 'local-a');
  assert.deepEqual(a.plan, { steps: ['open', 'read'] });
  assert.deepEqual(a.activity, { state: 'answering' });
});

test('a touch is stored once the calls pause; the session list sorts by it before that', async () => {
  await sessions.createTab(A);
  await new Promise((r) => setTimeout(r, 5));
  await sessions.createTab(B); // B is the most recently active
  await sessions.flushActive();
  const before = (await stored())['local-a'].lastActive;
  await new Promise((r) => setTimeout(r, 5));
  await sessions.touch(A); // only lastActive changes: not written at once
  assert.equal((await stored())['local-a'].lastActive, before);
  assert.deepEqual(
    (await sessions.listSessions()).map((s) => s.id),
    ['local-a', 'local-b'],
  );
  await sessions.flushActive();
  assert.ok((await stored())['local-a'].lastActive > before);
});

// Reconciliation with the hello result (issue 12): the bridge lists the local
// sessions it still has; the others are released, never adopted.

const groupOf = (tabId) => fake.tabsById.get(tabId)?.groupId;

test('reconcile releases unlisted local sessions, keeps listed ones, and leaves relay sessions alone', async () => {
  const old = await sessions.createTab({ id: 'local-1', client: 'Inspector' }, 'https://old.example/');
  const live = await sessions.createTab({ id: 'local-2', client: 'Claude Code' }, 'https://live.example/');
  const relay = await sessions.createTab({ id: 'conn-abc', client: 'relay conn-abc' }, 'https://relay.example/');
  const liveGroup = groupOf(live.id);
  const relayGroup = groupOf(relay.id);

  const got = await sessions.reconcile({
    browserId: 'x',
    bridgeInstance: 'b1',
    sessions: [{ id: 'local-2', client: 'Claude Code' }],
  });
  assert.deepEqual(got, { released: ['local-1'], kept: ['local-2'] });
  await flush();
  const recs = await stored();
  assert.ok(!('local-1' in recs), 'the released session keeps a record');
  assert.ok(fake.tabsById.has(old.id), 'ungroup is the default, the tab was closed');
  assert.equal(groupOf(old.id), -1, "the dead session's tab is still grouped");
  assert.equal(groupOf(live.id), liveGroup, 'the listed session lost its group');
  assert.equal(recs['local-2'].groupId, liveGroup);
  assert.equal(
    recs['local-2'].bridgeInstance,
    'b1',
    'the listed session is not vouched for by the bridge that listed it',
  );
  assert.equal(groupOf(relay.id), relayGroup, 'a relay session was released by a local hello');
  assert.ok('conn-abc' in recs);

  // A new session that happens to reuse the released id (ids were once a
  // per-process counter) starts with a tab of its own, not the old one.
  await assert.rejects(
    sessions.resolveTab({ id: 'local-1', client: 'Cursor' }),
    sessions.TabError,
    'the new session was handed a tab',
  );
  const fresh = await sessions.resolveTab({ id: 'local-1', client: 'Cursor' }, undefined, { create: true });
  assert.notEqual(fresh.id, old.id, "the new session adopted the dead session's tab");
  assert.equal(groupOf(old.id), -1);
  assert.equal((await stored())['local-1'].bridgeInstance, 'b1');
});

test("a hello from another bridge process releases its relay connections' sessions, keeps keyed remote ones", async () => {
  await sessions.reconcile({ bridgeInstance: 'b1', sessions: [] });
  const conn = await sessions.createTab({ id: 'conn-0f3c', client: 'Cursor', remote: true }, 'https://conn.example/');
  const keyed = await sessions.createTab(
    { id: 'conn-kabc123', client: 'claude.ai', remote: true },
    'https://k.example/',
  );
  const keyedGroup = groupOf(keyed.id);

  // The worker restarted under the same bridge: nothing is released.
  assert.deepEqual(await sessions.reconcile({ bridgeInstance: 'b1', sessions: [] }), { released: [], kept: [] });
  assert.notEqual(groupOf(conn.id), -1, "the same bridge's relay connection lost its session's group");

  // Another bridge process: the old relay connection is gone for good.
  assert.deepEqual(await sessions.reconcile({ bridgeInstance: 'b2', sessions: [] }), {
    released: ['conn-0f3c'],
    kept: [],
  });
  assert.equal(groupOf(conn.id), -1, "the dead relay connection's tab is still grouped");
  assert.equal(groupOf(keyed.id), keyedGroup, 'a keyed remote session lost its group at a bridge restart');
  const recs = await stored();
  assert.ok(!('conn-0f3c' in recs) && 'conn-kabc123' in recs);

  // Its end, passed on by the relay from the proxy, releases it.
  await sessions.sessionEnded('conn-kabc123');
  assert.equal(groupOf(keyed.id), -1);
  assert.deepEqual(await stored(), {});
});

test('reconcile closes the released tabs when the setting says so', async () => {
  await chrome.storage.local.set({ settings: { onSessionEnd: 'close' } });
  const a = await sessions.createTab(A, 'https://a.example/');
  const a2 = await sessions.createTab(A);
  const b = await sessions.createTab(B);
  await sessions.reconcile({ bridgeInstance: 'b2', sessions: [{ id: 'local-b', client: 'Cursor' }] });
  assert.ok(!fake.tabsById.has(a.id) && !fake.tabsById.has(a2.id), "the dead session's tabs are open");
  assert.ok(fake.tabsById.has(b.id));
  assert.deepEqual(Object.keys(await stored()), ['local-b']);
});

test('a hello without a sessions field changes nothing; null is an empty list; garbage is ignored', async () => {
  const a = await sessions.createTab(A, 'https://a.example/');
  const group = groupOf(a.id);
  assert.equal(await sessions.reconcile({ browserId: 'x', bridgeVersion: 'old' }), null);
  assert.equal(await sessions.reconcile({ bridgeInstance: 'b3', sessions: 'local-a' }), null);
  assert.equal(groupOf(a.id), group, 'an older bridge released a session');
  assert.ok('local-a' in (await stored()));

  assert.deepEqual(await sessions.reconcile({ bridgeInstance: 'b3', sessions: null }), {
    released: ['local-a'],
    kept: [],
  });
  assert.equal(groupOf(a.id), -1);
  assert.deepEqual(await stored(), {});
});

test('a call right behind the hello waits for the reconciliation', async () => {
  const old = await sessions.createTab(A, 'https://a.example/');
  // Both start in the same tick, as when the bridge sends a call right behind
  // its hello reply: neither the dead session A nor the new session C may
  // end up with A's tab, and C's new record must survive.
  const C = { id: 'local-c', client: 'New client' };
  const reconciled = sessions.reconcile({ bridgeInstance: 'b4', sessions: [{ id: 'local-c', client: 'New client' }] });
  // Both are navigate calls (create): each session that has no tab gets a new one.
  const [forA, forC] = await Promise.all([
    sessions.resolveTab(A, undefined, { create: true }),
    sessions.resolveTab(C, undefined, { create: true }),
  ]);
  assert.deepEqual(await reconciled, { released: ['local-a'], kept: [] });
  await flush();
  assert.notEqual(forA.id, old.id, 'a call of the dead session got its old tab back');
  assert.notEqual(forC.id, old.id);
  assert.equal(groupOf(old.id), -1);
  const recs = await stored();
  assert.ok('local-c' in recs, "the new session's record was released");
  assert.equal(groupOf(forC.id), recs['local-c'].groupId);
});

test('a record another bridge process vouched for is released, not adopted, on its next call', async () => {
  await sessions.reconcile({ bridgeInstance: 'first', sessions: [] });
  const a = await sessions.createTab(A, 'https://a.example/');
  assert.equal((await stored())['local-a'].bridgeInstance, 'first');
  // A bridge that names its process but does not list sessions: it cannot
  // have seen local-a created, so local-a's tabs are not handed to it.
  await sessions.reconcile({ bridgeInstance: 'second' });
  const again = await sessions.resolveTab(A, undefined, { create: true });
  assert.notEqual(again.id, a.id, 'the session adopted a tab of another bridge process');
  assert.equal(groupOf(a.id), -1);
  assert.equal((await stored())['local-a'].bridgeInstance, 'second');
});

test('a call already under way when the hello arrives keeps a listed session its group', async () => {
  await sessions.reconcile({ bridgeInstance: 'first', sessions: [] });
  const a = await sessions.createTab(A, 'https://a.example/');
  const group = groupOf(a.id);
  // The call passed the gate before the new bridge's hello reply arrived (the
  // dead bridge sent it); the new bridge lists A, which survived the restart.
  const during = sessions.resolveTab(A);
  const reconciled = sessions.reconcile({
    bridgeInstance: 'second',
    sessions: [{ id: 'local-a', client: 'Claude Code' }],
  });
  const tab = await during;
  assert.deepEqual(await reconciled, { released: [], kept: ['local-a'] });
  await flush();
  assert.equal(tab.id, a.id, 'the surviving session lost its tab to a call of its own');
  assert.equal(groupOf(a.id), group, 'the surviving session lost its group');
  assert.equal((await stored())['local-a'].bridgeInstance, 'second');
});

test('the popup lists live sessions only, newest first', () => {
  const recs = {
    'local-old': { id: 'local-old', createdAt: 100, lastActive: 900, bridgeInstance: 'b1' },
    'local-new': { id: 'local-new', createdAt: 300, lastActive: 300, bridgeInstance: 'b1' },
    'local-mid': { id: 'local-mid', createdAt: 200, lastActive: 200, bridgeInstance: null },
    'local-dead': { id: 'local-dead', createdAt: 400, lastActive: 400, bridgeInstance: 'b0' },
    'conn-r': { id: 'conn-r', createdAt: 250, lastActive: 250 },
  };
  const ids = (bridge) => sessions.liveSessions(recs, bridge).map((r) => r.id);
  assert.deepEqual(ids({ state: 'ready', bridgeInstance: 'b1' }), ['local-new', 'conn-r', 'local-mid', 'local-old']);
  // Until a bridge says who it is, nothing tells a dead record from a live one.
  assert.deepEqual(ids({ state: 'disconnected' }), ['local-dead', 'local-new', 'conn-r', 'local-mid', 'local-old']);
  assert.deepEqual(ids(undefined), ['local-dead', 'local-new', 'conn-r', 'local-mid', 'local-old']);
  assert.deepEqual(sessions.liveSessions(undefined, undefined), []);
});

test('ended and released sessions leave no record for the popup to list', async () => {
  for (let i = 0; i < 5; i++) {
    const s = { id: `local-shot${i}`, client: 'Inspector' };
    await sessions.createTab(s);
    await sessions.sessionEnded(s.id);
  }
  await sessions.createTab(A);
  await sessions.createTab(B);
  await sessions.reconcile({ bridgeInstance: 'b5', sessions: [{ id: 'local-b' }] });
  const bridge = { state: 'ready', bridgeInstance: 'b5' };
  assert.deepEqual(
    sessions.liveSessions(await stored(), bridge).map((r) => r.id),
    ['local-b'],
  );
});

test("a remote client's group carries its own name, marked remote (issue 31)", async () => {
  const R = { id: 'conn-kabc123', client: 'claude.ai', remote: true };
  await sessions.touch(R);
  const t = await sessions.createTab(R, 'https://r.example/');
  assert.equal(fake.groupsById.get(fake.tabsById.get(t.id).groupId).title, 'claude.ai (remote)');
  assert.equal(sessions.groupTitle({ id: 'conn-1', client: 'Cursor' }), 'Cursor (remote)');
  assert.equal(sessions.groupTitle(A), 'Claude Code');
});

test('the records are read from memory once known, and every change reaches storage in order', async () => {
  const tab = await sessions.createTab(A, 'https://a.example/');
  await sessions.touch(A);
  let reads = 0;
  const get = chrome.storage.session.get.bind(chrome.storage.session);
  chrome.storage.session.get = (keys) => {
    reads++;
    return get(keys);
  };
  for (let i = 0; i < 5; i++) {
    await sessions.touch(A);
    await sessions.resolveTab(A, tab.id);
    await sessions.resolveTab(A);
  }
  assert.equal(reads, 0, 'a call reads the records from memory');
  await sessions.setPlan(A.id, 'step 1');
  await flush();
  // Storage holds what memory holds: the last write landed after the ones before it.
  const recs = await stored();
  assert.equal(recs['local-a'].plan, 'step 1');
  assert.equal(recs['local-a'].currentTabId, tab.id);
  assert.deepEqual(recs, Object.fromEntries((await sessions.listSessions()).map((r) => [r.id, r])));
});

test("a call's touches are stored as one lastActive write, a moment later", async () => {
  const tab = await sessions.createTab(A, 'https://a.example/');
  await flush();
  const before = (await stored())['local-a'].lastActive;
  let writes = 0;
  const set = chrome.storage.session.set.bind(chrome.storage.session);
  chrome.storage.session.set = (items) => {
    if ('sessions' in items) writes++;
    return set(items);
  };
  for (let i = 0; i < 3; i++) {
    await sessions.touch(A); // before the gate
    await sessions.resolveTab(A, tab.id); // the tool's tab, already current
  }
  assert.equal(writes, 0, 'no write on the way to the tool');
  const deadline = Date.now() + 10_000;
  while (writes === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  await flush();
  assert.equal(writes, 1, 'one write for all six touches');
  assert.ok((await stored())['local-a'].lastActive >= before);
  assert.equal((await sessions.record('local-a')).lastActive, (await stored())['local-a'].lastActive);
});

test('a change to the records from outside this worker is read again, not shadowed by the copy', async () => {
  const tab = await sessions.createTab(A, 'https://a.example/');
  await flush();
  // As a restarted worker or another writer would leave storage: A's current tab forgotten, a plan set.
  const recs = await stored();
  recs['local-a'].currentTabId = null;
  recs['local-a'].plan = 'from storage';
  await chrome.storage.session.set({ sessions: recs });
  assert.equal((await sessions.record('local-a')).plan, 'from storage');
  // resolveTab falls back to the group's tab and makes it current again, in storage too.
  assert.equal((await sessions.resolveTab(A)).id, tab.id);
  await flush();
  assert.equal((await stored())['local-a'].currentTabId, tab.id);
  assert.equal((await stored())['local-a'].plan, 'from storage');
});
