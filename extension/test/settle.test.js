// Waiting for the page to settle after an action (sw/settle.js): the
// worker's side, with the page agent's answers and the debugger scripted
// (the page's side, content/page/settle.js, runs in real Chromium in
// TestSettle).
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeChrome, FakeEvent } from './fake-chrome.js';
import * as settle from '../sw/settle.js';

let fake;
let checks; // the settle calls the page received, their args
let scriptSeconds; // what Performance.getMetrics says, per read (a function of the read's number)
let metricReads;
let watches; // the watch calls the page received
const TAB = 7;

/** Answers the page agent's ops: watch, then settle by answer(args, n) (a value, an Error or a promise). */
function page(answer) {
  checks = [];
  fake.scripting.executeScript = async ({ args }) => {
    const [, op, opArgs] = args;
    if (op === 'watch') {
      watches++;
      return [{ frameId: 0, result: { ok: true, value: { url: 'http://x/1' } } }];
    }
    if (op === 'settle') {
      checks.push(opArgs);
      const v = await answer(opArgs, checks.length);
      if (v instanceof Error) throw v;
      return [{ frameId: 0, result: { ok: true, value: v } }];
    }
    throw new Error(`unexpected op ${op}`);
  };
}

const quiet = { done: true, settled: true, changed: false, notes: [] };

const nav = (event, extra = {}) =>
  fake.webNavigation[event].dispatch({ tabId: TAB, frameId: 0, url: 'http://x/2', ...extra });

/** A debugger event of the tab, as chrome.debugger.onEvent gives it. */
const cdpEvent = (method, params) => fake.debugger.onEvent.dispatch({ tabId: TAB }, method, params);

beforeEach(() => {
  fake = installFakeChrome();
  // The debugger (cdp.js sends through it): only what settle reads, the renderer's ScriptDuration.
  scriptSeconds = () => 0;
  metricReads = 0;
  watches = 0;
  fake.debugger = {
    onEvent: new FakeEvent(),
    onDetach: new FakeEvent(),
    attach: async () => {},
    sendCommand: async (target, method) => {
      if (method === 'Performance.getMetrics') {
        return { metrics: [{ name: 'ScriptDuration', value: scriptSeconds(++metricReads) }] };
      }
      return {};
    },
  };
  settle.listen(fake);
});

test('an action after which nothing happens and no page script ran says nothing and waits a frame', async () => {
  page(() => quiet);
  const r = await settle.settleAfter(TAB, async () => 42);
  assert.equal(r.value, 42);
  assert.equal(r.note, '');
  assert.equal(checks.length, 1);
  assert.equal(checks[0].idleMs, settle.IDLE_MS);
  assert.equal(metricReads, 2);
});

test('an action whose handler ran waits longer for what it deferred', async () => {
  scriptSeconds = (n) => n * 0.001; // the read after the action is larger
  page(() => quiet);
  await settle.settleAfter(TAB, async () => null);
  assert.equal(checks[0].idleMs, settle.SCRIPT_IDLE_MS);
  assert.equal(checks[0].quietMs, settle.QUIET_MS);
});

test('without the debugger, the longer wait is the safe one', async () => {
  fake.debugger.sendCommand = async () => {
    throw new Error('Cannot attach to this target');
  };
  page(() => quiet);
  await settle.settleAfter(TAB, async () => null);
  assert.equal(checks[0].idleMs, settle.SCRIPT_IDLE_MS);
});

test('typing only reports: no wait, no metrics', async () => {
  page(() => ({ ...quiet, changed: true, notes: ['the page changed'] }));
  const r = await settle.settleAfter(TAB, async () => null, settle.REPORT_ONLY);
  assert.equal(r.note, 'The page changed.');
  assert.equal(checks[0].last, true);
  assert.equal(metricReads, 0);
});

test('the read before the action is handed to it, to await before its presses', async () => {
  page(() => quiet);
  // The first read answers only once the action has started (its move goes meanwhile).
  let started;
  const actStarted = new Promise((resolve) => (started = resolve));
  const send = fake.debugger.sendCommand;
  fake.debugger.sendCommand = async (target, method, params) => {
    if (method === 'Performance.getMetrics' && metricReads === 0) await actStarted;
    return send(target, method, params);
  };
  const r = await settle.settleAfter(TAB, async (scriptRead) => {
    started();
    assert.equal(await scriptRead, 0);
    return 'clicked';
  });
  assert.equal(r.value, 'clicked');
  assert.equal(metricReads, 2);
  assert.equal(checks[0].idleMs, settle.IDLE_MS);
});

test('a caller that started the watch itself is not watched again', async () => {
  page(() => quiet);
  await settle.settleAfter(TAB, async () => null, { watched: true });
  assert.equal(watches, 0);
  assert.equal(checks.length, 1);
});

test("an action that brought the page's answer back itself is not asked again", async () => {
  page(() => {
    throw new Error('the page was asked again');
  });
  const answer = { done: true, settled: true, changed: true, notes: ['message: "Saved"'] };
  const r = await settle.settleAfter(TAB, async () => ['set', answer], {
    ...settle.REPORT_ONLY,
    watched: true,
    answer: (v) => v[1],
  });
  assert.deepEqual(r.value, ['set', answer]);
  assert.equal(r.note, 'Message: "Saved".');
  assert.equal(checks.length, 0);
  assert.equal(watches, 0);
  assert.equal(metricReads, 0);
});

