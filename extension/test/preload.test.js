// The page agent put into an agent's tab as a document commits (preload in
// content/agent.js, sw/preload.js), with chrome.scripting played by a fake
// page that runs the agent's real files and functions: the first call in a
// preloaded document is one executeScript, not three; a call waits for a
// preload under way; a failed preload leaves the old way; only agents' tabs,
// top frames and scriptable URLs get one; sites the policy bars agents'
// page tools from (the person's or the organization's) get none, and a
// change of the policy applies to the next commit. TestPageAgentPreload runs
// it in Chromium.
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeChrome } from './fake-chrome.js';
import { loadPageAgent } from './page-scripts.js';
import { preload, runAgent, PAGE_SCRIPTS } from '../content/agent.js';
import * as cdp from '../sw/cdp.js';
import * as preloadSw from '../sw/preload.js';
import * as gate from '../sw/gate.js';

let fake;
let calls; // what each executeScript asked for: 'files', or the function's name
let hold; // when set, executeScript waits for this promise first
let refuse; // when set, executeScript throws it (a page the extension cannot script)
let holdMark; // when set, the preload's markAgent waits for this promise first

/** A new document: no agent in its isolated world. */
function newDocument() {
  delete globalThis.__browserBridgePage;
}

beforeEach(() => {
  fake = installFakeChrome();
  calls = [];
  hold = null;
  refuse = null;
  holdMark = null;
  newDocument();
  fake.scripting.executeScript = async (inj) => {
    calls.push({ what: inj.files ? 'files' : inj.func.name, target: inj.target, immediately: !!inj.injectImmediately });
    if (hold) await hold;
    if (holdMark && inj.func?.name === 'markAgent') await holdMark;
    if (refuse) throw refuse;
    if (inj.files) {
      assert.deepEqual(
        inj.files,
        PAGE_SCRIPTS.map((f) => `content/${f}`),
      );
      loadPageAgent();
      return [{ frameId: 0, result: null }];
    }
    return [{ frameId: 0, result: inj.func(...inj.args) }];
  };
  fake.debugger = {
    attach: async () => {},
    detach: async () => {},
    sendCommand: async () => ({}),
    onEvent: { addListener() {} },
    onDetach: { addListener() {} },
  };
  globalThis.chrome = fake;
  // background.js's storage listener: the gate's copy of the policy follows storage.
  fake.storage.onChanged.addListener(gate.onStorageChanged);
  gate.onStorageChanged({ policy: {} }, 'local'); // a new profile: forget the last test's policy
});

const a = { isConnected: true };

test('a first call in a document without the agent injects it: three calls', async () => {
  assert.deepEqual(await runAgent(3, 'refOf', { elements: [] }), []);
  assert.deepEqual(
    calls.map((c) => c.what),
    ['callAgent', 'files', 'callAgent'],
  );
});

test('a preloaded document answers the first call in one executeScript', async () => {
  assert.equal(await preload(3, 'doc-1'), true);
  assert.deepEqual(
    calls.map((c) => [c.what, c.immediately]),
    [
      ['files', true],
      ['markAgent', true],
    ],
  );
  assert.deepEqual(calls[0].target, { tabId: 3, documentIds: ['doc-1'] }, 'that document or none');
  calls = [];
  const [ref] = await runAgent(3, 'refOf', { elements: [a] });
  assert.match(ref, /^ref_\d+$/);
  assert.deepEqual(
    calls.map((c) => c.what),
    ['callAgent'],
  );
});

test('a call waits for a preload under way instead of injecting again', async () => {
  let release;
  hold = new Promise((resolve) => (release = resolve));
  const pre = preload(4, 'doc-2');
  const call = runAgent(4, 'refOf', { elements: [] });
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.deepEqual(
    calls.map((c) => c.what),
    ['files'],
    'nothing of the call reached the page before the preload',
  );
  hold = null;
  release();
  assert.equal(await pre, true);
  assert.deepEqual(await call, []);
  assert.deepEqual(
    calls.map((c) => c.what),
    ['files', 'markAgent', 'callAgent'],
  );
});

test("a call that finds the preload's files in marks them itself, without waiting for the preload's mark", async () => {
  let release;
  holdMark = new Promise((resolve) => (release = resolve));
  const pre = preload(7, 'doc-5');
  const [ref] = await runAgent(7, 'refOf', { elements: [a] });
  assert.match(ref, /^ref_\d+$/);
  assert.deepEqual(
    calls.map((c) => c.what),
    ['files', 'markAgent', 'callAgent'],
    'one call, answered while the mark was still under way',
  );
  release();
  assert.equal(await pre, true);
  calls = [];
  assert.deepEqual(await runAgent(7, 'refOf', { elements: [] }), []);
  assert.deepEqual(
    calls.map((c) => c.what),
    ['callAgent'],
    "the agent is this worker's",
  );
});

test('a preload that fails leaves the first call to inject the agent itself', async () => {
  refuse = new Error('Cannot access contents of the page');
  assert.equal(await preload(5, 'doc-3'), false);
  refuse = null;
  calls = [];
  assert.deepEqual(await runAgent(5, 'refOf', { elements: [] }), []);
  assert.deepEqual(
    calls.map((c) => c.what),
    ['callAgent', 'files', 'callAgent'],
  );
});

