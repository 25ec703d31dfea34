// Holds an agent's tab at its size while Chrome moves the debugger's bar
// around a navigation.
//
// While an extension uses chrome.debugger, Chrome shows "… started
// debugging this browser" above every tab. It drops that bar from a tab at
// each navigation's commit and shows it again at the tab's next change,
// usually the end of the load, each a 120 ms slide, so the page is resized
// two or three times (757 ↔ 812 px here) in the quarter second after the
// load (docs/performance.md, "The first read of a page"). A page that is
// scrolled to its end moves by the bar's height when it grows, so a click
// placed by locate just before lands 55 px off: the page set's settings
// task missed its Save button once in thirty rounds that way.
//
// So from the start of a main-frame navigation of a tab the debugger is
// attached to until HOLD_AFTER_LOAD_MS after its load, the page's viewport
// is held at the tab's size (Emulation.setDeviceMetricsOverride with
// dontSetVisibleSize: the view keeps its size, the page keeps its viewport;
// screen, scale and zoom as they are). The bar still moves and the view
// with it; the page is not laid out again, and what a tool read or located
// stays where it was. A hold ends early when the window's bounds change
// (the person resizes it) and at the latest MAX_HOLD_MS after it began;
// tabs at a zoom other than 100%, and tabs whose viewport a relay client
// emulates itself (forwardCDPCommand with Emulation.*), are never held.
//
// State: the held tabs in memory, and their ids in chrome.storage.session,
// so that a restarted worker lets go of the holds the last one left (an
// override lasts as long as the debugger's session).

import { send, isAttached, barUpFor } from './cdp.js';

/** How long a hold outlasts the load (ms): the bar's return and its slide, with room on a busy machine. */
export const HOLD_AFTER_LOAD_MS = 600;
/** The longest a hold lasts (ms), loaded or not: a page still loading after it may be resized as before. */
export const MAX_HOLD_MS = 10_000;
/**
 * How long the bar must have been up before a hold (ms): the tab's size is
 * read while it slides in after our first attachment, and a hold at the size
 * without it would hide the page's bottom behind the bar's height.
 */
export const BAR_SETTLE_MS = 500;
const STORAGE_KEY = 'bb.steadyViews';

/** tabId -> {windowId, since, timer}: the tabs whose viewport is held. */
const holds = new Map();
/** Tabs whose viewport a relay client emulates: theirs to set and clear. */
const clientEmulated = new Set();

function storage() {
  return globalThis.chrome?.storage?.session || null;
}

function saveHeld() {
  storage()
    ?.set({ [STORAGE_KEY]: [...holds.keys()] })
    .catch(() => {});
}

/**
 * Holds tab's viewport at its size (tab: a chrome.tabs.Tab of it, as fresh
 * as the caller has), unless it is held already (then the hold goes on), the
 * debugger is not attached to it (no bar to move, and no session to hold
 * with), the bar is still sliding in after our first attachment, its zoom
 * is not 100% or a relay client emulates its viewport.
 * Resolves once the override is in place (or was not set).
 * @param {chrome.tabs.Tab} tab
 * @returns {Promise<boolean>} whether the tab is held
 */
export async function hold(tab) {
  const tabId = tab?.id;
  if (tabId === undefined) return false;
  const held = holds.get(tabId);
  if (held) {
    endIn(tabId, held, capLeft(held));
    return true;
  }
  if (!isAttached(tabId) || !barUpFor(BAR_SETTLE_MS) || clientEmulated.has(tabId)) return false;
  if (!(tab.width > 0) || !(tab.height > 0)) return false;
  const rec = { windowId: tab.windowId, since: Date.now(), timer: null };
  // Before the awaits: a second navigation meanwhile joins this hold, and a release ends it.
  holds.set(tabId, rec);
  endIn(tabId, rec, MAX_HOLD_MS);
  try {
    const zoom = await chrome.tabs.getZoom(tabId);
    if (Math.abs(zoom - 1) > 1e-6) throw new Error('zoomed');
    await send(tabId, 'Emulation.setDeviceMetricsOverride', {
      width: tab.width,
      height: tab.height,
      deviceScaleFactor: 0,
      mobile: false,
      dontSetVisibleSize: true,
    });
  } catch {
    if (holds.get(tabId) === rec) {
      clearTimeout(rec.timer);
      holds.delete(tabId);
    }
    return false;
  }
  if (holds.get(tabId) !== rec) {
    // Released while the override was on its way: take it off again.
    send(tabId, 'Emulation.clearDeviceMetricsOverride', {}).catch(() => {});
    return false;
  }
  saveHeld();
  return true;
}

