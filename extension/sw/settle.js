// After an action (a click, a drag, keys), waits for the page to settle and
// says what changed, so that the model's next look at the page
// sees what the action did and often need not look at all.
//
// Settled means: the animations the action started finished and the DOM
// quiet since (content/page/settle.js watches both in the page, and waits
// there: one call after the action), the requests it started (fetch, XHR, a
// script it loads) answered, a main-frame navigation it started committed
// (webNavigation) and a tab it opened known. The wait is bounded by MAX_MS.
//
// How long "quiet" is depends on what the action did; the numbers are small
// because every click and key pays them when nothing follows (issue 32's
// speed goal counts each step):
// - no page script ran for it (the debugger's ScriptDuration did not grow)
//   and nothing changed: IDLE_MS, a frame;
// - a handler ran and changed nothing yet: SCRIPT_IDLE_MS, since such a
//   handler has usually deferred its work (a timer, an await);
// - the DOM changed or an animation ran: QUIET_MS after the last change or
//   the end of the last animation.
// An action after which nothing happens costs two calls into the page
// (watch, which callers fold into the call that locates the target, and
// settle), two reads of the metrics (the first while the pointer moves to
// the target) and IDLE_MS.

import { runAgent } from '../content/agent.js';
import * as cdp from './cdp.js';

/**
 * After a change, how long the DOM must then stay unchanged (ms): three
 * frames at 60 Hz, time for what a framework does after a change (a render
 * in a microtask, a requestAnimationFrame, a setTimeout 0) to show. Later
 * work that follows a change is mostly a request (waited for below) or an
 * animation (waited for in the page).
 */
export const QUIET_MS = 50;
/**
 * After an action for which no page script ran and after which nothing
 * changed, how long to wait (ms): one frame. Without script, what a click
 * or key does happens while it is dispatched: a link's or form's navigation
 * (the page's navigate event tells settle at once), a details element, a
 * popover, a focus style and the transition it starts (getAnimations sees it
 * at once). A new tab is the exception: it is awaited by its
 * Page.windowOpen event below.
 */
export const IDLE_MS = 16;
/**
 * After an action whose handler ran but changed nothing yet (ms): such a
 * handler has usually deferred its work to a timer or an await (a request
 * is waited for apart). The page waits with its own timers, which fire in
 * the order they are due, so a timer the handler set for up to 150 ms fires
 * before this window ends: the delays pages put before showing what a
 * click did (a modal inserted 80 ms later in settle.html, 150 ms in
 * settle_test.go's delayed page), well below the 0.6-1.5 s Playwright waits
 * after every click.
 */
export const SCRIPT_IDLE_MS = 150;
/** The most an action waits for the page after it (ms). */
export const MAX_MS = 1500;
/**
 * For typing and form_input: say what changed by the time the action
 * returned, without waiting. What opens a dialog or leaves the page is a
 * click or a key (Enter), which wait; waiting after every field cost about
 * 100 ms a step of the 10-step task (issue 32's speed goal).
 */
export const REPORT_ONLY = { quietMs: 0, idleMs: 0, scriptIdleMs: 0, maxMs: 0 };

// ---------------------------------------------------------------------------
// Main-frame navigations, per tab: {startedAt, committedAt, url, error}.

const navs = new Map();
/** tabId -> Set of functions called on each of the tab's navigation events. */
const waiters = new Map();

function record(tabId, change) {
  const rec = { ...(navs.get(tabId) || {}), ...change };
  navs.set(tabId, rec);
  for (const fn of waiters.get(tabId) || []) fn(rec);
}

/** webNavigation.onBeforeNavigate: a main-frame load started. */
export function onBeforeNavigate(d) {
  if (d && d.frameId === 0) record(d.tabId, { startedAt: Date.now(), committedAt: 0, url: d.url, error: null });
}

/** webNavigation.onCommitted: the main frame shows a new document. */
export function onCommitted(d) {
  if (d && d.frameId === 0) record(d.tabId, { committedAt: Date.now(), url: d.url });
}

/** tabId -> [{tabId, url, at}]: tabs its pages opened (a link with target=_blank, window.open). */
const opened = new Map();
/** tabId -> functions called when a page of the tab opened a tab. */
const openWaiters = new Map();

/** Resolves once a tab opened by tabId's pages since `since` is known, or after ms. */
function waitOpened(tabId, since, ms) {
  const seen = () => (opened.get(tabId) || []).some((o) => o.at >= since);
  if (seen()) return Promise.resolve();
  return new Promise((resolve) => {
    const set = openWaiters.get(tabId) || new Set();
    openWaiters.set(tabId, set);
    const done = () => {
      clearTimeout(timer);
      set.delete(fn);
      if (set.size === 0) openWaiters.delete(tabId);
      resolve();
    };
    const fn = () => seen() && done();
    const timer = setTimeout(done, Math.max(0, ms));
    set.add(fn);
  });
}

