// Calls that wait for the person (sw/policy.js said "ask"), the grants their
// answers leave, and the pause switch.
//
// A waiting call is a record in chrome.storage.session (SESSION.approvals),
// which the popup lists, counted on the toolbar badge and shown in a Chrome
// notification with two buttons (allow once, allow the site for this client;
// closing it denies). The answer comes back as a runtime message from the
// popup or a button click on the notification, both handled by listeners
// background.js registers at top level, and settles the call's promise,
// which lives in this worker's memory: the call itself is a request on the
// native port, which keeps the worker alive while it is open and takes the
// request with it when it closes. A worker that starts afresh therefore
// drops the records it finds (clearStale): their calls are gone.
//
// Grants (SESSION.grants): {[key]: [{site, classes, by, at}]}, key
// "client:<clientKey>" for "allow this site for this client" (until the
// browser quits) and "session:<id>" for the sites of an approved plan.
// Pause (LOCAL.paused, {at} or absent) survives a browser restart: the
// person resumes by hand. An organization's pause (chrome.storage.managed
// "paused", sw/managed.js) wins: the person cannot resume it.

import * as store from './store.js';
import { clientKey, siteName } from './policy.js';
import * as managed from './managed.js';

/** How often a waiting call tells its client it is still waiting. */
export const PROGRESS_EVERY_MS = 5_000;

const NOTIFICATION_PREFIX = 'approval:';
const waiters = new Map(); // approval id → settle(answer), for this worker's calls

/**
 * @typedef {object} Approval
 * @property {string} id
 * @property {string} session the session id
 * @property {string} client the client's name
 * @property {boolean} remote
 * @property {string} tool the tool or relay method
 * @property {string} cls read | act | script | plan
 * @property {string} site the origin (or the plan's sites)
 * @property {string} target a few words on what the call acts on (sw/calltarget.js)
 * @property {string} why '' or 'irreversible'
 * @property {string[]} [domains] a plan's sites
 * @property {number} at when it started waiting
 * @property {number} deadline when it stops waiting
 */

/**
 * Waits for the person's answer to a call.
 * @param {object} req
 * @param {{id: string, client?: string, remote?: boolean}} req.session
 * @param {string} req.tool
 * @param {string} req.cls
 * @param {string} req.url the URL the call acts on ('' for a plan)
 * @param {string} [req.target]
 * @param {string} [req.why]
 * @param {string[]} [req.domains] a plan's sites, granted to the session on approval
 * @param {number} req.timeoutMs
 * @param {AbortSignal} [req.signal] the call's: a cancelled call stops waiting
 * @param {(progress: number, total: number, message: string) => any} [req.progress]
 * @returns {Promise<'once'|'site'|'deny'|'timeout'|'paused'|'cancelled'>}
 */
export async function request({
  session,
  tool,
  cls,
  url,
  target = '',
  why = '',
  domains,
  timeoutMs,
  signal,
  progress,
}) {
  const now = Date.now();
  const rec = {
    id: crypto.randomUUID(),
    session: session.id,
    client: session.client || session.id,
    remote: !!session.remote,
    tool,
    cls,
    site: domains ? domains.join(', ') : siteName(url),
    url: url || '',
    target,
    why,
    at: now,
    deadline: now + timeoutMs,
  };
  if (domains) rec.domains = domains;
  let settle;
  const answer = new Promise((resolve) => {
    settle = resolve;
  });
  waiters.set(rec.id, settle);
  const timer = setTimeout(() => settle('timeout'), timeoutMs);
  const onAbort = () => settle('cancelled');
  signal?.addEventListener('abort', onAbort, { once: true });
  const message = `Waiting for the person to approve ${tool}${cls === 'plan' ? ' (a plan)' : ` (${cls})`} on ${rec.site} in Browser Bridge`;
  const tick = () => progress?.(Math.round((Date.now() - now) / 1000), Math.round(timeoutMs / 1000), message);
  const ticker = setInterval(tick, PROGRESS_EVERY_MS);
  try {
    if (signal?.aborted) return 'cancelled';
    await store.update('session', store.SESSION.approvals, (list = []) => [...list, rec]);
    tick();
    showState().catch(() => {});
    notify(rec).catch((err) => console.warn(`approval notification: ${err.message}`));
    const got = await answer;
    // A plan is approved with either button: its sites are the session's.
    if (got === 'site' || (got === 'once' && domains)) await grantSite(session, rec);
    return got;
  } finally {
    clearTimeout(timer);
    clearInterval(ticker);
    signal?.removeEventListener('abort', onAbort);
    waiters.delete(rec.id);
    await store
      .update('session', store.SESSION.approvals, (list = []) => list.filter((r) => r.id !== rec.id))
      .catch(() => {});
    Promise.resolve(chrome.notifications?.clear(NOTIFICATION_PREFIX + rec.id)).catch(() => {});
    showState().catch(() => {});
  }
}

/**
 * The person's answer to one waiting call (the popup, the notification).
 * @param {string} id the approval's id
 * @param {'once'|'site'|'deny'} answer
 * @returns {Promise<boolean>} whether a call was waiting for it
 */
export async function answer(id, answer) {
  if (!['once', 'site', 'deny'].includes(answer)) throw new Error(`unknown answer ${JSON.stringify(answer)}`);
  const settle = waiters.get(id);
  if (settle) {
    settle(answer);
    return true;
  }
  // A record of a call this worker does not hold (it started after the call): drop it.
  await store.update('session', store.SESSION.approvals, (list = []) => list.filter((r) => r.id !== id));
  await showState();
  return false;
}

