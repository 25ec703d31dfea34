// mainDocument (sw/cdp.js): the status of a tab's main document comes from
// the capture's events when a main-frame document committed after the mark
// navigate took (Page.frameNavigated), and from the page (Page.getFrameTree)
// otherwise. chrome.debugger is a fake that counts what is asked of the
// page; TestNavigateErrors runs the whole in Chromium.
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeChrome } from './fake-chrome.js';
import * as cdp from '../sw/cdp.js';

const TAB = 41;
let asked; // the CDP methods sent to the page
let pageFrame; // what Page.getFrameTree answers

beforeEach(() => {
  const fake = installFakeChrome();
  asked = [];
  pageFrame = { id: 'F', loaderId: 'old', url: 'http://t/old' };
  fake.debugger = {
    attach: async () => {},
    detach: async () => {},
    sendCommand: async (target, method) => {
      asked.push(method);
      return method === 'Page.getFrameTree' ? { frameTree: { frame: pageFrame } } : {};
    },
    onEvent: { addListener() {} },
    onDetach: { addListener() {} },
  };
  globalThis.chrome = fake;
  cdp.forgetTab(TAB);
});

/** The capture sees a document request (its request id is the loader id) and its answer. */
function documentResponse(loaderId, url, status) {
  cdp.handleEvent(TAB, 'Network.requestWillBeSent', {
    requestId: loaderId,
    request: { url, method: 'GET' },
    type: 'Document',
  });
  cdp.handleEvent(TAB, 'Network.responseReceived', { requestId: loaderId, response: { status, statusText: '' } });
}

const asksOfPage = () => asked.filter((m) => m === 'Page.getFrameTree').length;

test('a main-frame document committed after the mark answers without asking the page', async () => {
  await cdp.trackTab(TAB);
  documentResponse('old', 'http://t/old', 200);
  const since = cdp.mainFrameMark(TAB);
  documentResponse('L2', 'http://t/missing', 404);
  cdp.handleEvent(TAB, 'Page.frameNavigated', { frame: { id: 'F', loaderId: 'L2', url: 'http://t/missing' } });
  assert.ok(cdp.mainFrameMark(TAB) > since);
  const doc = await cdp.mainDocument(TAB, { since });
  assert.equal(doc.status, 404);
  assert.equal(doc.url, 'http://t/missing');
  assert.equal(asksOfPage(), 0);
});

test('a subframe, no commit since the mark, or no mark at all: the page is asked', async () => {
  await cdp.trackTab(TAB);
  documentResponse('old', 'http://t/old', 200);
  const since = cdp.mainFrameMark(TAB);
  cdp.handleEvent(TAB, 'Page.frameNavigated', {
    frame: { id: 'S', parentId: 'F', loaderId: 'sub', url: 'http://t/ad' },
  });
  assert.equal(cdp.mainFrameMark(TAB), since, 'a subframe is not the main document');
  assert.equal((await cdp.mainDocument(TAB, { since })).status, 200);
  assert.equal(asksOfPage(), 1);

  cdp.handleEvent(TAB, 'Page.frameNavigated', { frame: { id: 'F', loaderId: 'old', url: 'http://t/old' } });
  assert.equal((await cdp.mainDocument(TAB)).status, 200);
  assert.equal(asksOfPage(), 2, 'without since the page is asked');
});

test('an error page committed after the mark keeps its unreachable URL', async () => {
  await cdp.trackTab(TAB);
  const since = cdp.mainFrameMark(TAB);
  cdp.handleEvent(TAB, 'Network.requestWillBeSent', {
    requestId: 'E',
    request: { url: 'http://t/down', method: 'GET' },
    type: 'Document',
  });
  cdp.handleEvent(TAB, 'Network.loadingFailed', { requestId: 'E', errorText: 'net::ERR_CONNECTION_REFUSED' });
  cdp.handleEvent(TAB, 'Page.frameNavigated', {
    frame: { id: 'F', loaderId: 'E', url: 'chrome-error://chromewebdata/', unreachableUrl: 'http://t/down' },
  });
  const doc = await cdp.mainDocument(TAB, { since });
  assert.equal(doc.unreachableUrl, 'http://t/down');
  assert.equal(doc.errorText, 'net::ERR_CONNECTION_REFUSED');
  assert.equal(asksOfPage(), 0);
});