/** webNavigation.onCreatedNavigationTarget: a page of sourceTabId opened a tab. */
export function onCreatedNavigationTarget(d) {
  if (!d || d.sourceFrameId === undefined) return;
  const list = (opened.get(d.sourceTabId) || []).filter((o) => Date.now() - o.at < 60_000);
  list.push({ tabId: d.tabId, url: d.url, at: Date.now() });
  opened.set(d.sourceTabId, list);
  for (const fn of openWaiters.get(d.sourceTabId) || []) fn();
}

/** webNavigation.onErrorOccurred: the main frame's load failed or was aborted. */
export function onErrorOccurred(d) {
  if (d && d.frameId === 0) record(d.tabId, { error: d.error });
}

/**
 * Adds the listeners (at the top level of the worker; tests call it on their fake).
 * @param {typeof chrome} api
 */
export function listen(api = globalThis.chrome) {
  if (!api?.webNavigation?.onBeforeNavigate) return false;
  api.webNavigation.onBeforeNavigate.addListener(onBeforeNavigate);
  api.webNavigation.onCommitted.addListener(onCommitted);
  api.webNavigation.onErrorOccurred.addListener(onErrorOccurred);
  api.webNavigation.onCreatedNavigationTarget?.addListener(onCreatedNavigationTarget);
  api.debugger?.onEvent?.addListener(onDebuggerEvent);
  api.tabs?.onRemoved?.addListener((tabId) => {
    navs.delete(tabId);
    opened.delete(tabId);
    scriptMetrics.delete(tabId);
  });
  return true;
}

listen();

/**
 * Resolves with the tab's navigation record once ok(rec) holds, or with null
 * after ms or on cancel(); the promise carries its cancel function.
 */
function waitNav(tabId, ok, ms) {
  const now = navs.get(tabId);
  let done;
  const p = new Promise((resolve) => {
    if (now && ok(now)) return resolve(now);
    const set = waiters.get(tabId) || new Set();
    waiters.set(tabId, set);
    const fn = (rec) => ok(rec) && done(rec);
    const timer = setTimeout(() => done(null), Math.max(0, ms));
    done = (v) => {
      clearTimeout(timer);
      set.delete(fn);
      if (set.size === 0) waiters.delete(tabId);
      resolve(v);
    };
    set.add(fn);
  });
  p.cancel = () => done && done(null);
  return p;
}

// ---------------------------------------------------------------------------
// Requests the page makes while an action settles, from the debugger's
// Network events (cdp.js enables the domain when it attaches): seen from
// here, the page's fetch and XMLHttpRequest stay as the page made them.

/** tabId -> Map requestId -> {url, at}: requests in flight, kept while the tab's action settles. */
const inflight = new Map();
/** tabId -> functions called when a request of the tab ends. */
const requestWaiters = new Map();
/**
 * The kinds of request a page's code waits on before it shows what a click
 * did: its data (fetch, XHR) and code it loads on demand (a dialog's module).
 * Not images, fonts, beacons or event streams, which do not hold it back.
 */
const AWAITED = new Set(['Fetch', 'XHR', 'Script']);

/**
 * tabId -> when a page of the tab last asked for a new window (Page.windowOpen,
 * sent while the click is dispatched, before the new tab's
 * onCreatedNavigationTarget reaches the worker).
 */
const windowOpens = new Map();

/** chrome.debugger.onEvent: keeps the requests of the tabs being watched, and their new windows. */
export function onDebuggerEvent(source, method, params) {
  const reqs = source && inflight.get(source.tabId);
  if (!reqs || !params) return;
  if (method === 'Page.windowOpen') windowOpens.set(source.tabId, Date.now());
  else if (method === 'Network.requestWillBeSent') {
    if (AWAITED.has(params.type) && !reqs.has(params.requestId)) {
      reqs.set(params.requestId, { url: params.request?.url || '', at: Date.now() });
    }
  } else if (method === 'Network.loadingFinished' || method === 'Network.loadingFailed') {
    if (reqs.delete(params.requestId)) for (const fn of requestWaiters.get(source.tabId) || []) fn();
  }
}

