// The core tab tools against the fake browser: tabs_context(_mcp),
// tabs_create(_mcp) and navigate (load, back, forward, reload, errors).
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeChrome } from './fake-chrome.js';
import * as tools from '../sw/tools.js';
import coreTools, { normaliseUrl } from '../tools/core.js';

let fake;
let n = 0;
const A = { id: 'local-a', client: 'Claude Code' };
const B = { id: 'local-b', client: 'Cursor' };

beforeEach(() => {
  fake = installFakeChrome();
  tools.clear();
  tools.register(coreTools);
});

/** The tab id a tabs_create or navigate result names ("Opened tab N", "Navigated in tab N"). */
function tabIdOf(r) {
  const m = /\btab (\d+)\b/.exec(r.content[0].text);
  assert.ok(m, `no tab id in ${r.content[0].text}`);
  return Number(m[1]);
}

/** tabs_context's lines: `- tab N: title — url [marks]`, as {tabId, url, marks}. */
function tabLines(r) {
  return [...r.content[0].text.matchAll(/^- tab (\d+): .* — (\S*)(?: \[(.*)\])?$/gm)].map((m) => ({
    tabId: Number(m[1]),
    url: m[2],
    marks: m[3] || '',
  }));
}

function call(name, args = {}, session = A) {
  return tools.call(
    { name, arguments: args, _meta: { 'browserbridge/session': session } },
    { id: `${session.id}:${++n}`, signal: new AbortController().signal },
  );
}

test('navigate loads a URL in the session tab and waits for the load', async () => {
  const r = await call('navigate', { url: 'example.com/path' });
  assert.ok(!r.isError, r.content[0].text);
  assert.equal(r.structuredContent, undefined, 'Claude Code would hand a model the structured copy, not the text');
  const tabId = tabIdOf(r);
  assert.equal(
    r.content[0].text,
    `Navigated in tab ${tabId}: https://example.com/path — "Title of https://example.com/path".`,
    'a load that finished says nothing of a timeout',
  );
  assert.notEqual(fake.tabsById.get(tabId).groupId, -1, 'the tab is not in the session group');
});

test("navigate answers at the page's load event, not when the whole tab says it stopped loading", async () => {
  const first = await call('navigate', { url: 'https://one.example/' });
  const tabId = tabIdOf(first);
  // From here the tab never says "complete" (Chrome says it after the load event, late on a busy machine).
  fake.withholdComplete = true;
  let r = await call('navigate', { url: 'https://two.example/', tabId, timeoutMs: 60000 });
  assert.equal(r.content[0].text, `Navigated in tab ${tabId}: https://two.example/ — "Title of https://two.example/".`);
  assert.equal(fake.tabsById.get(tabId).status, 'loading', 'the answer came before the tab said complete');
  r = await call('navigate', { action: 'reload', tabId, timeoutMs: 60000 });
  assert.equal(r.content[0].text, `Reloaded in tab ${tabId}: https://two.example/ — "Title of https://two.example/".`);
  // A failed load has no load event: the wait ends at the timeout, which the answer says, and the error is named.
  fake.failUrls.set('https://down.example/', 'net::ERR_CONNECTION_REFUSED');
  r = await call('navigate', { url: 'https://down.example/', tabId, timeoutMs: 300 });
  assert.ok(r.isError);
  assert.match(r.content[0].text, /ERR_CONNECTION_REFUSED/);
});

test('a page that sends the tab on as it loads: navigate answers for where it went, not at its load event', async () => {
  const first = await call('navigate', { url: 'https://one.example/' });
  const tabId = tabIdOf(first);
  fake.withholdComplete = true;
  fake.afterCommit = (id, url) => {
    if (url === 'https://leaving.example/') chrome.tabs.update(id, { url: 'https://arrived.example/' });
  };
  const r = await call('navigate', { url: 'https://leaving.example/', tabId, timeoutMs: 60000 });
  assert.equal(
    r.content[0].text,
    `Navigated in tab ${tabId}: https://arrived.example/ — "Title of https://arrived.example/".`,
  );
});

test('navigate back, forward and reload; no history is a tool error', async () => {
  const first = await call('navigate', { url: 'https://one.example/' });
  const tabId = tabIdOf(first);
  await call('navigate', { url: 'https://two.example/' });
  let r = await call('navigate', { action: 'back' });
  assert.match(r.content[0].text, new RegExp(`^Went back in tab ${tabId}: https://one\\.example/ `));
  r = await call('navigate', { url: 'forward', tabId });
  assert.match(r.content[0].text, new RegExp(`^Went forward in tab ${tabId}: https://two\\.example/ `));
  r = await call('navigate', { action: 'reload' });
  assert.match(r.content[0].text, /^Reloaded/);
  r = await call('navigate', { action: 'forward' });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /no later page/);
});

test('navigate refuses url and action together, and javascript: URLs', async () => {
  let r = await call('navigate', { url: 'https://x.example/', action: 'back' });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /either url or action/);
  r = await call('navigate', { url: 'javascript:alert(1)' });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /javascript_tool/);
  await assert.rejects(
    call('navigate', { action: 'sideways' }),
    (e) => e.code === -32602 && /action: must be one of/.test(e.message),
  );
});

test('tabs_create opens tabs in the session group; tabs_context marks them', async () => {
  const a = await call('tabs_create_mcp', { url: 'https://a.example/' });
  const b = await call('tabs_create', { url: 'https://b.example/' }, B);
  fake.userTab('https://mine.example/');
  const all = await call('tabs_context');
  const tabs = tabLines(all);
  assert.equal(tabs.length, 3);
  const ta = tabs.find((t) => t.tabId === tabIdOf(a));
  const tb = tabs.find((t) => t.tabId === tabIdOf(b));
  assert.match(ta.marks, /\bcurrent, this session\b/);
  assert.doesNotMatch(tb.marks, /this session/);
  assert.match(tb.marks, /session "Cursor"/);

  const mine = await call('tabs_context_mcp');
  assert.deepEqual(
    tabLines(mine).map((t) => t.tabId),
    [tabIdOf(a)],
  );
});

test('tabs_context_mcp can open a tab when the session has none', async () => {
  let r = await call('tabs_context_mcp');
  assert.deepEqual(tabLines(r), []);
  assert.match(r.content[0].text, /^Your session has no tabs yet/);
  r = await call('tabs_context_mcp', { createIfEmpty: true });
  assert.equal(tabLines(r).length, 1);
  assert.match(r.content[0].text, /^Your session has 1 tab:/);
});

test('normaliseUrl', () => {
  assert.equal(normaliseUrl('example.com'), 'https://example.com');
  assert.equal(normaliseUrl('localhost:8080/x'), 'http://localhost:8080/x');
  assert.equal(normaliseUrl('127.0.0.1:9/'), 'http://127.0.0.1:9/');
  assert.equal(normaliseUrl('http://a.example/'), 'http://a.example/');
  assert.equal(normaliseUrl('about:blank'), 'about:blank');
  assert.equal(normaliseUrl('file:///tmp/x.html'), 'file:///tmp/x.html');
});

test('navigate reports a navigation the browser ignored', async () => {
  await call('navigate', { url: 'https://one.example/' });
  const realUpdate = fake.tabs.update;
  fake.tabs.update = async (id) => chrome.tabs.get(id); // Chrome ignoring the URL (as with data: URLs)
  try {
    const r = await call('navigate', { url: 'data:text/html,hi' });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /did not load data:text\/html,hi; tab \d+ still shows https:\/\/one.example\//);
  } finally {
    fake.tabs.update = realUpdate;
  }
});