test('a forgotten tab starts again from no record', async () => {
  await cdp.trackTab(TAB);
  cdp.handleEvent(TAB, 'Page.frameNavigated', { frame: { id: 'F', loaderId: 'x', url: 'http://t/x' } });
  assert.ok(cdp.mainFrameMark(TAB) > 0);
  cdp.forgetTab(TAB);
  assert.equal(cdp.mainFrameMark(TAB), 0);
  assert.equal(await cdp.mainDocument(TAB, { since: 0 }), null, 'not attached any more');
});

test('a document restored from the back/forward cache answers from its first commit, told late', async () => {
  await cdp.trackTab(TAB);
  documentResponse('L1', 'http://t/first', 404);
  cdp.handleEvent(TAB, 'Page.frameNavigated', { frame: { id: 'F', loaderId: 'L1', url: 'http://t/first' } });
  cdp.onCommitted({ tabId: TAB, frameId: 0, url: 'http://t/first#top', documentId: 'D1' });
  documentResponse('L2', 'http://t/second', 200);
  cdp.handleEvent(TAB, 'Page.frameNavigated', { frame: { id: 'F', loaderId: 'L2', url: 'http://t/second' } });
  cdp.onCommitted({ tabId: TAB, frameId: 0, url: 'http://t/second', documentId: 'D2' });
  // Back: the restored document commits (its id as before); the capture hears of it after the load.
  const since = cdp.mainFrameMark(TAB);
  cdp.onCommitted({ tabId: TAB, frameId: 0, url: 'http://t/first', documentId: 'D1' });
  const doc = await cdp.mainDocument(TAB, { since, documentId: 'D1' });
  assert.equal(doc.status, 404);
  assert.equal(doc.url, 'http://t/first');
  assert.equal(asksOfPage(), 0);
  cdp.handleEvent(TAB, 'Page.frameNavigated', {
    type: 'BackForwardCacheRestore',
    frame: { id: 'F', loaderId: 'L1', url: 'http://t/first' },
  });
  // A new document at the same URL that commits before the capture hears of it is not taken for the restored one.
  documentResponse('L3', 'http://t/first', 200);
  pageFrame = { id: 'F', loaderId: 'L3', url: 'http://t/first' };
  cdp.onCommitted({ tabId: TAB, frameId: 0, url: 'http://t/first', documentId: 'D3' });
  assert.equal((await cdp.mainDocument(TAB, { since: cdp.mainFrameMark(TAB), documentId: 'D3' })).status, 200);
  assert.equal(asksOfPage(), 1, 'the page was asked');
});

test('a record goes to the first commit after it only, and only at its URL', async () => {
  await cdp.trackTab(TAB);
  documentResponse('L1', 'http://t/a', 500);
  cdp.handleEvent(TAB, 'Page.frameNavigated', { frame: { id: 'F', loaderId: 'L1', url: 'http://t/a' } });
  cdp.onCommitted({ tabId: TAB, frameId: 0, url: 'http://t/b', documentId: 'DB' });
  cdp.onCommitted({ tabId: TAB, frameId: 0, url: 'http://t/a', documentId: 'DA' });
  await cdp.mainDocument(TAB, { since: cdp.mainFrameMark(TAB), documentId: 'DA' });
  await cdp.mainDocument(TAB, { since: cdp.mainFrameMark(TAB), documentId: 'DB' });
  assert.equal(asksOfPage(), 2, 'neither document was paired with the record');
});
