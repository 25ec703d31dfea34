// sw/steadyview.js: an agent's page keeps its size through a load while
// Chrome moves the debugger's bar. chrome.debugger is played by a fake that
// records the commands sent (it stands for the tab's DevTools session);
// the clock and timers are node's mocks. TestSteadyViewport runs it in
// Chromium.
import { test, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeChrome, FakeEvent } from './fake-chrome.js';
import * as cdp from '../sw/cdp.js';
import * as steadyview from '../sw/steadyview.js';

let fake;
let sent; // [tabId, method, params] of each command
let zoom;

const OVERRIDE = 'Emulation.setDeviceMetricsOverride';
const CLEAR = 'Emulation.clearDeviceMetricsOverride';
const emulation = () => sent.filter(([, m]) => m.startsWith('Emulation.'));
const tick = (t, ms) => t.mock.timers.tick(ms);
// Lets the awaits in hold() and the listeners run (they wait on fakes that answer at once).
const settle = async () => {
  for (let i = 0; i < 10; i++) await Promise.resolve();
};

beforeEach(() => {
  fake = installFakeChrome();
  sent = [];
  zoom = 1;
  fake.debugger = {
    attach: async () => {},
    detach: async () => {},
    sendCommand: async (target, method, params) => {
      sent.push([target.tabId, method, params]);
      return {};
    },
    onEvent: new FakeEvent(),
    onDetach: new FakeEvent(),
  };
  fake.tabs.getZoom = async () => zoom;
  fake.windows.onBoundsChanged = new FakeEvent();
  globalThis.chrome = fake;
  steadyview.listen(fake);
});

afterEach(async () => {
  for (const id of [1, 2, 3, 4, 5, 6, 7, 8]) {
    await steadyview.release(id);
    cdp.forgetTab(id);
  }
});

/** A tab of the fake, with the size Chrome gives a tab under the bar. */
async function tabOf(id, { windowId = 1 } = {}) {
  return { id, windowId, width: 1280, height: 757, url: 'https://example.test/' };
}

/** A tab of the fake with the size Chrome gives its tabs (the fake's have none), the debugger attached and settled. */
async function sizedTab(t) {
  const tab = await fake.tabs.create({ url: 'https://example.test/a', active: true });
  const get = fake.tabs.get;
  fake.tabs.get = async (id) => ({ ...(await get(id)), width: 1280, height: 757 });
  await attachSettled(t, tab.id);
  return tab;
}

/** Attaches the debugger to tabId and lets the bar settle (BAR_SETTLE_MS). */
async function attachSettled(t, tabId) {
  await cdp.attach(tabId);
  tick(t, steadyview.BAR_SETTLE_MS);
  sent = [];
}

test('a hold pins the page at the tab size and lets go after the load', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'] });
  await attachSettled(t, 1);
  assert.equal(await steadyview.hold(await tabOf(1)), true);
  assert.deepEqual(emulation(), [
    [1, OVERRIDE, { width: 1280, height: 757, deviceScaleFactor: 0, mobile: false, dontSetVisibleSize: true }],
  ]);
  assert.equal(steadyview.isHeld(1), true);
  // A second navigation meanwhile joins the hold: no second override.
  assert.equal(await steadyview.hold(await tabOf(1)), true);
  assert.equal(emulation().length, 1);
  steadyview.releaseSoon(1);
  tick(t, steadyview.HOLD_AFTER_LOAD_MS - 1);
  assert.equal(steadyview.isHeld(1), true);
  tick(t, 1);
  await settle();
  assert.equal(steadyview.isHeld(1), false);
  assert.deepEqual(emulation().at(-1), [1, CLEAR, {}]);
});

test('no hold where it would do harm or nothing', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'] });
  // Not attached: no bar moves for it, and no session to hold with.
  assert.equal(await steadyview.hold(await tabOf(2)), false);
  // Attached just now: the bar is still sliding in, the tab's size is not the one it will have.
  await cdp.attach(2);
  assert.equal(await steadyview.hold(await tabOf(2)), false);
  tick(t, steadyview.BAR_SETTLE_MS);
  // Zoomed: the override's pixels are not the page's.
  zoom = 1.25;
  assert.equal(await steadyview.hold(await tabOf(2)), false);
  zoom = 1;
  // No size known.
  assert.equal(await steadyview.hold({ ...(await tabOf(2)), width: undefined }), false);
  assert.deepEqual(emulation(), []);
  assert.equal(steadyview.isHeld(2), false);
  assert.equal(await steadyview.hold(await tabOf(2)), true);
});

