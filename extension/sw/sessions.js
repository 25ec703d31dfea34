// A tab group per MCP session (docs/protocol.md, tools/call _meta
// "browserbridge/session"; relay ids "conn-…" count as sessions too).
//
// Each session gets one tab group titled with its client's name, in a colour
// no other live session has, and a "current tab" that tools act on unless the
// caller names a tab id. A tab belongs to the session whose group holds it.
// Sessions never fight over an active tab: this module only activates a tab
// of the session itself, and when the window's active tab belongs to another
// session it opens the new tab in a window of its own instead.
//
// State: chrome.storage.session under SESSION.sessions,
//   {[sessionId]: {id, client, groupId, color, currentTabId, plan, activity, createdAt, lastActive, bridgeInstance}}
// so a worker restart loses nothing. The per-session lock below only orders
// this worker's operations (no two groups for one session).
//
// chrome.storage.session outlives the bridge, so a record is only as good as
// the bridge process that vouches for it (bridgeInstance, from hello). After
// every hello, reconcile() releases the local sessions that bridge does not
// list (their tabs are ungrouped or closed, as on session.ended) and keeps the
// listed ones: a new session never inherits a dead one's tabs. Only a record's
// id and the hello's list decide. Relay sessions ("conn-…") are not the local
// bridge's to list: one with a key ("conn-k…") is kept across a restart of the
// bridge, as its client may carry on with the same key, until the proxy says it
// ended (session.ended, from the relay); one without ("conn-<connection>")
// lived on the old bridge's relay connection and cannot come back, so a hello
// from another bridge process releases it.

import * as store from './store.js';
import { idleWriter } from './idlewrite.js';

/** Tab group colours, in the order sessions take them. */
export const COLORS = Object.freeze(['blue', 'red', 'green', 'purple', 'orange', 'cyan', 'pink', 'yellow', 'grey']);

const NO_GROUP = -1; // chrome.tabGroups.TAB_GROUP_ID_NONE
const FALLBACK_SESSION = Object.freeze({ id: 'default', client: 'Browser Bridge' });

const locks = new Map();
function withLock(id, fn) {
  const run = (locks.get(id) || Promise.resolve()).then(fn);
  const tail = run.catch(() => {});
  locks.set(id, tail);
  tail.then(() => locks.get(id) === tail && locks.delete(id));
  return run;
}

// The records, read through a copy kept in memory: every tool call reads
// them several times, and a chrome.storage round trip costs a millisecond or
// more on a busy machine. Storage stays the source of truth: every change is
// written to it, in order, a worker restart starts with no copy, and a change
// this worker did not write (onChanged) drops the copy. The copy belongs to
// one storage area (tests give each case a fresh one).
let cached = null; // the records as this worker last read or changed them
let cachedJSON = null; // stableJSON(cached) when known, so a change is compared without encoding both sides
let cachedArea = null; // the chrome.storage.session the copy is of
let generation = 0; // counts changes and drops: a read a change overtook is not kept
let writes = Promise.resolve(); // the writes to storage, one at a time, in order
const echoes = new Map(); // stableJSON of a write not yet seen in onChanged -> count

function area() {
  const a = chrome.storage.session;
  if (a !== cachedArea) {
    cachedArea = a;
    cached = null;
    cachedJSON = null;
    echoes.clear();
    generation++;
    chrome.storage.onChanged?.addListener?.(onStorageChanged);
  }
  return a;
}

// The onChanged listener goes in at the worker's start, like every other one.
if (globalThis.chrome?.storage?.session) area();

// chrome.storage.onChanged: keeps the copy unless someone else wrote the
// records. A change whose value does not match a write of ours drops the copy:
// at worst a needless read, never a stale record.
function onStorageChanged(changes, areaName) {
  if (areaName !== 'session' || !changes?.[store.SESSION.sessions]) return;
  const json = stableJSON(changes[store.SESSION.sessions].newValue ?? {});
  const n = echoes.get(json);
  if (n) {
    if (n === 1) echoes.delete(json);
    else echoes.set(json, n - 1);
    return; // this worker's own write
  }
  cached = null;
  cachedJSON = null;
  generation++;
}