/** How long a hold may still last (ms): what MAX_HOLD_MS leaves of it. */
const capLeft = (held) => Math.max(0, held.since + MAX_HOLD_MS - Date.now());

/** Ends a hold ms from now, instead of when it was to end. */
function endIn(tabId, held, ms) {
  clearTimeout(held.timer);
  held.timer = setTimeout(() => release(tabId), ms);
}

/** Ends tabId's hold HOLD_AFTER_LOAD_MS from now (its load ended), unless MAX_HOLD_MS comes first. */
export function releaseSoon(tabId) {
  const held = holds.get(tabId);
  if (held) endIn(tabId, held, Math.min(HOLD_AFTER_LOAD_MS, capLeft(held)));
}

/**
 * Ends tabId's hold now: the page gets the view's size again.
 * @param {number} tabId
 * @returns {Promise<void>} once the override is off
 */
export async function release(tabId) {
  const held = holds.get(tabId);
  if (!held) return;
  clearTimeout(held.timer);
  holds.delete(tabId);
  saveHeld();
  await send(tabId, 'Emulation.clearDeviceMetricsOverride', {}).catch(() => {});
}

/** Whether tabId's viewport is held now (for tests and the benchmarks). */
export function isHeld(tabId) {
  return holds.has(tabId);
}

/**
 * A relay client sent an Emulation.* command to tabId: the viewport is its
 * to set from now on (until the tab closes); a hold of ours ends first, so
 * that our clearing does not undo what the client set.
 * @param {number} tabId
 */
export async function yieldToClient(tabId) {
  clientEmulated.add(tabId);
  await release(tabId);
}

function forget(tabId) {
  const held = holds.get(tabId);
  if (held) clearTimeout(held.timer);
  if (holds.delete(tabId)) saveHeld();
  clientEmulated.delete(tabId);
}

// ---------------------------------------------------------------------------
// Listeners

/** webNavigation.onBeforeNavigate: a main-frame load of an agent's tab starts (a link, a script, the person). */
async function onBeforeNavigate(d) {
  if (!d || d.frameId !== 0 || d.documentLifecycle === 'prerender' || !isAttached(d.tabId)) return;
  if (holds.has(d.tabId)) {
    // A new load while the last one's hold runs out: it goes on until this one ends.
    await hold({ id: d.tabId });
    return;
  }
  const tab = await chrome.tabs.get(d.tabId).catch(() => null);
  if (tab) await hold(tab);
}

/** webNavigation.onCompleted / onErrorOccurred: the main frame's load ended. */
function onLoadEnded(d) {
  if (d && d.frameId === 0) releaseSoon(d.tabId);
}

/** windows.onBoundsChanged: the window was resized; its tabs' pages must follow now. */
function onBoundsChanged(win) {
  for (const [tabId, held] of holds) if (held.windowId === win?.id) release(tabId);
}

/** A restarted worker: the holds its last start left (in storage) are let go. */
async function releaseLeftOver() {
  try {
    const got = await storage()?.get(STORAGE_KEY);
    const left = got?.[STORAGE_KEY] || [];
    if (!left.length) return;
    await storage().remove(STORAGE_KEY);
    for (const tabId of left) {
      if (!holds.has(tabId)) send(tabId, 'Emulation.clearDeviceMetricsOverride', {}).catch(() => {});
    }
  } catch {
    /* storage unavailable */
  }
}

/**
 * Adds the listeners (at the top level of the worker; tests call it on their fake).
 * @param {typeof chrome} api
 */
export function listen(api = globalThis.chrome) {
  if (!api?.webNavigation?.onBeforeNavigate || !api?.debugger) return false;
  api.webNavigation.onBeforeNavigate.addListener(onBeforeNavigate);
  api.webNavigation.onCompleted?.addListener(onLoadEnded);
  api.webNavigation.onErrorOccurred?.addListener(onLoadEnded);
  api.windows?.onBoundsChanged?.addListener(onBoundsChanged);
  api.tabs?.onRemoved?.addListener(forget);
  api.debugger.onDetach?.addListener((source) => {
    // The override went with the debugger's session.
    if (source?.tabId !== undefined) forget(source.tabId);
  });
  releaseLeftOver();
  return true;
}

listen();
