// The organization's policy over the person's (README.md, "Safety";
// docs/managed-policy.md): every setting of the person's policy, and the
// pause switch, can come from chrome.storage.managed, which Chrome fills
// from enterprise policy (managed_schema.json says what it may hold). A
// managed setting wins and cannot be changed in the popup or options page;
// managed site rules are consulted before the person's. mergePolicy() and
// the helpers around it are pure, so node --test checks every rule;
// read() is the one place that reads both areas.

import * as store from './store.js';
import { SCOPES, normalisePolicy } from './policy.js';

/** The settings an organization can manage: managed_schema.json's properties. */
export const SETTINGS = Object.freeze([
  'sites',
  'unlisted',
  'confirmIrreversible',
  'localScope',
  'remoteScope',
  'scopes',
  'timeoutMs',
  'auditMaxEntries',
  'auditMaxDays',
  'paused',
]);

/** Each setting in a few words, for the popup's "set by your organization". */
export const SETTING_WORDS = Object.freeze({
  sites: 'site rules',
  unlisted: 'sites without a rule',
  confirmIrreversible: 'asking before irreversible clicks',
  localScope: 'the scope of local clients',
  remoteScope: 'the scope of remote clients',
  scopes: 'the scopes of named clients',
  timeoutMs: 'how long a call waits for you',
  auditMaxEntries: 'how many calls the audit keeps',
  auditMaxDays: 'how long the audit keeps them',
  paused: 'pause',
});

const number = (v) => typeof v === 'number' && Number.isFinite(v);

// What makes a managed value a value at all. Chrome drops what does not
// fit the schema before the extension sees it; this holds the line for a
// value it lets through (or an older Chrome's laxer check): a setting
// whose value is not one is not managed.
const VALID = {
  sites: Array.isArray,
  unlisted: (v) => v === 'allow' || v === 'ask',
  confirmIrreversible: (v) => typeof v === 'boolean',
  localScope: (v) => SCOPES.includes(v),
  remoteScope: (v) => SCOPES.includes(v),
  scopes: (v) => !!v && typeof v === 'object' && !Array.isArray(v),
  timeoutMs: number,
  auditMaxEntries: number,
  auditMaxDays: number,
  paused: (v) => v === true, // false leaves the pause button to the person: nobody takes away the stop button
};

/**
 * The managed values that are values, normalised as the person's are.
 * @param {*} raw chrome.storage.managed's contents
 * @returns {{values: Record<string, any>, keys: string[], scopes: string[]}} keys: the managed
 *   settings; scopes: the client keys whose scope is managed
 */
export function normaliseManaged(raw) {
  const m = raw && typeof raw === 'object' ? raw : {};
  const keys = SETTINGS.filter((k) => k in m && VALID[k](m[k]));
  const given = Object.fromEntries(keys.map((k) => [k, m[k]]));
  const n = normalisePolicy(given); // the same clamps and checks as the person's policy
  const values = Object.fromEntries(keys.filter((k) => k !== 'paused').map((k) => [k, n[k]]));
  if (keys.includes('paused')) values.paused = true;
  return { values, keys, scopes: Object.keys(values.scopes || {}) };
}

/**
 * The policy in force: the person's, with the organization's settings over
 * it. Managed site rules come first and are marked managed (ruleFor()
 * consults them before the person's); a managed scope for local or remote
 * clients drops the person's per-client scopes on that side, and managed
 * per-client scopes win over the person's. The result is a normalised
 * policy with `managed` (the managed settings) and `managedScopes` (the
 * client keys whose scope is managed).
 * @param {*} local chrome.storage.local "policy"
 * @param {*} managed chrome.storage.managed's contents
 * @returns {ReturnType<typeof normalisePolicy> & {managed: string[], managedScopes: string[]}}
 */
export function mergePolicy(local, managed) {
  const own = normalisePolicy(local);
  const m = normaliseManaged(managed);
  const p = { ...own };
  for (const k of m.keys) {
    if (k === 'sites' || k === 'scopes' || k === 'paused') continue;
    p[k] = m.values[k];
  }
  if (m.keys.includes('sites')) p.sites = [...m.values.sites.map((r) => ({ ...r, managed: true })), ...own.sites];
  const side = (key) => (key.startsWith('remote:') ? 'remoteScope' : 'localScope');
  const scopes = Object.fromEntries(Object.entries(own.scopes).filter(([key]) => !m.keys.includes(side(key))));
  p.scopes = { ...scopes, ...(m.values.scopes || {}) };
  return { ...p, managed: m.keys, managedScopes: m.scopes };
}

/**
 * Whether agents are paused, and by whom: the organization's pause wins
 * (the person cannot resume it).
 * @param {*} localPaused chrome.storage.local "paused"
 * @param {*} managed chrome.storage.managed's contents
 * @returns {{paused: boolean, by: 'organization'|'person'|null}}
 */
export function pauseState(localPaused, managed) {
  if (normaliseManaged(managed).keys.includes('paused')) return { paused: true, by: 'organization' };
  return localPaused ? { paused: true, by: 'person' } : { paused: false, by: null };
}

/**
 * chrome.storage.managed's contents, {} where there are none: no policy,
 * or a browser without managed storage (it then rejects).
 * @returns {Promise<Record<string, any>>}
 */
export async function readManaged() {
  try {
    return (await chrome.storage.managed?.get(null)) || {};
  } catch {
    return {};
  }
}

/**
 * The person's policy and pause with the organization's over them.
 * @returns {Promise<{policy: ReturnType<typeof mergePolicy>, paused: boolean, pausedBy: string|null,
 *   local: {policy: any, paused: any}, managed: Record<string, any>}>} local: the person's own, as stored
 */
export async function read() {
  const [got, managed] = await Promise.all([
    chrome.storage.local.get([store.LOCAL.policy, store.LOCAL.paused]),
    readManaged(),
  ]);
  const pause = pauseState(got[store.LOCAL.paused], managed);
  return {
    policy: mergePolicy(got[store.LOCAL.policy], managed),
    paused: pause.paused,
    pausedBy: pause.by,
    local: { policy: got[store.LOCAL.policy], paused: got[store.LOCAL.paused] },
    managed,
  };
}

/**
 * Whether a storage change can change the policy in force: the person's
 * policy or pause, or anything the organization set.
 * @param {Record<string, any>} changes
 * @param {string} area
 */
export function policyChanged(changes, area) {
  if (area === 'managed') return true;
  return area === 'local' && (store.LOCAL.policy in changes || store.LOCAL.paused in changes);
}