/** @returns {Promise<Record<string, object>>} the records; callers must not change them */
async function all() {
  area();
  if (cached) return cached;
  const gen = generation;
  const got = await store.get('session', store.SESSION.sessions, {});
  if (gen !== generation) return cached || got;
  cached = got;
  cachedJSON = null;
  return got;
}

/**
 * Applies fn to a copy of the records, makes it the one in memory at once
 * (readers in this worker see the change before the write lands) and writes
 * it to storage behind the writes before it. A change that changes nothing
 * is not written.
 * @param {(m: Record<string, object>) => void} fn
 * @returns {Promise<Record<string, object>>} the records after fn, once stored
 */
async function mutate(fn) {
  const cur = cached && cachedArea === chrome.storage.session ? cached : await all();
  const base = cached || cur; // another change may have landed in memory while all() read
  const baseJSON = base === cached && cachedJSON !== null ? cachedJSON : stableJSON(base);
  const next = structuredClone(base);
  fn(next);
  const json = stableJSON(next);
  if (json === baseJSON) return next;
  cached = next;
  cachedJSON = json;
  generation++;
  echoes.set(json, (echoes.get(json) || 0) + 1);
  const write = writes.then(() => store.set('session', store.SESSION.sessions, next));
  writes = write.catch((err) => {
    if (echoes.get(json) > 1) echoes.set(json, echoes.get(json) - 1);
    else echoes.delete(json);
    cached = null; // storage has whatever it has: read it again
    cachedJSON = null;
    generation++;
    console.warn(`sessions: storing the records: ${err.message}`);
  });
  await write;
  return next;
}

// JSON with object keys sorted: Chrome hands onChanged's values back with
// their keys in its own order.
function stableJSON(v) {
  return JSON.stringify(v, (_k, x) =>
    x && typeof x === 'object' && !Array.isArray(x)
      ? Object.fromEntries(
          Object.keys(x)
            .sort()
            .map((k) => [k, x[k]]),
        )
      : x,
  );
}

/** Whether a session id is one of the local bridge's ("local-…"), as opposed to a relay's or the fallback. */
const isLocal = (id) => typeof id === 'string' && id.startsWith('local-');

/** Whether a session id is a relay connection's own ("conn-<connection>"), which dies with the bridge's relay link, not a keyed remote client's ("conn-k<key>"). */
const isRelayConnection = (id) => typeof id === 'string' && id.startsWith('conn-') && !id.startsWith('conn-k');

// The bridge process of the last hello result (its bridgeInstance), or null
// when that bridge does not say. Memory is enough: a restarted worker has no
// port, and says hello again before any call can reach it.
let currentInstance = null;
// The local session ids the last hello listed, set with currentInstance: a
// call already past the gate when the hello arrived (sent by the bridge
// before it died) must not take a listed session for a foreign one before
// settle() has moved its record to the new bridge.
let listedNow = new Set();

// Settles when the latest reconcile() has: every session operation waits for
// it first (outside the per-session lock, which reconcile takes to release),
// so a call arriving right behind the hello reply cannot touch a record that
// is about to be released, nor create one that reconcile would then release.
let gate = Promise.resolve();

function newRecord(m, id, client) {
  return {
    id,
    client: client || id,
    groupId: null,
    color: pickColor(m, id),
    currentTabId: null,
    plan: null,
    activity: null,
    createdAt: Date.now(),
    lastActive: Date.now(),
    bridgeInstance: isLocal(id) || isRelayConnection(id) ? currentInstance : null,
  };
}

// A local record that another bridge process vouched for, and this one has
// not listed: it was never seen created by the bridge we talk to.
function foreign(rec) {
  return (
    isLocal(rec.id) &&
    currentInstance !== null &&
    !!rec.bridgeInstance &&
    rec.bridgeInstance !== currentInstance &&
    !listedNow.has(rec.id)
  );
}

/**
 * A session's record as stored, or undefined (no touch: the gate looks,
 * the tool resolves its tab itself).
 * @param {string} sessionId
 * @returns {Promise<object|undefined>}
 */
export async function record(sessionId) {
  return (await all())[sessionId];
}

