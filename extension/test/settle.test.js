// Waiting for the page to settle after an action (sw/settle.js): the
// worker's side, with the page agent's answers scripted (the page's side,
// content/page/settle.js, runs in real Chromium in TestSettle).
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeChrome } from './fake-chrome.js';
import * as settle from '../sw/settle.js';

let fake;
let checks; // the settleCheck calls the page received, their args
const TAB = 7;

/** Answers the page agent's ops: watch, then settleCheck by answer(args, n). */
function page(answer) {
  checks = [];
  fake.scripting.executeScript = async ({ args }) => {
    const [, op, opArgs] = args;
    if (op === 'watch') return [{ frameId: 0, result: { ok: true, value: { url: 'http://x/1' } } }];
    if (op === 'settleCheck') {
      checks.push(opArgs);
      const v = answer(opArgs, checks.length);
      if (v instanceof Error) throw v;
      return [{ frameId: 0, result: { ok: true, value: v } }];
    }
    throw new Error(`unexpected op ${op}`);
  };
}

const nav = (event, extra = {}) =>
  fake.webNavigation[event].dispatch({ tabId: TAB, frameId: 0, url: 'http://x/2', ...extra });

beforeEach(() => {
  fake = installFakeChrome();
  settle.listen(fake);
});

test('an action after which nothing happens says nothing and asks the page once', async () => {
  page(() => ({ done: true, settled: true, changed: false, notes: [] }));
  const r = await settle.settleAfter(TAB, async () => 42, { quietMs: 10 });
  assert.equal(r.value, 42);
  assert.equal(r.note, '');
  assert.equal(checks.length, 1);
});

test('what the page names is said as a sentence', async () => {
  page((a, n) =>
    n < 3 ? { done: false, wait: 5 } : { done: true, settled: true, notes: ['a dialog opened: "Saved" [ref_3]'] },
  );
  const r = await settle.settleAfter(TAB, async () => null, { quietMs: 10 });
  assert.equal(r.note, 'A dialog opened: "Saved" [ref_3].');
  assert.equal(checks.length, 3);
});

test('a page still changing at the bound says so', async () => {
  page((a) => (a.last ? { done: true, settled: false, notes: ['the page changed'] } : { done: false, wait: 5 }));
  const r = await settle.settleAfter(TAB, async () => null, { quietMs: 10, maxMs: 60 });
  assert.equal(r.note, 'The page changed; the page was still changing after 0.06 s.');
  assert.equal(checks.at(-1).last, true);
});

test('a navigation the action started is waited for until it commits', async () => {
  page(() => new Error('Frame was removed'));
  const r = await settle.settleAfter(TAB, async () => {
    nav('onBeforeNavigate');
    setTimeout(() => nav('onCommitted'), 30);
  });
  assert.equal(r.note, 'Navigated to http://x/2.');
});

test('a navigation that fails is named; one that was aborted is not', async () => {
  page(() => new Error('Frame was removed'));
  let r = await settle.settleAfter(TAB, async () => {
    nav('onBeforeNavigate');
    setTimeout(() => nav('onErrorOccurred', { error: 'net::ERR_CONNECTION_REFUSED' }), 10);
  });
  assert.equal(r.note, 'A navigation to http://x/2 failed (net::ERR_CONNECTION_REFUSED).');
  r = await settle.settleAfter(TAB, async () => {
    nav('onBeforeNavigate');
    setTimeout(() => nav('onErrorOccurred', { error: 'net::ERR_ABORTED' }), 10);
  });
  assert.equal(r.note, '');
});

test('a navigation started before the action is not the action’s', async () => {
  nav('onBeforeNavigate');
  await new Promise((r) => setTimeout(r, 5));
  page(() => ({ done: true, settled: true, notes: [] }));
  const r = await settle.settleAfter(TAB, async () => null, { quietMs: 10 });
  assert.equal(r.note, '');
});

test('a failed action is thrown, and the page stops watching', async () => {
  page(() => ({ done: true, settled: true, notes: [] }));
  await assert.rejects(
    settle.settleAfter(TAB, async () => {
      throw new Error('click failed');
    }),
    /click failed/,
  );
  await new Promise((r) => setTimeout(r, 5));
  assert.deepEqual(checks, [{ quietMs: settle.QUIET_MS, last: true }]);
});

test('a tab the action opened is named with its id and URL', async () => {
  page(() => ({ done: true, settled: true, notes: [] }));
  const r = await settle.settleAfter(
    TAB,
    async () =>
      fake.webNavigation.onCreatedNavigationTarget.dispatch({
        sourceTabId: TAB,
        sourceFrameId: 0,
        tabId: 99,
        url: 'http://x/help',
      }),
    { quietMs: 10 },
  );
  assert.equal(r.note, 'Opened tab 99 at http://x/help.');
});