/** Resolves once no request of tabId is in flight, or after ms (then with false). */
function requestsDone(tabId, ms) {
  const reqs = inflight.get(tabId);
  if (!reqs || reqs.size === 0) return Promise.resolve(true);
  return new Promise((resolve) => {
    const set = requestWaiters.get(tabId) || new Set();
    requestWaiters.set(tabId, set);
    const done = (v) => {
      clearTimeout(timer);
      set.delete(fn);
      if (set.size === 0) requestWaiters.delete(tabId);
      resolve(v);
    };
    const fn = () => reqs.size === 0 && done(true);
    const timer = setTimeout(() => done(false), Math.max(0, ms));
    set.add(fn);
  });
}

// ---------------------------------------------------------------------------
// Whether page script ran for the action: the renderer's ScriptDuration
// (Performance.getMetrics), read before and after it. Our own page agent
// runs no code between the two reads (its MutationObserver only when the DOM
// changed, which counts as a change anyway). The first read is made while
// the pointer moves to the target (act() gets it, to await before the
// presses), so that only the read after the action is a round trip of its
// own.
//
// Looked at and left: DevTools' getEventListeners (which would tell whether
// the page listens on the action's way, whatever its own timers do) is not
// offered to an extension's debugger (Runtime.evaluate's command line API
// is undefined there), and DOMDebugger.getEventListeners takes a call per
// object on the way, more than the two reads; the Event Timing API reports
// only events that took 16 ms or more to paint.

/** Tabs whose Performance domain we enabled (lost when the debugger detaches). */
const scriptMetrics = new Set();