/**
 * Records that a session is active (creating its record) and returns it.
 * @param {{id: string, client?: string}} session
 * @returns {Promise<object>} the session's record
 */
export async function touch(session) {
  await gate;
  return withLock(session.id, () => touchLocked(session));
}

// touch under the session's lock. A foreign record is released first, so the
// session starts afresh with no tabs instead of adopting the old ones.
async function touchLocked(session) {
  const old = (await all())[session.id];
  if (old && foreign(old)) await release(session.id);
  else if (old && (!session.client || old.client === session.client) && (!session.remote || old.remote)) {
    // Only lastActive changes: the popup's sort order is all it feeds, so
    // it is stored a little later, one write for the touches of every call
    // in between (a call touches its session before the gate and again as
    // it resolves its tab), in order behind the other changes.
    markActive(session.id);
    return cached?.[session.id] ?? old;
  }
  const s = await mutate((m) => {
    const rec = m[session.id] || (m[session.id] = newRecord(m, session.id, session.client));
    if (session.client) rec.client = session.client;
    if (session.remote) rec.remote = true; // a remote client's card offers the remote scope
    rec.lastActive = Date.now();
  });
  return s[session.id];
}

/** lastActive is written once no session was touched for this long (ms)… */
export const ACTIVE_WRITE_QUIET_MS = 100;
/** …and at the latest this long (ms) after the oldest touch not yet written. */
export const ACTIVE_WRITE_MAX_MS = 1000;

const activeSince = new Map(); // session id -> the last touch's time, not yet written
// Written once the calls pause (sw/idlewrite.js): a write of the records
// and its onChanged events in the middle of a burst of calls would hold up
// the next one. listSessions sees the times not yet written.
const activeWriter = idleWriter(writeActive, { quietMs: ACTIVE_WRITE_QUIET_MS, maxMs: ACTIVE_WRITE_MAX_MS });

function markActive(id) {
  activeSince.set(id, Date.now());
  activeWriter.poke();
}

function writeActive() {
  const times = new Map(activeSince);
  activeSince.clear();
  return mutate((m) => {
    for (const [id, at] of times) if (m[id]) m[id].lastActive = Math.max(m[id].lastActive || 0, at);
  }).catch(() => {}); // mutate says why
}

/**
 * Writes the touches not yet written now (tests).
 * @returns {Promise<void>}
 */
export async function flushActive() {
  await activeWriter.flush();
}

function pickColor(m, selfId) {
  const used = Object.values(m)
    .filter((r) => r.id !== selfId)
    .map((r) => r.color);
  return COLORS.find((c) => !used.includes(c)) || COLORS[Object.keys(m).length % COLORS.length];
}

async function liveGroup(groupId) {
  if (groupId === null || groupId === undefined || groupId === NO_GROUP) return null;
  try {
    return await chrome.tabGroups.get(groupId);
  } catch {
    return null;
  }
}

/**
 * The session whose group holds the tab, if any.
 * @param {{groupId?: number}} tab
 * @returns {Promise<object|null>} a session record
 */
export async function sessionOfTab(tab) {
  if (!tab || tab.groupId === undefined || tab.groupId === NO_GROUP) return null;
  return Object.values(await all()).find((r) => r.groupId === tab.groupId) || null;
}

/** Puts a tab into the session's group, creating and naming the group if needed. */
async function addToGroup(session, tab) {
  const rec = (await all())[session.id];
  const group = await liveGroup(rec?.groupId);
  if (group) {
    if (tab.groupId !== group.id) await chrome.tabs.group({ groupId: group.id, tabIds: [tab.id] });
    return group.id;
  }
  const groupId = await chrome.tabs.group({ tabIds: [tab.id], createProperties: { windowId: tab.windowId } });
  let color = rec?.color;
  await mutate((m) => {
    const r = m[session.id];
    if (!r) return;
    r.groupId = groupId;
    if (!r.color || Object.values(m).some((o) => o.id !== r.id && o.color === r.color)) r.color = pickColor(m, r.id);
    color = r.color;
  });
  await chrome.tabGroups.update(groupId, {
    title: groupTitle(rec || session),
    color: color || 'grey',
  });
  return groupId;
}