test('a hold ends at MAX_HOLD_MS even while the page still loads', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'] });
  await attachSettled(t, 3);
  await steadyview.hold(await tabOf(3));
  tick(t, steadyview.MAX_HOLD_MS - 100);
  steadyview.releaseSoon(3); // the load ends late: the cap still holds
  tick(t, 100);
  await settle();
  assert.equal(steadyview.isHeld(3), false);
  assert.deepEqual(emulation().at(-1), [3, CLEAR, {}]);
});

test('a resized window lets its held tabs go at once, and only those', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'] });
  await attachSettled(t, 4);
  await cdp.attach(5);
  await steadyview.hold(await tabOf(4, { windowId: 1 }));
  await steadyview.hold(await tabOf(5, { windowId: 2 }));
  fake.windows.onBoundsChanged.dispatch({ id: 1, width: 900, height: 700 });
  await settle();
  assert.equal(steadyview.isHeld(4), false);
  assert.equal(steadyview.isHeld(5), true);
  assert.deepEqual(
    emulation().filter(([, m]) => m === CLEAR),
    [[4, CLEAR, {}]],
  );
});

test('a relay client that emulates the viewport keeps it: ours is let go and never set again', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'] });
  await attachSettled(t, 6);
  await steadyview.hold(await tabOf(6));
  await steadyview.yieldToClient(6);
  assert.equal(steadyview.isHeld(6), false);
  assert.equal(await steadyview.hold(await tabOf(6)), false);
  assert.deepEqual(
    emulation().map(([, m]) => m),
    [OVERRIDE, CLEAR],
  );
});

test('a navigation the page starts holds the tab, and its load lets go', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'] });
  const tab = await sizedTab(t);
  fake.webNavigation.onBeforeNavigate.dispatch({ tabId: tab.id, frameId: 0, url: 'https://example.test/b' });
  await settle();
  assert.equal(steadyview.isHeld(tab.id), true);
  // A subframe's and a prerender's loads are not the tab's.
  fake.webNavigation.onCompleted.dispatch({ tabId: tab.id, frameId: 3, url: 'https://example.test/f' });
  tick(t, steadyview.HOLD_AFTER_LOAD_MS);
  assert.equal(steadyview.isHeld(tab.id), true);
  fake.webNavigation.onCompleted.dispatch({ tabId: tab.id, frameId: 0, url: 'https://example.test/b' });
  tick(t, steadyview.HOLD_AFTER_LOAD_MS);
  await settle();
  assert.equal(steadyview.isHeld(tab.id), false);
  fake.webNavigation.onBeforeNavigate.dispatch({
    tabId: tab.id,
    frameId: 0,
    documentLifecycle: 'prerender',
    url: 'https://example.test/c',
  });
  await settle();
  assert.equal(steadyview.isHeld(tab.id), false);
  cdp.forgetTab(tab.id);
});

test('a load that starts while the last one is letting go keeps the hold until it ends', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'] });
  const tab = await sizedTab(t);
  const nav = (url) => fake.webNavigation.onBeforeNavigate.dispatch({ tabId: tab.id, frameId: 0, url });
  const loaded = (url) => fake.webNavigation.onCompleted.dispatch({ tabId: tab.id, frameId: 0, url });
  nav('https://example.test/b');
  await settle();
  loaded('https://example.test/b');
  tick(t, steadyview.HOLD_AFTER_LOAD_MS / 2);
  nav('https://example.test/c'); // a link clicked while b's hold runs out
  await settle();
  tick(t, steadyview.HOLD_AFTER_LOAD_MS);
  await settle();
  assert.equal(steadyview.isHeld(tab.id), true, "c's load has not ended: the page is still held");
  loaded('https://example.test/c');
  tick(t, steadyview.HOLD_AFTER_LOAD_MS);
  await settle();
  assert.equal(steadyview.isHeld(tab.id), false);
  assert.deepEqual(
    emulation().map(([, m]) => m),
    [OVERRIDE, CLEAR], // one hold from b's start to c's end
  );
  cdp.forgetTab(tab.id);
});

test('a closed tab or a detached debugger leaves no hold behind', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'] });
  await attachSettled(t, 7);
  await steadyview.hold(await tabOf(7));
  fake.debugger.onDetach.dispatch({ tabId: 7 }, 'canceled_by_user');
  assert.equal(steadyview.isHeld(7), false);
  assert.deepEqual(
    emulation().map(([, m]) => m),
    [OVERRIDE], // the override went with the session: nothing to clear
  );
});

test('a restarted worker lets go of the holds its last start left', async () => {
  await fake.storage.session.set({ 'bb.steadyViews': [8] });
  steadyview.listen(fake);
  await settle();
  await new Promise((r) => setTimeout(r, 0));
  assert.deepEqual(
    sent.filter(([, m]) => m === CLEAR),
    [[8, CLEAR, {}]],
  );
  assert.deepEqual(await fake.storage.session.get('bb.steadyViews'), {});
});