/** Seconds of script the tab's renderer ran so far, or null when unknown. */
async function scriptSeconds(tabId) {
  const read = async () => {
    const { metrics } = await cdp.send(tabId, 'Performance.getMetrics', {}, { timeoutMs: 2000 });
    const m = (metrics || []).find((x) => x.name === 'ScriptDuration');
    return m ? m.value : null;
  };
  try {
    if (scriptMetrics.has(tabId)) return await read();
  } catch {
    scriptMetrics.delete(tabId); // detached and attached again since
  }
  try {
    await cdp.send(tabId, 'Performance.enable', {}, { timeoutMs: 2000 });
    scriptMetrics.add(tabId);
    return await read();
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------------------
// Around an action

/**
 * Runs several page agent ops in one call into the page (page/actions.js
 * batch) and answers their values in order; throws the first failure's
 * error, naming what failed as the op itself would.
 * @param {number} tabId
 * @param {Array<[string, object]>} calls
 * @returns {Promise<Array<*>>}
 */
export async function runOps(tabId, calls) {
  const results = await runAgent(tabId, 'batch', { calls });
  const failed = results.find((r) => !r.ok);
  if (failed) throw new Error(failed.error);
  return results.map((r) => r.value);
}

/**
 * Runs act() and then waits for the page of tabId to settle.
 *
 * The page must be watched from before the action: settleAfter asks it to
 * (one call into the page), unless the caller folded watch into a call of
 * its own just before (watched: true; a click's locate, form_input's fill).
 * act(scriptRead) gets the promise of the ScriptDuration read made before
 * the action and must await it before the input that can run the page's
 * handlers (a press, a key), not before a move it can send meanwhile.
 * answer: for callers whose act() already asked the page for its final
 * answer in the same call (form_input: watch, fill and settle in one), the
 * page's answer from act()'s value.
 * @template T
 * @param {number} tabId
 * @param {(scriptRead: Promise<*>) => Promise<T>} act the action
 * @param {{quietMs?: number, idleMs?: number, scriptIdleMs?: number, maxMs?: number,
 *   watched?: boolean, answer?: (value: T) => object}} [opts]
 * @returns {Promise<{value: T, note: string}>} the action's value and a sentence
 *   on what changed after it ('' when nothing did)
 */
export async function settleAfter(
  tabId,
  act,
  {
    quietMs = QUIET_MS,
    idleMs = IDLE_MS,
    scriptIdleMs = SCRIPT_IDLE_MS,
    maxMs = MAX_MS,
    watched: watchedBefore = false,
    answer = null,
  } = {},
) {
  const before = Date.now();
  const waits = maxMs > 0;
  // One settle of a tab at a time keeps the requests; a second one shares the map.
  const ownRequests = waits && !inflight.has(tabId);
  if (ownRequests) inflight.set(tabId, new Map());
  try {
    const watched =
      watchedBefore ||
      (await runAgent(tabId, 'watch').then(
        () => true,
        () => false, // not scriptable (or navigating): still wait for a navigation
      ));
    // Read after watch, whose own script would count otherwise.
    const scriptRead = waits ? scriptSeconds(tabId) : Promise.resolve(null);
    let value;
    try {
      value = await act(scriptRead);
    } catch (e) {
      // The action failed: stop watching (its answer is of no use).
      if (watched) runAgent(tabId, 'settle', { last: true }).catch(() => {});
      throw e;
    }
    const scriptBefore = await scriptRead;
    const scriptAfter = waits && scriptBefore !== null ? await scriptSeconds(tabId) : null;
    // Unknown counts as "ran": the longer wait is the safe one.
    const scriptRan = scriptBefore === null || scriptAfter === null || scriptAfter !== scriptBefore;
    return await settle(tabId, before, watched, {
      quietMs,
      idleMs: scriptRan ? scriptIdleMs : idleMs,
      maxMs,
      value,
      answered: answer ? answer(value) : null,
    });
  } finally {
    if (ownRequests) {
      inflight.delete(tabId);
      windowOpens.delete(tabId);
      requestWaiters.delete(tabId);
    }
  }
}

async function settle(tabId, before, watched, { quietMs, idleMs, maxMs, value, answered }) {
  const deadline = Date.now() + maxMs;
  const started = (rec) => rec.startedAt >= before;
  const navStarted = () => {
    const rec = navs.get(tabId);
    return rec && started(rec) ? rec : null;
  };
  const left = () => Math.max(0, deadline - Date.now());
  const outstanding = () => [...(inflight.get(tabId)?.values() || [])].filter((r) => r.at >= before);
  let page = answered || null;
  let nav = null;
  let restart = false;
  // Each round: the page's answer (it waits there in a visible tab) or a navigation, whichever first.
  while (watched && !page) {
    const last = left() === 0;
    const navStart = waitNav(tabId, started, maxMs + 1000);
    const asked = runAgent(tabId, 'settle', {
      quietMs,
      idleMs: restart ? quietMs : idleMs,
      maxMs: left(),
      restart,
      last,
    });
    asked.catch(() => {});
    let st;
    try {
      st = await Promise.race([asked, navStart]);
    } catch {
      break; // the document went away (a navigation) or cannot be scripted
    } finally {
      navStart.cancel();
    }
    if (!st) continue; // cancelled: cannot happen before the race settles
    if (st.startedAt !== undefined) {
      nav = st; // what the page would say is about a document that is leaving
      break;
    }
    if (st.leaving) {
      // The page saw the action start a navigation to another document: wait for the browser's word.
      nav = await waitNav(tabId, started, left());
      if (!nav) page = st;
      break;
    }
    if (!st.done) {
      // A hidden tab: wait here, where timers are not slowed down, then ask again.
      nav = await waitNav(tabId, started, Math.min(st.wait, left()));
      if (nav) break;
      continue;
    }
    if (st.settled && !last && outstanding().length) {
      // Quiet, but a request the action started has not answered: wait for it, then ask the page
      // again (it kept watching), counting the quiet window from then.
      const got = await Promise.race([requestsDone(tabId, left()), waitNav(tabId, started, left())]);
      if (got && got.startedAt !== undefined) {
        nav = got;
        break;
      }
      restart = true;
      continue;
    }
    page = st;
  }
  nav = nav || navStarted();
  // No answer from the page: a navigation may have taken the document away; its start is on the way.
  if (!nav && !page) nav = await waitNav(tabId, started, quietMs);
  const notes = [];
  if (nav) {
    const done = await waitNav(tabId, (r) => started(r) && (r.committedAt > 0 || r.error), left());
    if (done && done.committedAt) notes.push(`navigated to ${done.url}`);
    else if (done && done.error && done.error !== 'net::ERR_ABORTED') {
      notes.push(`a navigation to ${nav.url} failed (${done.error})`);
    } else if (!done) notes.push(`a navigation to ${nav.url} is still loading after ${maxMs / 1000} s`);
    // What the page said is about the document that left.
  } else if (page) {
    notes.push(...page.notes);
    const pending = outstanding();
    if (maxMs > 0 && pending.length) {
      const n = pending.length;
      notes.push(
        `${n === 1 ? 'a request it started has' : `${n} requests it started have`} not answered after ${maxMs / 1000} s (${pending[0].url})`,
      );
    } else if (!page.settled) notes.push(`the page was still changing after ${maxMs / 1000} s`);
  }
  // The page asked for a new window: its tab's event may still be on the way.
  if ((windowOpens.get(tabId) || 0) >= before) await waitOpened(tabId, before, Math.max(left(), 500));
  for (const o of opened.get(tabId) || []) if (o.at >= before) notes.push(`opened tab ${o.tabId} at ${o.url}`);
  return { value, note: notes.length ? `${sentence(notes.join('; '))}.` : '' };
}

const sentence = (s) => s.charAt(0).toUpperCase() + s.slice(1);