/**
 * A session's tab group title: its client's name, marked when the client is
 * remote (through the cloud relay), so the person can tell it from a local one.
 * @param {{id: string, client?: string, remote?: boolean}} s a session or its record
 */
export function groupTitle(s) {
  const name = s.client || s.id;
  return s.remote || s.id?.startsWith('conn-') ? `${name} (remote)` : name;
}

/** Whether the active tab of a window belongs to a session other than selfId. */
async function windowBusy(windowId, selfId) {
  const [active] = await chrome.tabs.query({ windowId, active: true });
  const owner = await sessionOfTab(active);
  return owner !== null && owner.id !== selfId;
}

async function newTab(session, url) {
  const rec = (await all())[session.id];
  const group = await liveGroup(rec?.groupId);
  let windowId = group?.windowId;
  if (windowId === undefined) {
    try {
      windowId = (await chrome.windows.getLastFocused({ windowTypes: ['normal'] })).id;
    } catch {
      windowId = undefined; // no window at all
    }
  }
  let tab;
  if (windowId === undefined || (!group && (await windowBusy(windowId, session.id)))) {
    // No window, or another session is working in it: give this session its own.
    const win = await chrome.windows.create({ url, focused: false, type: 'normal' });
    tab = win.tabs?.[0] || (await chrome.tabs.query({ windowId: win.id }))[0];
  } else {
    const active = !(await windowBusy(windowId, session.id));
    tab = await chrome.tabs.create({ url, windowId, active });
  }
  const groupId = await addToGroup(session, tab);
  await setCurrentTab(session, tab.id);
  return { ...tab, groupId };
}

/**
 * Creates a tab in the session's group (creating the group if needed) and
 * makes it the session's current tab.
 * @param {{id: string, client?: string}|null} session
 * @param {string} [url] defaults to about:blank
 * @returns {Promise<chrome.tabs.Tab>}
 */
export async function createTab(session, url = 'about:blank') {
  session = session || FALLBACK_SESSION;
  await gate;
  return withLock(session.id, async () => {
    await touchLocked(session);
    return newTab(session, url);
  });
}

/**
 * What a session without a tab is told: which tools open one. Tools other
 * than those never open a tab to fail in (a blank tab cannot be read).
 */
export const NO_TAB_MESSAGE =
  "Your session has no tab yet. Call navigate with a url: it opens a tab in your session's tab group " +
  'and loads the page there (tabs_create_mcp opens one too). To work in a tab that is already open, pass its tabId (tabs_context lists them).';

/**
 * The tab a call needs is not there (no tab yet, or no tab with that id).
 * The message says what to do; tools show it as it is.
 */
export class TabError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = 'TabError';
  }
}

/**
 * The tab a tool acts on.
 *
 * With a tabId: that tab (an ungrouped tab is adopted into the session's
 * group and becomes current; a tab of another session or of the user's own
 * group is acted on where it is).
 *
 * Without: the session's current tab, else another tab of its group. A
 * session that has neither gets a TabError saying to call navigate: only the
 * tools meant to open a tab (navigate with a url, tabs_create, relay
 * createTab/browser_navigate) pass create, which opens a blank tab in the
 * session's group for them to load their page in.
 * @param {{id: string, client?: string}|null} session
 * @param {number} [tabId]
 * @param {{create?: boolean}} [opts]
 * @returns {Promise<chrome.tabs.Tab>}
 * @throws {TabError}
 */
