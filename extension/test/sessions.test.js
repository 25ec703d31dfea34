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
const flush = async () => { for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r)); };
const stored = async () => (await chrome.storage.session.get('sessions')).sessions || {};

beforeEach(() => {
  fake = installFakeChrome();
  fake.tabs.onRemoved.addListener((id) => sessions.onTabRemoved(id));
  fake.tabGroups.onRemoved.addListener((g) => sessions.onGroupRemoved(g));
});

test('two sessions get two groups with distinct colours, titled with the client', async () => {
  const [ta, tb] = await Promise.all([sessions.createTab(A, 'https://a.example/'), sessions.createTab(B, 'https://b.example/')]);
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

test('resolveTab: current tab, then another group tab, then a new one', async () => {
  const t1 = await sessions.resolveTab(A); // none yet: creates one in A's group
  assert.notEqual(fake.tabsById.get(t1.id).groupId, -1);
  assert.equal((await sessions.resolveTab(A)).id, t1.id);
  const t2 = await sessions.createTab(A, 'https://two.example/');
  assert.equal((await sessions.resolveTab(A)).id, t2.id);
  await chrome.tabs.remove(t2.id);
  await flush();
  assert.equal((await stored())['local-a'].currentTabId, null);
  assert.equal((await sessions.resolveTab(A)).id, t1.id);
  assert.deepEqual((await sessions.sessionTabs(A)).map((t) => t.id), [t1.id]);
});

test('a named tab: ungrouped ones are adopted, other sessions\' are left where they are', async () => {
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

  await assert.rejects(sessions.resolveTab(A, 9999), /no tab with id 9999/);
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
