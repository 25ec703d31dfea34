// Failed loads and sessions without a tab (sw/pageload.js, sw/sessions.js):
// the words of the errors, navigate's failures, the page tools on Chrome's
// error page, and the rule that only the tools meant to open a tab open one.
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeChrome } from './fake-chrome.js';
import * as tools from '../sw/tools.js';
import * as pageload from '../sw/pageload.js';
import { NO_TAB_MESSAGE } from '../sw/sessions.js';
import coreTools from '../tools/core.js';
import pageTools from '../tools/page.js';

let fake;
let n = 0;
const A = { id: 'local-pa', client: 'One-shot client' };

beforeEach(() => {
  fake = installFakeChrome();
  pageload.listen(fake);
  tools.clear();
  tools.register(coreTools, pageTools);
});

function call(name, args = {}, session = A) {
  return tools.call(
    { name, arguments: args, _meta: { 'browserbridge/session': session } },
    { id: `${session.id}:${++n}`, signal: new AbortController().signal },
  );
}

const text = (r) =>
  r.content
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');
const counts = () => ({ tabs: fake.tabsById.size, windows: fake.windowsById.size });

test('net errors are named with what they mean; unknown ones as they are', () => {
  assert.equal(
    pageload.describeNetError('net::ERR_NAME_NOT_RESOLVED'),
    'net::ERR_NAME_NOT_RESOLVED (the host name does not resolve (DNS): check the spelling of the host)',
  );
  assert.match(
    pageload.describeNetError('net::ERR_CONNECTION_REFUSED'),
    /^net::ERR_CONNECTION_REFUSED \(nothing accepts connections/,
  );
  assert.equal(pageload.describeNetError('net::ERR_SOMETHING_NEW'), 'net::ERR_SOMETHING_NEW');
  assert.equal(pageload.describeNetError(null), 'an error the browser did not name');
});

test("HTTP status lines use the server's reason, else the standard one", () => {
  assert.equal(pageload.httpStatusLine(404, 'Not Found'), 'HTTP 404 Not Found');
  assert.equal(pageload.httpStatusLine(404, ''), 'HTTP 404 Not Found'); // HTTP/2 has no reason phrase
  assert.equal(pageload.httpStatusLine(500), 'HTTP 500 Internal Server Error');
  assert.equal(pageload.httpStatusLine(599), 'HTTP 599');
  assert.equal(pageload.httpStatusLine(418, 'Custom words'), 'HTTP 418 Custom words');
  for (const [s, want] of [
    [399, false],
    [400, true],
    [404, true],
    [599, true],
    [600, false],
    [200, false],
    [undefined, false],
  ]) {
    assert.equal(pageload.isHttpError(s), want, String(s));
  }
});

test('the failure texts name the tab, the URL, the error and what to do', () => {
  const t = pageload.loadFailedText({
    tabId: 7,
    url: 'http://no-such-host.invalid/',
    error: 'net::ERR_NAME_NOT_RESOLVED',
  });
  assert.match(t, /^Loading http:\/\/no-such-host\.invalid\/ in tab 7 failed: net::ERR_NAME_NOT_RESOLVED/);
  assert.match(t, /Call navigate with a working URL/);
  assert.match(
    pageload.loadFailedText({ tabId: 7, url: 'http://x/', error: 'net::ERR_TIMED_OUT', what: 'reload' }),
    /^Reloading http:\/\/x\/ in tab 7 failed/,
  );
  assert.match(
    pageload.loadFailedText({ tabId: 7, url: 'http://x/', error: 'net::ERR_TIMED_OUT', what: 'back' }),
    /^Going back to http:\/\/x\/ in tab 7/,
  );

  const h = pageload.httpErrorText({
    tabId: 3,
    url: 'http://h/missing',
    status: 404,
    statusText: 'Not Found',
    title: '404 page',
  });
  assert.match(
    h,
    /^HTTP 404 Not Found: the server answered http:\/\/h\/missing with status 404 in tab 3 \("404 page"\)\./,
  );
  assert.match(h, /get_page_text/);

  const e = pageload.errorPageText({ tabId: 9, url: 'http://127.0.0.1:1/', error: 'net::ERR_CONNECTION_REFUSED' });
  assert.match(
    e,
    /^Tab 9 shows Chrome's error page: loading http:\/\/127\.0\.0\.1:1\/ failed with net::ERR_CONNECTION_REFUSED/,
  );
  assert.match(e, /call navigate with a working URL/);
  assert.doesNotMatch(e, /Frame with ID/);
  assert.match(pageload.errorPageText({ tabId: 9 }), /^Tab 9 shows Chrome's error page: its last load failed\./);
});

test('a session without a tab: page tools say to call navigate and open nothing', async () => {
  const before = counts();
  for (const [name, args] of [
    ['read_page', {}],
    ['get_page_text', {}],
    ['find', { query: 'x' }],
    ['javascript_tool', { code: '1' }],
    ['computer', { action: 'screenshot' }],
    ['form_input', { ref: 'ref_1', value: 'x' }],
    ['navigate', { action: 'back' }],
  ]) {
    const r = await call(name, args);
    assert.equal(r.isError, true, `${name} succeeded without a tab`);
    assert.equal(text(r), NO_TAB_MESSAGE, name);
  }
  assert.deepEqual(counts(), before, 'a tool opened a tab or window for a session without one');
  assert.match(NO_TAB_MESSAGE, /Call navigate with a url/);
  assert.match(NO_TAB_MESSAGE, /tabs_create_mcp/);

  // navigate with a url is meant to open one: in the session's group.
  const r = await call('navigate', { url: 'https://example.com/' });
  assert.ok(!r.isError, text(r));
  assert.notEqual(fake.tabsById.get(Number(/^Navigated in tab (\d+)/.exec(text(r))[1])).groupId, -1);
  assert.equal(counts().tabs, before.tabs + 1);
});

test('navigate to a URL that fails is a tool error naming the net error; back/reload too', async () => {
  const ok = await call('navigate', { url: 'https://ok.example/' });
  const tabId = Number(/^Navigated in tab (\d+)/.exec(text(ok))[1]);
  fake.failUrls.set('http://no-such-host.invalid/', 'net::ERR_NAME_NOT_RESOLVED');
  let r = await call('navigate', { url: 'http://no-such-host.invalid/' });
  assert.equal(r.isError, true, text(r));
  assert.match(
    text(r),
    new RegExp(`^Loading http://no-such-host\\.invalid/ in tab ${tabId} failed: net::ERR_NAME_NOT_RESOLVED`),
  );
  assert.equal(r.structuredContent, undefined);

  // The page tools on that tab name the same error, not Chrome's "Frame with ID 0 is showing error page".
  for (const [name, args] of [
    ['get_page_text', {}],
    ['read_page', { tabId }],
    ['javascript_tool', { code: '1' }],
    ['computer', { action: 'left_click', coordinate: [1, 1] }],
  ]) {
    const p = await call(name, args);
    assert.equal(p.isError, true, name);
    assert.equal(
      text(p),
      pageload.errorPageText({ tabId, url: 'http://no-such-host.invalid/', error: 'net::ERR_NAME_NOT_RESOLVED' }),
      name,
    );
  }

  r = await call('navigate', { action: 'reload' });
  assert.equal(r.isError, true);
  assert.match(text(r), /^Reloading http:\/\/no-such-host\.invalid\/ in tab \d+ failed: net::ERR_NAME_NOT_RESOLVED/);
  r = await call('navigate', { action: 'back' });
  assert.ok(!r.isError, text(r));
  assert.match(text(r), new RegExp(`^Went back in tab ${tabId}: https://ok\\.example/ `));
  fake.failUrls.delete('http://no-such-host.invalid/');
  r = await call('navigate', { action: 'forward' });
  assert.ok(!r.isError, `the site is back, yet: ${text(r)}`);
  const p = await call('javascript_tool', { code: '1' });
  assert.doesNotMatch(text(p), /error page/, 'a page that loaded is still taken for an error page');
});

test('an aborted load is not an error page; a committed load clears the record', async () => {
  pageload.onErrorOccurred({ tabId: 50, frameId: 0, url: 'http://a/', error: pageload.ABORTED });
  assert.equal(await pageload.lastError(50), null);
  pageload.onErrorOccurred({ tabId: 50, frameId: 3, url: 'http://frame/', error: 'net::ERR_FAILED' });
  assert.equal(await pageload.lastError(50), null, 'a subframe error was taken for the page');
  pageload.onErrorOccurred({ tabId: 50, frameId: 0, url: 'http://a/', error: 'net::ERR_CONNECTION_RESET' });
  assert.equal((await pageload.lastError(50)).error, 'net::ERR_CONNECTION_RESET');
  pageload.onCommitted({ tabId: 50, frameId: 0, url: 'http://a/' });
  assert.equal(await pageload.lastError(50), null);
});
