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

function call(name, args = {}, session = A) {
  return tools.call(
    { name, arguments: args, _meta: { 'browserbridge/session': session } },
    { id: `${session.id}:${++n}`, signal: new AbortController().signal },
  );
}

test('navigate loads a URL in the session tab and waits for the load', async () => {
  const r = await call('navigate', { url: 'example.com/path' });
  assert.ok(!r.isError, r.content[0].text);
  const { tabId, url, title, timedOut } = r.structuredContent;
  assert.equal(url, 'https://example.com/path');
  assert.match(r.content[0].text, /"Title of https:\/\/example.com\/path"/, 'the title is said in the text');
  assert.equal(title, undefined, 'and not again in the structured content');
  assert.equal(timedOut, undefined, 'timedOut only when the load timed out');
  assert.notEqual(fake.tabsById.get(tabId).groupId, -1, 'the tab is not in the session group');
  assert.match(r.content[0].text, /Navigated in tab \d+: https:\/\/example.com\/path/);
});

test('navigate back, forward and reload; no history is a tool error', async () => {
  const first = await call('navigate', { url: 'https://one.example/' });
  const tabId = first.structuredContent.tabId;
  await call('navigate', { url: 'https://two.example/' });
  let r = await call('navigate', { action: 'back' });
  assert.equal(r.structuredContent.url, 'https://one.example/');
  r = await call('navigate', { url: 'forward', tabId });
  assert.equal(r.structuredContent.url, 'https://two.example/');
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
  const tabs = all.structuredContent.tabs;
  assert.equal(tabs.length, 3);
  const ta = tabs.find((t) => t.tabId === a.structuredContent.tabId);
  const tb = tabs.find((t) => t.tabId === b.structuredContent.tabId);
  assert.equal(ta.inThisSession, true);
  assert.equal(ta.current, true);
  assert.equal(tb.inThisSession, false);
  assert.equal(tb.session, 'Cursor');
  assert.match(all.content[0].text, /session "Cursor"/);

  const mine = await call('tabs_context_mcp');
  assert.deepEqual(
    mine.structuredContent.tabs.map((t) => t.tabId),
    [a.structuredContent.tabId],
  );
});

test('tabs_context_mcp can open a tab when the session has none', async () => {
  let r = await call('tabs_context_mcp');
  assert.deepEqual(r.structuredContent.tabs, []);
  r = await call('tabs_context_mcp', { createIfEmpty: true });
  assert.equal(r.structuredContent.tabs.length, 1);
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