test('files of another worker start are replaced on the first call, preload or not', async () => {
  await preload(6, 'doc-4');
  globalThis.__browserBridgePage.token = 'an older worker';
  calls = [];
  assert.deepEqual(await runAgent(6, 'refOf', { elements: [] }), []);
  assert.deepEqual(
    calls.map((c) => c.what),
    ['callAgent', 'files', 'callAgent'],
  );
});

test('only top frames of tabs an agent uses, at scriptable URLs, are preloaded', async () => {
  await cdp.attach(8); // a tool used tab 8
  const commit = (d) =>
    preloadSw.onCommitted({ tabId: 8, frameId: 0, url: 'https://example.com/', documentId: 'd', ...d });
  commit({ tabId: 9 });
  commit({ frameId: 2 });
  commit({ url: 'chrome://settings/' });
  commit({ url: 'about:blank' });
  commit({ documentLifecycle: 'prerender' });
  assert.deepEqual(calls, [], 'none of these');
  commit({ url: 'http://127.0.0.1:8080/a.html', documentId: 'doc-5' });
  commit({ url: 'file:///tmp/b.html', documentId: 'doc-6' });
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.deepEqual(
    calls.filter((c) => c.what === 'files').map((c) => c.target),
    [
      { tabId: 8, documentIds: ['doc-5'] },
      { tabId: 8, documentIds: ['doc-6'] },
    ],
  );
});

test('listen adds the commit listener to the API it is given', () => {
  assert.equal(preloadSw.listen(fake), true);
  assert.ok(fake.webNavigation.onCommitted.hasListener(preloadSw.onCommitted));
  assert.equal(preloadSw.listen({}), false, 'a browser without webNavigation');
});

// A tab the tools use commits a document at url; resolves once its preload, if any, was started.
let nextDoc = 100;
async function commitAt(url, tabId = 11) {
  await cdp.attach(tabId);
  const documentId = `doc-${nextDoc++}`;
  await preloadSw.onCommitted({ tabId, frameId: 0, url, documentId });
  return documentId;
}
const preloadedDocs = () => calls.filter((c) => c.what === 'files').map((c) => c.target.documentIds[0]);

test("a site whose rule blocks the agent's tools gets no preload; an allowed, an ask and a half-blocked one do", async () => {
  await fake.storage.local.set({
    policy: {
      sites: [
        { pattern: 'blocked.example', read: 'block', act: 'block', script: 'block' },
        { pattern: 'asks.example', read: 'ask', act: 'ask', script: 'ask' },
        { pattern: 'reads.example', read: 'allow', act: 'block', script: 'block' },
      ],
    },
  });
  const blocked = await commitAt('https://blocked.example/inbox');
  const sub = await commitAt('http://blocked.example:8080/');
  const asks = await commitAt('https://asks.example/');
  const reads = await commitAt('https://reads.example/');
  const unlisted = await commitAt('https://example.com/');
  const store = await commitAt('https://chromewebstore.google.com/'); // internal: never acted on
  assert.deepEqual(preloadedDocs(), [asks, reads, unlisted]);
  assert.ok(![blocked, sub, store].some((d) => preloadedDocs().includes(d)));
});

test("the organization's blocking rule wins over the person's allow, as the gate's does", async () => {
  await fake.storage.local.set({
    policy: { sites: [{ pattern: 'https://corp.example', read: 'allow', act: 'allow', script: 'allow' }] },
  });
  await fake.storage.managed.set({
    sites: [{ pattern: '*.corp.example', read: 'block', act: 'block', script: 'block' }],
  });
  await commitAt('https://corp.example/');
  assert.deepEqual(preloadedDocs(), []);
});

test('a policy change applies to the next commit', async () => {
  const before = await commitAt('https://example.com/a');
  await fake.storage.local.set({
    policy: { sites: [{ pattern: 'example.com', read: 'block', act: 'block', script: 'allow' }] },
  });
  await commitAt('https://example.com/b');
  await fake.storage.local.set({
    policy: { sites: [{ pattern: 'example.com', read: 'ask', act: 'block', script: 'allow' }] },
  });
  const after = await commitAt('https://example.com/c');
  assert.deepEqual(preloadedDocs(), [before, after]);
});

test('a commit with the policy in memory reads no storage and starts the preload at once', async () => {
  await fake.storage.local.set({ policy: { sites: [{ pattern: 'x.example', read: 'block', act: 'block' }] } });
  await commitAt('https://example.com/'); // reads the policy once
  let reads = 0;
  const get = fake.storage.local.get;
  fake.storage.local.get = (...args) => {
    reads++;
    return get(...args);
  };
  calls = [];
  const pending = preloadSw.onCommitted({ tabId: 11, frameId: 0, url: 'https://example.com/2', documentId: 'warm-1' });
  assert.equal(pending, undefined, 'nothing to wait for');
  assert.deepEqual(preloadedDocs(), ['warm-1'], 'injecting before the commit listener returned');
  preloadSw.onCommitted({ tabId: 11, frameId: 0, url: 'https://x.example/', documentId: 'warm-2' });
  assert.deepEqual(preloadedDocs(), ['warm-1']);
  assert.equal(reads, 0);
});