async function grantSite(session, rec) {
  if (rec.domains) {
    await addGrants(`session:${session.id}`, rec.domains, ['read', 'act'], 'plan');
    return;
  }
  // The site for what was asked, and reading and acting on it: a person who
  // lets a client act on a site means it to read there too.
  const classes = rec.cls === 'script' ? ['read', 'act', 'script'] : ['read', 'act'];
  await addGrants(`client:${clientKey(session)}`, [rec.site], classes, 'person');
}

/**
 * Adds grants under a key (see the file's comment).
 * @param {string} key
 * @param {string[]} sites patterns (policy.js normalisePattern) or origins
 * @param {string[]} classes
 * @param {'person'|'plan'} by
 */
export async function addGrants(key, sites, classes, by) {
  await store.update('session', store.SESSION.grants, (all = {}) => {
    const list = (all[key] || []).filter((g) => !sites.includes(g.site));
    for (const site of sites) list.push({ site, classes, by, at: Date.now() });
    return { ...all, [key]: list };
  });
}

/**
 * The grants that apply to a session: its client's and its own.
 * @param {{id: string, client?: string, remote?: boolean}} session
 */
export async function grantsFor(session) {
  const all = await store.get('session', store.SESSION.grants, {});
  return [...(all[`client:${clientKey(session)}`] || []), ...(all[`session:${session.id}`] || [])];
}

/** Whether agents are paused, by the person or their organization. */
export async function paused() {
  return (await pauseState()).paused;
}

async function pauseState() {
  const [own, m] = await Promise.all([store.get('local', store.LOCAL.paused, null), managed.readManaged()]);
  return managed.pauseState(own, m);
}

/**
 * Pauses every agent: waiting calls end with a tool error now, new ones
 * until resume(). Tabs stay as they are.
 */
export async function pause() {
  await store.set('local', store.LOCAL.paused, { at: Date.now() });
  for (const settle of waiters.values()) settle('paused');
  await showState();
}

/** Lets agents work again, unless the organization paused them. */
export async function resume() {
  if ((await pauseState()).by === 'organization') {
    throw new Error('Your organization paused agents (a managed policy): only your IT department can resume them.');
  }
  await chrome.storage.local.remove(store.LOCAL.paused);
  await showState();
}

/**
 * chrome.storage.onChanged for the managed area: the organization's pause
 * ends the calls waiting for the person, as the person's own does.
 */
export async function onManagedChanged() {
  if ((await pauseState()).by === 'organization') for (const settle of waiters.values()) settle('paused');
  await showState();
}

/** Pauses or resumes (the keyboard shortcut). */
export async function togglePause() {
  const state = await pauseState();
  if (state.by === 'organization') return; // nothing the person can change
  if (state.paused) await resume();
  else await pause();
}

/**
 * Drops the records of calls this worker does not hold: a worker that just
 * started holds none, and the calls of the last one died with its port.
 */
export async function clearStale() {
  await store.update('session', store.SESSION.approvals, (list = []) => list.filter((r) => waiters.has(r.id)));
  await showState();
}

/** The toolbar badge: how many calls wait, or "||" while paused. */
export async function showState() {
  const [list, isPaused] = await Promise.all([store.get('session', store.SESSION.approvals, []), paused()]);
  const n = list.length;
  const text = n ? String(n) : isPaused ? '||' : '';
  await chrome.action?.setBadgeText({ text });
  if (text) await chrome.action?.setBadgeBackgroundColor({ color: n ? '#c5221f' : '#5f6368' });
  await chrome.action?.setTitle({
    title: n
      ? `Browser Bridge: ${n} call${n === 1 ? '' : 's'} waiting for your approval`
      : isPaused
        ? 'Browser Bridge: agents are paused'
        : 'Browser Bridge',
  });
}

// A notification per waiting call. Chrome gives a notification at most two
// buttons: allow once, allow the site; closing it is the third answer, deny.
async function notify(rec) {
  if (!chrome.notifications) return;
  const what = rec.cls === 'plan' ? `a plan on ${rec.site}` : `${rec.tool} (${rec.cls}) on ${rec.site}`;
  await chrome.notifications.create(NOTIFICATION_PREFIX + rec.id, {
    type: 'basic',
    iconUrl: chrome.runtime.getURL('/icons/icon-128.png'),
    title: `${rec.client}${rec.remote ? ' (remote)' : ''} asks to ${rec.why === 'irreversible' ? 'do something irreversible' : 'act'}`,
    message: `${what}${rec.target ? `: ${rec.target}` : ''}. Close this to deny.`,
    buttons: [
      { title: 'Allow once' },
      { title: rec.cls === 'plan' ? 'Allow the plan' : `Allow ${rec.site} for ${rec.client}` },
    ],
    requireInteraction: true,
    priority: 2,
  });
}

/**
 * chrome.notifications.onButtonClicked.
 * @returns {boolean} whether the notification was one of ours
 */
export function onNotificationButton(notificationId, buttonIndex) {
  if (!notificationId.startsWith(NOTIFICATION_PREFIX)) return false;
  answer(notificationId.slice(NOTIFICATION_PREFIX.length), buttonIndex === 0 ? 'once' : 'site').catch((err) =>
    console.warn(`approval: ${err.message}`),
  );
  return true;
}

/** chrome.notifications.onClosed: closed by the person, it denies; by us, nothing. */
export function onNotificationClosed(notificationId, byUser) {
  if (!byUser || !notificationId.startsWith(NOTIFICATION_PREFIX)) return false;
  const id = notificationId.slice(NOTIFICATION_PREFIX.length);
  if (waiters.has(id)) answer(id, 'deny').catch((err) => console.warn(`approval: ${err.message}`));
  return true;
}
