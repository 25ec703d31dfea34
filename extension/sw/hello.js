// hello (docs/protocol.md, "Extension → bridge"): who this browser profile
// is. Sent after every host.state "connected"; the answer (browserId,
// bridgeVersion, mcpUrl, bridgeInstance) goes to chrome.storage.session for
// the popup, and its `sessions` list reconciles the tab groups (sessions.js).

import * as rpc from './rpc.js';
import * as sessions from './sessions.js';
import * as store from './store.js';

const ID_PATTERN = /^[A-Za-z0-9_-]{8,64}$/;
const ID_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-';

/** How long hello waits for the bridge's answer. */
export const HELLO_TIMEOUT_MS = 10_000;

/**
 * This profile's instance id: random, 22 characters of A-Za-z0-9_-, created
 * once and kept in chrome.storage.local (a stored id that is not valid is
 * replaced).
 * @returns {Promise<string>}
 */
export async function instanceId() {
  const stored = await store.get('local', store.LOCAL.instanceId);
  if (typeof stored === 'string' && ID_PATTERN.test(stored)) return stored;
  const bytes = crypto.getRandomValues(new Uint8Array(22));
  const id = Array.from(bytes, (b) => ID_ALPHABET[b & 63]).join('');
  await store.set('local', store.LOCAL.instanceId, id);
  return id;
}

// Brands in order of preference: a browser built on Chromium also lists
// "Chromium", so the more specific brand wins.
const BRANDS = [
  ['Microsoft Edge', 'Edge'],
  ['Brave', 'Brave'],
  ['Vivaldi', 'Vivaldi'],
  ['Opera', 'Opera'],
  ['Google Chrome', 'Chrome'],
  ['HeadlessChrome', 'Chromium'],
  ['Chromium', 'Chromium'],
];

/**
 * The browser's name and version, from navigator.userAgentData when the
 * browser has it, else from the user-agent string.
 * @param {Navigator} [nav]
 * @returns {Promise<{name: string, version: string, userAgent?: string}>}
 */
export async function browserInfo(nav = globalThis.navigator) {
  const ua = nav?.userAgent || '';
  const data = nav?.userAgentData;
  if (data && Array.isArray(data.brands)) {
    let list = data.brands;
    try {
      const high = await data.getHighEntropyValues(['fullVersionList']);
      if (Array.isArray(high.fullVersionList) && high.fullVersionList.length) list = high.fullVersionList;
    } catch {
      // the major versions in brands will do
    }
    for (const [brand, name] of BRANDS) {
      const hit = list.find((b) => b.brand === brand);
      if (hit) return { name: nav.brave && name === 'Chrome' ? 'Brave' : name, version: hit.version, userAgent: ua };
    }
  }
  return { ...parseUserAgent(ua), userAgent: ua };
}

/**
 * Names the browser from a user-agent string.
 * @param {string} ua
 * @returns {{name: string, version: string}}
 */
export function parseUserAgent(ua) {
  const rules = [
    [/Edg\/([\d.]+)/, 'Edge'],
    [/Vivaldi\/([\d.]+)/, 'Vivaldi'],
    [/OPR\/([\d.]+)/, 'Opera'],
    [/Chromium\/([\d.]+)/, 'Chromium'],
    [/HeadlessChrome\/([\d.]+)/, 'Chromium'],
    [/Chrome\/([\d.]+)/, 'Chrome'],
  ];
  for (const [re, name] of rules) {
    const m = re.exec(ua);
    if (m) return { name, version: m[1] };
  }
  return { name: 'Chromium', version: 'unknown' };
}

/**
 * The params of hello.
 * @returns {Promise<{instanceId: string, browser: object, extension: {id: string, version: string}, profile?: string}>}
 */
export async function helloParams() {
  const [id, browser, settings] = await Promise.all([instanceId(), browserInfo(), store.getSettings()]);
  const params = {
    instanceId: id,
    browser,
    extension: { id: chrome.runtime.id, version: chrome.runtime.getManifest().version },
  };
  const label = String(settings.profileLabel || '').trim();
  if (label) params.profile = label;
  return params;
}

/**
 * Says hello to the bridge, reconciles the session records with its answer
 * and records the answer for the popup.
 * @returns {Promise<object|null>} the bridge's result, or null if it failed
 */
export async function sayHello() {
  await store.set('session', store.SESSION.bridge, { state: 'pending', at: Date.now() });
  try {
    const result = await rpc.request('hello', await helloParams(), { timeoutMs: HELLO_TIMEOUT_MS });
    // No await before this: the bridge may send a call right behind its
    // reply, and that call must wait until the records are reconciled.
    const reconciled = sessions.reconcile(result);
    const shown = { ...(result && typeof result === 'object' ? result : {}) };
    delete shown.sessions; // stale the moment it is stored; the records say who is live
    await store.set('session', store.SESSION.bridge, { state: 'ready', ...shown, at: Date.now() });
    const done = await reconciled.catch((err) => console.warn(`hello: reconciling sessions: ${err.message}`));
    if (done?.released.length) {
      console.info(
        `hello: released ${done.released.length} session(s) the bridge no longer has: ${done.released.join(', ')}`,
      );
    }
    return result;
  } catch (err) {
    console.warn(`hello: ${err.message}`);
    await store.set('session', store.SESSION.bridge, { state: 'error', error: err.message, at: Date.now() });
    return null;
  }
}
