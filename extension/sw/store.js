// The extension's storage keys in one place, and small helpers around
// chrome.storage. The service worker may stop at any time, so everything that
// must survive it lives here: per-browser-run state in chrome.storage.session
// (cleared when the browser quits), settings and the instance id in
// chrome.storage.local. The popup and options pages import this module too.

/** Keys in chrome.storage.local. */
export const LOCAL = Object.freeze({
  instanceId: 'instanceId', // string: this profile's id towards the bridge
  settings: 'settings', // see DEFAULT_SETTINGS
  policy: 'policy', // the person's site policy and client scopes, see sw/policy.js DEFAULT_POLICY
  paused: 'paused', // {at} while the person has paused all agents (sw/approvals.js)
  audit: 'audit', // [AuditEntry], oldest first, bounded (sw/audit.js)
});

/** Keys in chrome.storage.session. */
export const SESSION = Object.freeze({
  native: 'native', // {port, lastError?, retryInMs?, attempt, at}: the native port
  hostState: 'hostState', // the last host.state params, plus `at`
  bridge: 'bridge', // {state: pending|ready|error|disconnected, browserId?, bridgeVersion?, mcpUrl?, bridgeInstance?, error?, at}
  sessions: 'sessions', // {[sessionId]: SessionRecord}, see sessions.js
  recentCalls: 'recentCalls', // [{tool, target, session, client, remote?, ms, checkMs, ok, error?, at}], newest first (target: sw/calltarget.js; checkMs: the policy check's time, waiting for the person included)
  approvals: 'approvals', // [Approval]: calls waiting for the person, oldest first (sw/approvals.js)
  grants: 'grants', // {[key]: [{site, classes, by, at}]}: sites the person or an approved plan allowed (sw/approvals.js)
});

/**
 * Settings and their defaults.
 * onSessionEnd: what happens to a session's tabs when it ends ("ungroup" keeps
 * them open, "close" closes them). profileLabel: shown to MCP clients and in
 * `browserbridge status` to tell profiles apart (empty: none).
 */
export const DEFAULT_SETTINGS = Object.freeze({
  onSessionEnd: 'ungroup',
  profileLabel: '',
});

/**
 * Reads one key.
 * @param {'local'|'session'} area
 * @param {string} key
 * @param {*} [fallback] returned when the key is unset
 * @returns {Promise<*>}
 */
export async function get(area, key, fallback = undefined) {
  const got = await chrome.storage[area].get(key);
  return got[key] === undefined ? fallback : got[key];
}

/**
 * Writes one key.
 * @param {'local'|'session'} area
 * @param {string} key
 * @param {*} value
 * @returns {Promise<void>}
 */
export async function set(area, key, value) {
  await chrome.storage[area].set({ [key]: value });
}

/**
 * Returns the settings merged over their defaults.
 * @returns {Promise<typeof DEFAULT_SETTINGS>}
 */
export async function getSettings() {
  const stored = await get('local', LOCAL.settings, {});
  return { ...DEFAULT_SETTINGS, ...stored };
}

// Writers queue per key so that concurrent read-modify-write updates (two tool
// calls finishing at once) never lose each other's changes. The queue is only
// an ordering device: the data itself is in storage.
const queues = new Map();

/**
 * Applies fn to the stored value of key and stores its result, serialised
 * with every other update() of the same key in this worker.
 * @template T
 * @param {'local'|'session'} area
 * @param {string} key
 * @param {(value: T|undefined) => T|Promise<T>} fn
 * @returns {Promise<T>} the stored result
 */
export function update(area, key, fn) {
  const q = `${area}:${key}`;
  const run = (queues.get(q) || Promise.resolve()).then(async () => {
    const next = await fn(await get(area, key));
    await set(area, key, next);
    return next;
  });
  queues.set(
    q,
    run.catch(() => {}),
  );
  return run;
}
