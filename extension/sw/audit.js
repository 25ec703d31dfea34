// The audit trail: one entry per tool call (and per relay method), what it
// was, whose, on which site, what the person's policy decided and how it
// ended, with typed text and form values redacted. Kept in
// chrome.storage.local (LOCAL.audit, oldest first), bounded by count and
// age (the policy's auditMaxEntries and auditMaxDays); shown, filtered and
// exported as JSON Lines by the options page. Entries are written in
// batches: a call never waits on storage. The bridge gets each entry as an
// audit.decision notification and logs it (docs/protocol.md).

import * as store from './store.js';
import { idleWriter } from './idlewrite.js';

/**
 * Entries are written once no call came for this long (ms), and during a
 * burst at the latest FLUSH_MAX_MS after the oldest unwritten one: each
 * write rewrites the whole list, and Chrome hands every onChanged listener
 * (the worker, an open options page, which draws it again) the old list and
 * the new, work that would otherwise hold up the calls of the burst.
 */
export const FLUSH_MS = 250;
/** See FLUSH_MS. */
export const FLUSH_MAX_MS = 1000;
/** Longest string argument kept in an entry. */
export const ARG_MAX = 200;

/** The decisions an entry can record. */
export const DECISIONS = Object.freeze(['allowed', 'approved', 'denied', 'blocked', 'paused']);

/**
 * The arguments of a call as the audit keeps them: what was typed, filled
 * or keyed is replaced by its length; long strings are cut.
 * @param {string} tool
 * @param {Record<string, any>} args
 * @returns {Record<string, any>}
 */
export function redactArgs(tool, args) {
  const a = args && typeof args === 'object' ? args : {};
  const out = {};
  const typed = (v) => `[redacted: ${String(v ?? '').length} characters]`;
  for (const [k, v] of Object.entries(a)) {
    if (tool === 'computer' && k === 'text') out[k] = typed(v);
    else if ((tool === 'form_input' || tool === 'type') && k === 'value') out[k] = typed(v);
    else if (tool === 'form_input' && k === 'fields' && Array.isArray(v)) {
      out[k] = v.map((f) => ({ ...cut(f), value: typed(Array.isArray(f?.value) ? f.value.join(',') : f?.value) }));
    } else if (tool === 'type' && k === 'text') out[k] = typed(v);
    else out[k] = cut(v);
  }
  return out;
}

function cut(v) {
  if (typeof v === 'string') return v.length > ARG_MAX ? `${v.slice(0, ARG_MAX - 1)}…` : v;
  if (Array.isArray(v)) return v.slice(0, 20).map(cut);
  if (v && typeof v === 'object') {
    return Object.fromEntries(
      Object.entries(v)
        .slice(0, 20)
        .map(([k, x]) => [k, cut(x)]),
    );
  }
  return v;
}

/**
 * The entries the bounds keep: none older than maxDays, the newest
 * maxEntries; oldest first.
 * @param {object[]} entries oldest first
 * @param {{maxEntries: number, maxDays: number, now?: number}} bounds
 */
export function bound(entries, { maxEntries, maxDays, now = Date.now() }) {
  const since = now - maxDays * 86_400_000;
  const kept = entries.filter((e) => e.at >= since);
  return kept.length > maxEntries ? kept.slice(kept.length - maxEntries) : kept;
}

/**
 * Whether an entry passes the options page's filter: {client, tool,
 * decision, text}; empty fields match all, text looks at every field.
 */
export function matches(entry, f = {}) {
  if (f.client && entry.client !== f.client) return false;
  if (f.tool && entry.tool !== f.tool) return false;
  if (f.decision && entry.decision !== f.decision) return false;
  if (f.text && !JSON.stringify(entry).toLowerCase().includes(f.text.toLowerCase())) return false;
  return true;
}

/** Entries as JSON Lines: one JSON object a line, each line ended. */
export function toJsonLines(entries) {
  return entries.map((e) => `${JSON.stringify(e)}\n`).join('');
}

let pending = [];
let limits = { maxEntries: 1000, maxDays: 7 };
let onEntry = null;

/** Sets the bounds (from the policy) and who else hears of each entry (the bridge). */
export function configure({ maxEntries, maxDays, notify } = {}) {
  if (maxEntries) limits = { ...limits, maxEntries };
  if (maxDays) limits = { ...limits, maxDays };
  if (notify) onEntry = notify;
}

/**
 * Records a call. entry: {at, client, remote, session, tool, site, args,
 * decision, why, outcome ('ok' | 'error' | 'refused'), error?, ms}; args
 * are redacted here.
 * @param {object} entry
 */
export function record(entry) {
  const e = { ...entry, args: redactArgs(entry.tool, entry.args) };
  pending.push(e);
  try {
    onEntry?.(e);
  } catch {
    /* the bridge hears of it or not; the audit keeps it */
  }
  writer.poke();
}

const writer = idleWriter(() => write().catch((err) => console.warn(`audit: ${err.message}`)), {
  quietMs: FLUSH_MS,
  maxMs: FLUSH_MAX_MS,
});

/** Writes what gathered, within the bounds, now. */
export async function flush() {
  writer.cancel();
  await write();
}

async function write() {
  if (!pending.length) return;
  const batch = pending;
  pending = [];
  await store.update('local', store.LOCAL.audit, (list = []) => bound([...list, ...batch], limits));
}
