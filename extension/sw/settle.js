// After an action (a click, a drag, keys), waits for the page to settle and
// says what changed, so that the model's next look at the page
// sees what the action did and often need not look at all.
//
// Settled means: the DOM quiet for QUIET_MS, the animations the action
// started finished (content/page/settle.js watches both in the page), and a
// main-frame navigation the action started committed (webNavigation, here).
// The wait is bounded by MAX_MS after the action; an action after which
// nothing happens costs the quiet window and two calls into the page. The
// worker's timers pace the checks: a hidden tab's own fire once a second.

import { runAgent } from '../content/agent.js';

/** How long the DOM must stay unchanged to count as settled (ms). */
export const QUIET_MS = 100;
/** The most an action waits for the page after it (ms). */
export const MAX_MS = 1500;
/**
 * For typing and form_input: say what changed by the time the action
 * returned, without waiting. What opens a dialog or leaves the page is a
 * click or a key (Enter), which wait; waiting after every field cost about
 * 100 ms a step of the 10-step task (issue 32's speed goal).
 */
export const REPORT_ONLY = { quietMs: 0, maxMs: 0 };

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

/** webNavigation.onCreatedNavigationTarget: a page of sourceTabId opened a tab. */
export function onCreatedNavigationTarget(d) {
  if (!d || d.sourceFrameId === undefined) return;
  const list = (opened.get(d.sourceTabId) || []).filter((o) => Date.now() - o.at < 60_000);
  list.push({ tabId: d.tabId, url: d.url, at: Date.now() });
  opened.set(d.sourceTabId, list);
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
  api.tabs?.onRemoved?.addListener((tabId) => {
    navs.delete(tabId);
    opened.delete(tabId);
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
// Around an action

/**
 * Runs act() and then waits for the page of tabId to settle.
 * @template T
 * @param {number} tabId
 * @param {() => Promise<T>} act the action
 * @param {{quietMs?: number, maxMs?: number}} [opts]
 * @returns {Promise<{value: T, note: string}>} the action's value and a sentence
 *   on what changed after it ('' when nothing did)
 */
export async function settleAfter(tabId, act, { quietMs = QUIET_MS, maxMs = MAX_MS } = {}) {
  const before = Date.now();
  let watched = true;
  try {
    await runAgent(tabId, 'watch');
  } catch {
    watched = false; // not scriptable (or navigating): still wait for a navigation
  }
  let value;
  try {
    value = await act();
  } catch (e) {
    // The action failed: stop watching (its answer is of no use).
    if (watched) runAgent(tabId, 'settleCheck', { quietMs, last: true }).catch(() => {});
    throw e;
  }
  const deadline = Date.now() + maxMs;
  const started = (rec) => rec.startedAt >= before;
  const navStarted = () => {
    const rec = navs.get(tabId);
    return rec && started(rec) ? rec : null;
  };
  // Ask the page from here: a hidden tab's own timers fire only once a second.
  let page = null;
  let nav = null;
  let wait = quietMs;
  while (watched && !page) {
    const navStart = waitNav(tabId, started, Math.min(wait, deadline - Date.now()));
    nav = await navStart;
    if (nav) break;
    const last = Date.now() >= deadline;
    let st;
    try {
      st = await runAgent(tabId, 'settleCheck', { quietMs, last });
    } catch {
      break; // the document went away (a navigation) or cannot be scripted
    }
    if (st.done) page = st;
    else wait = st.wait;
  }
  nav = nav || navStarted() || (watched ? null : await waitNav(tabId, started, quietMs));
  const notes = [];
  if (nav) {
    const done = await waitNav(tabId, (r) => started(r) && (r.committedAt > 0 || r.error), deadline - Date.now());
    if (done && done.committedAt) notes.push(`navigated to ${done.url}`);
    else if (done && done.error && done.error !== 'net::ERR_ABORTED') {
      notes.push(`a navigation to ${nav.url} failed (${done.error})`);
    } else if (!done) notes.push(`a navigation to ${nav.url} is still loading after ${maxMs / 1000} s`);
    // What the page said is about the document that left.
  } else if (page) {
    notes.push(...page.notes);
    if (!page.settled) notes.push(`the page was still changing after ${maxMs / 1000} s`);
  }
  for (const o of opened.get(tabId) || []) if (o.at >= before) notes.push(`opened tab ${o.tabId} at ${o.url}`);
  return { value, note: notes.length ? `${sentence(notes.join('; '))}.` : '' };
}

const sentence = (s) => s.charAt(0).toUpperCase() + s.slice(1);