export async function resolveTab(session, tabId, { create = false } = {}) {
  session = session || FALLBACK_SESSION;
  await gate;
  if (tabId !== undefined && tabId !== null) {
    let tab;
    try {
      tab = await chrome.tabs.get(tabId);
    } catch {
      throw new TabError(`There is no tab with id ${tabId}; tabs_context lists the open tabs.`);
    }
    return withLock(session.id, async () => {
      await touchLocked(session);
      const owner = await sessionOfTab(tab);
      if (owner?.id === session.id) {
        await setCurrentTab(session, tab.id);
      } else if (tab.groupId === undefined || tab.groupId === NO_GROUP) {
        tab = { ...tab, groupId: await addToGroup(session, tab) };
        await setCurrentTab(session, tab.id);
      }
      return tab;
    });
  }
  return withLock(session.id, async () => {
    const rec = await touchLocked(session);
    // Two independent lookups: asked for together.
    const [group, current] = await Promise.all([
      liveGroup(rec.groupId),
      rec.currentTabId === null ? null : chrome.tabs.get(rec.currentTabId).catch(() => null),
    ]);
    if (current && group && current.groupId === group.id) return current;
    if (current && (current.groupId === undefined || current.groupId === NO_GROUP)) {
      // Its group went away (ungrouped, or the group was closed): group it again.
      return { ...current, groupId: await addToGroup(session, current) };
    }
    // Otherwise the current tab is closed or now in someone else's group.
    if (group) {
      const tabs = await chrome.tabs.query({ groupId: group.id });
      const tab = tabs.find((t) => t.active) || tabs[0];
      if (tab) {
        await setCurrentTab(session, tab.id);
        return tab;
      }
    }
    if (!create) throw new TabError(NO_TAB_MESSAGE);
    return newTab(session, 'about:blank');
  });
}

/**
 * Makes tabId the session's current tab.
 * @param {{id: string}|string} session a session or its id
 * @param {number|null} tabId
 */
export async function setCurrentTab(session, tabId) {
  const id = typeof session === 'string' ? session : session.id;
  // Most calls name the tab that is already current: no copy of the records to compare.
  if (cached && cachedArea === chrome.storage.session && cached[id]?.currentTabId === tabId) return;
  await mutate((m) => {
    if (m[id]) m[id].currentTabId = tabId;
  });
}

/**
 * The tabs in the session's group (empty if it has none yet).
 * @param {{id: string}|string} session
 * @returns {Promise<chrome.tabs.Tab[]>}
 */
export async function sessionTabs(session) {
  const id = typeof session === 'string' ? session : session?.id;
  const rec = (await all())[id];
  if (!rec || !(await liveGroup(rec.groupId))) return [];
  return chrome.tabs.query({ groupId: rec.groupId });
}

async function setField(sessionId, field, value) {
  await mutate((m) => {
    const rec = m[sessionId] || (m[sessionId] = newRecord(m, sessionId));
    rec[field] = value;
    rec.lastActive = Date.now();
  });
}

/**
 * Stores the client's plan for the popup (update_plan).
 * @param {string} sessionId
 * @param {*} plan whatever the tool stores: text or a list of steps
 */
export const setPlan = (sessionId, plan) => setField(sessionId, 'plan', plan);

/**
 * Stores the session's activity state for the popup (turn_answer_start/complete).
 * @param {string} sessionId
 * @param {*} state e.g. {state: "answering", since}
 */
export const setActivity = (sessionId, state) => setField(sessionId, 'activity', state);

/**
 * Every known session, most recently active first.
 * @returns {Promise<object[]>} session records
 */
export async function listSessions() {
  const active = (r) => Math.max(r.lastActive || 0, activeSince.get(r.id) || 0);
  return Object.values(await all()).sort((a, b) => active(b) - active(a));
}

/**
 * The sessions the popup shows: the live ones, newest first. Ended and
 * released sessions have no record; a local record another bridge process
 * vouched for (bridgeInstance not the current bridge's) is waiting to be
 * released, so it is not shown either.
 * @param {Record<string, object>|undefined} records SESSION.sessions
 * @param {{state?: string, bridgeInstance?: string}|undefined} bridge SESSION.bridge
 * @returns {object[]} session records
 */
export function liveSessions(records, bridge) {
  const instance =
    bridge?.state === 'ready' && typeof bridge.bridgeInstance === 'string' ? bridge.bridgeInstance : null;
  return Object.values(records || {})
    .filter((r) => r && typeof r.id === 'string')
    .filter((r) => !(instance && isLocal(r.id) && r.bridgeInstance && r.bridgeInstance !== instance))
    .sort((a, b) => (b.createdAt || 0) - (a.createdAt || 0) || (b.lastActive || 0) - (a.lastActive || 0));
}