test('several ops run in one call into the page; the first failure is thrown', async () => {
  const calls = [];
  fake.scripting.executeScript = async ({ args }) => {
    const [, op, opArgs] = args;
    calls.push([op, opArgs]);
    const value = [
      { ok: true, value: { x: 1 } },
      { ok: false, error: 'no element ref_9' },
    ];
    return [{ frameId: 0, result: { ok: true, value: value.slice(0, opArgs.calls.length) } }];
  };
  assert.deepEqual(await settle.runOps(TAB, [['locate', { ref: 'ref_1' }]]), [{ x: 1 }]);
  await assert.rejects(
    settle.runOps(TAB, [
      ['locate', { ref: 'ref_1' }],
      ['locate', { ref: 'ref_9' }],
    ]),
    /no element ref_9/,
  );
  assert.deepEqual(
    calls.map(([op]) => op),
    ['batch', 'batch'],
  );
});

test('what the page names is said as a sentence', async () => {
  page(() => ({ done: true, settled: true, notes: ['a dialog opened: "Saved" [ref_3]'] }));
  const r = await settle.settleAfter(TAB, async () => null);
  assert.equal(r.note, 'A dialog opened: "Saved" [ref_3].');
  assert.equal(checks.length, 1);
});

test('a hidden tab answers at once and the worker paces the checks', async () => {
  page((a, n) => (n < 3 ? { done: false, wait: 5 } : { ...quiet, notes: ['a dialog opened: "Saved" [ref_3]'] }));
  const r = await settle.settleAfter(TAB, async () => null);
  assert.equal(r.note, 'A dialog opened: "Saved" [ref_3].');
  assert.equal(checks.length, 3);
});

test('a page still changing at the bound says so', async () => {
  page((a) => (a.last ? { done: true, settled: false, notes: ['the page changed'] } : { done: false, wait: 5 }));
  const r = await settle.settleAfter(TAB, async () => null, { maxMs: 60 });
  assert.equal(r.note, 'The page changed; the page was still changing after 0.06 s.');
  assert.equal(checks.at(-1).last, true);
});

test('a request the action started is waited for, then the page is asked again from then', async () => {
  page((a, n) => {
    if (n === 1) {
      // Quiet ("Saving…" shown), the request still out; it answers 30 ms later.
      setTimeout(() => cdpEvent('Network.loadingFinished', { requestId: 'r1' }), 30);
      return { ...quiet, changed: true, notes: ['message: "Saving…"'] };
    }
    return { ...quiet, changed: true, notes: ['message: "Saved 3 changes."'] };
  });
  const r = await settle.settleAfter(TAB, async () => {
    cdpEvent('Network.requestWillBeSent', { requestId: 'r1', type: 'Fetch', request: { url: 'http://x/api' } });
    cdpEvent('Network.requestWillBeSent', { requestId: 'img', type: 'Image', request: { url: 'http://x/a.png' } });
  });
  assert.equal(r.note, 'Message: "Saved 3 changes.".');
  assert.equal(checks.length, 2);
  assert.equal(checks[1].restart, true);
  assert.equal(checks[1].idleMs, settle.QUIET_MS);
});

test('a request that has not answered at the bound is named', async () => {
  page(() => quiet);
  const r = await settle.settleAfter(
    TAB,
    async () =>
      cdpEvent('Network.requestWillBeSent', { requestId: 'r2', type: 'XHR', request: { url: 'http://x/slow' } }),
    { maxMs: 40 },
  );
  assert.equal(r.note, 'A request it started has not answered after 0.04 s (http://x/slow).');
});

test('a navigation the action started is waited for until it commits', async () => {
  page(() => new Error('Frame was removed'));
  const r = await settle.settleAfter(TAB, async () => {
    nav('onBeforeNavigate');
    setTimeout(() => nav('onCommitted'), 30);
  });
  assert.equal(r.note, 'Navigated to http://x/2.');
});

test('a navigation the page saw start is waited for though the browser reports it later', async () => {
  page(() => ({ done: true, settled: false, leaving: 'http://x/2', notes: [] }));
  const r = await settle.settleAfter(TAB, async () => {
    setTimeout(() => nav('onBeforeNavigate'), 20);
    setTimeout(() => nav('onCommitted'), 40);
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
  page(() => quiet);
  const r = await settle.settleAfter(TAB, async () => null);
  assert.equal(r.note, '');
});

test('a failed action is thrown, and the page stops watching', async () => {
  page(() => quiet);
  await assert.rejects(
    settle.settleAfter(TAB, async () => {
      throw new Error('click failed');
    }),
    /click failed/,
  );
  await new Promise((r) => setTimeout(r, 5));
  assert.deepEqual(checks, [{ last: true }]);
});

const openedTab = () =>
  fake.webNavigation.onCreatedNavigationTarget.dispatch({
    sourceTabId: TAB,
    sourceFrameId: 0,
    tabId: 99,
    url: 'http://x/help',
  });

test('a tab the action opened is named with its id and URL', async () => {
  page(() => quiet);
  const r = await settle.settleAfter(TAB, async () => openedTab());
  assert.equal(r.note, 'Opened tab 99 at http://x/help.');
});

test('a tab the page asked for is waited for when its event comes after the page settled', async () => {
  page(() => quiet);
  const r = await settle.settleAfter(TAB, async () => {
    cdpEvent('Page.windowOpen', { url: 'http://x/help' });
    setTimeout(openedTab, 30);
  });
  assert.equal(r.note, 'Opened tab 99 at http://x/help.');
});