// Releases a session: closes or ungroups its tabs per the "onSessionEnd"
// setting and deletes its record. The caller holds the session's lock. A tab
// that closes meanwhile does not keep the record alive.
async function release(sessionId) {
  const rec = (await all())[sessionId];
  if (!rec) return false;
  const ids = (await sessionTabs(sessionId)).map((t) => t.id);
  if (ids.length) {
    const { onSessionEnd } = await store.getSettings();
    try {
      if (onSessionEnd === 'close') await chrome.tabs.remove(ids);
      else await chrome.tabs.ungroup(ids);
    } catch (err) {
      console.warn(`releasing ${sessionId}: ${err.message}`);
    }
  }
  await mutate((m) => {
    delete m[sessionId];
  });
  return true;
}

/**
 * Ends a session (session.ended): closes or ungroups its tabs per the
 * "onSessionEnd" setting and forgets it.
 * @param {string} sessionId
 */
export async function sessionEnded(sessionId) {
  await withLock(sessionId, () => release(sessionId));
}

/**
 * Reconciles the records with a hello result (docs/protocol.md, hello):
 * `sessions` lists the local sessions the bridge process still has and
 * `bridgeInstance` names that process. Local records it does not list are
 * released as on session.ended, never adopted; listed ones keep their group
 * and are now vouched for by this bridge. Relay connections' sessions of
 * another bridge process are released too; keyed remote ones are kept. A result without `sessions` (an
 * older bridge) changes nothing; `"sessions": null` counts as an empty list.
 *
 * Call it synchronously when the result arrives: it raises the gate every
 * session operation waits for before anything else can run.
 * @param {{sessions?: Array<{id: string, client?: string}>|null, bridgeInstance?: string}} result
 * @returns {Promise<{released: string[], kept: string[]}|null>} null when nothing was reconciled
 */
export function reconcile(result) {
  const instance = typeof result?.bridgeInstance === 'string' && result.bridgeInstance ? result.bridgeInstance : null;
  currentInstance = instance;
  if (!result || typeof result !== 'object' || !('sessions' in result)) return Promise.resolve(null);
  if (result.sessions !== null && !Array.isArray(result.sessions)) {
    // A list we cannot read says nothing about which sessions are gone.
    console.warn(`hello: ignoring sessions that are not a list: ${JSON.stringify(result.sessions)}`);
    return Promise.resolve(null);
  }
  const listed = new Map();
  for (const s of result.sessions || []) {
    if (s && typeof s.id === 'string') listed.set(s.id, typeof s.client === 'string' && s.client ? s.client : null);
  }
  listedNow = new Set(listed.keys());
  const run = gate.then(() => settle(listed, instance));
  gate = run.catch(() => {});
  return run;
}

async function settle(listed, instance) {
  const records = Object.values(await all());
  const locals = records.filter((r) => isLocal(r.id));
  const kept = locals.filter((r) => listed.has(r.id)).map((r) => r.id);
  const gone = locals.filter((r) => !listed.has(r.id)).map((r) => r.id);
  // A relay connection's session of another bridge process: its connection
  // ended with that process.
  for (const r of records) {
    if (isRelayConnection(r.id) && instance && r.bridgeInstance && r.bridgeInstance !== instance) gone.push(r.id);
  }
  await mutate((m) => {
    for (const id of kept) {
      if (!m[id]) continue;
      if (instance) m[id].bridgeInstance = instance;
      if (listed.get(id)) m[id].client = listed.get(id);
    }
  });
  const results = await Promise.allSettled(gone.map((id) => withLock(id, () => release(id))));
  for (const [i, r] of results.entries()) {
    if (r.status === 'rejected') console.warn(`releasing ${gone[i]}: ${r.reason?.message || r.reason}`);
  }
  return { released: gone, kept };
}

/** chrome.tabs.onRemoved: forget a closed tab as anyone's current tab. */
export async function onTabRemoved(tabId) {
  await mutate((m) => {
    for (const r of Object.values(m)) if (r.currentTabId === tabId) r.currentTabId = null;
  });
}

/** chrome.tabGroups.onRemoved: a session whose group is gone gets a new one on its next call. */
export async function onGroupRemoved(group) {
  await mutate((m) => {
    for (const r of Object.values(m)) if (r.groupId === group.id) r.groupId = null;
  });
}
