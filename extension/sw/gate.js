// The gate every call crosses before it runs: tools.call for MCP tools
// (local clients, the relay's remote ones, each step of a shortcut) and
// guardRelay() for the methods relay clients call directly. It classifies
// the call, finds the site it acts on, asks sw/policy.js and, for an ask,
// waits for the person (sw/approvals.js).
//
// The policy and the pause switch are read from chrome.storage.local, with
// the organization's over them from chrome.storage.managed (sw/managed.js),
// once and kept in memory until they change (background.js passes storage
// changes to onStorageChanged): under the default policy a call costs no
// storage read and no tab lookup.

import * as sessions from './sessions.js';
import * as approvals from './approvals.js';
import * as audit from './audit.js';
import * as managed from './managed.js';
import { classify, classifyRelay, decide, looksIrreversible, refusal, siteMatters, siteName } from './policy.js';
import { callTarget } from './calltarget.js';
import { getTabScale, imageToCss } from './screenshot.js';
import { runAgent } from '../content/agent.js';

let cache = null; // {policy, paused, pausedBy}
let generation = 0; // counts changes: a read that a change overtook is not kept

async function state() {
  if (cache) return cache;
  const gen = generation;
  const got = await managed.read();
  const read = { policy: got.policy, paused: got.paused, pausedBy: got.pausedBy };
  if (gen === generation) cache = read;
  return read;
}

/** chrome.storage.onChanged: forget the cached policy when it, the pause switch or the managed policy changes. */
export function onStorageChanged(changes, area) {
  if (!managed.policyChanged(changes, area)) return;
  cache = null;
  generation++;
}

/**
 * The policy in force: the person's with the organization's over it.
 * @returns {Promise<ReturnType<typeof managed.mergePolicy>>}
 */
export async function policy() {
  return (await state()).policy;
}

/**
 * The policy in force when it is in memory, else null (it changed since,
 * or no call has read it yet): for sw/preload.js, on the path of every
 * navigation, which then waits for policy() only that once.
 * @returns {ReturnType<typeof managed.mergePolicy>|null}
 */
export function cachedPolicy() {
  return cache ? cache.policy : null;
}

/**
 * Decides a call and, for an ask, waits for the person.
 * @param {object} c
 * @param {string} c.tool the tool, or the relay method with relay: true
 * @param {Record<string, any>} c.args
 * @param {{id: string, client?: string, remote?: boolean}} c.session
 * @param {boolean} [c.relay] a method of sw/relay-methods.js
 * @param {AbortSignal} [c.signal]
 * @param {(progress: number, total?: number, message?: string) => any} [c.progress]
 * @param {{decision?: string, why?: string, site?: string, url?: string|null}} [c.note] filled in for the
 *   audit trail: the decision (allowed, approved, denied, blocked, paused), why, and the site when it was looked up
 * @returns {Promise<string|null>} null to run the call, else the tool error to answer
 */
export async function check({ tool, args, session, relay = false, signal, progress, note = {} }) {
  const { policy: p, paused, pausedBy } = await state();
  const call = relay ? classifyRelay(tool, args) : classify(tool, args);
  let url = call.url;
  if (url === null && call.tab && siteMatters(p, call)) url = await tabUrl(session, args?.tabId);
  note.url = url;
  if (url) note.site = siteName(url);
  const irreversible =
    call.click && p.confirmIrreversible && url ? await looksIrreversibleClick(session, tool, args) : false;
  const input = { policy: p, paused, session, call, url, irreversible };
  let d = decide(input);
  if (d.verdict === 'ask') d = decide({ ...input, grants: await approvals.grantsFor(session) });
  if (d.why === 'paused' && pausedBy === 'organization') d = { ...d, why: 'pausedByOrganization' };
  note.why = d.why;
  if (d.verdict === 'block') {
    note.decision = d.why.startsWith('paused') ? 'paused' : 'blocked';
    return refusal({ tool, decision: d, call, url, session, policy: p });
  }
  if (d.verdict === 'allow') {
    note.decision = 'allowed';
    if (tool !== 'update_plan' || relay) return null;
    const refused = await planCheck(args, session, p, signal, progress);
    if (refused) note.decision = 'denied';
    return refused;
  }
  const got = await approvals.request({
    session,
    tool,
    cls: call.cls,
    url,
    target: callTarget(tool, args),
    why: d.why === 'irreversible' ? 'irreversible' : '',
    timeoutMs: p.timeoutMs,
    signal,
    progress,
  });
  note.why = got;
  note.decision = got === 'once' || got === 'site' ? 'approved' : got === 'paused' ? 'paused' : 'denied';
  if (got === 'paused' && (await state()).pausedBy === 'organization') {
    note.why = 'pausedByOrganization'; // the organization's pause ended the wait (approvals.onManagedChanged)
    return refusal({ tool, decision: { why: 'pausedByOrganization' }, call, url, session, policy: p });
  }
  return answered(got, { tool, call, url, session, policy: p });
}

function answered(got, { tool, call, url, session, policy: p }) {
  if (got === 'once' || got === 'site') return null;
  const why = { deny: 'denied', timeout: 'timeout', paused: 'pausedWhileWaiting' }[got];
  if (!why) return `${tool} was cancelled while it waited for the person's approval.`;
  return refusal({ tool, decision: { why }, call, url, session, policy: p });
}

// An update_plan listing sites, under a policy that asks somewhere, waits
// for the person to approve the plan; approved, its sites are the session's
// (read and act) until it ends, as Claude in Chrome's plans are. Sites the
// policy blocks stay blocked.
async function planCheck(args, session, p, signal, progress) {
  const domains = [...new Set((args?.domains || []).map((d) => String(d).trim().toLowerCase()).filter(Boolean))];
  const asks = p.unlisted === 'ask' || p.sites.some((r) => r.read === 'ask' || r.act === 'ask');
  if (!domains.length || !asks) return null;
  const got = await approvals.request({
    session,
    tool: 'update_plan',
    cls: 'plan',
    url: '',
    target: `${domains.length} site${domains.length === 1 ? '' : 's'}`,
    domains,
    timeoutMs: p.timeoutMs,
    signal,
    progress,
  });
  if (got === 'once' || got === 'site') return null;
  const words = { deny: 'The person did not approve the plan', timeout: 'Nobody approved the plan in time' };
  return `${words[got] || 'The plan was not approved'} (sites: ${domains.join(', ')}), so it was not recorded and grants nothing; each site will be asked for on its own.`;
}

/**
 * The URL of the tab a call acts on, without touching the session (the
 * tool resolves its tab itself): the named tab, else the session's current
 * tab, else a tab of its group; null when it has none.
 * @param {{id: string}} session
 * @param {number} [tabId]
 * @returns {Promise<string|null>}
 */
export async function tabUrl(session, tabId) {
  const urlOf = (t) => t?.url || t?.pendingUrl || null;
  if (Number.isInteger(tabId)) return urlOf(await chrome.tabs.get(tabId).catch(() => null));
  const rec = await sessions.record(session.id);
  if (!rec) return null;
  if (rec.currentTabId !== null && rec.currentTabId !== undefined) {
    const t = await chrome.tabs.get(rec.currentTabId).catch(() => null);
    if (t && t.groupId === rec.groupId) return urlOf(t);
  }
  if (rec.groupId === null || rec.groupId === undefined) return null;
  const tabs = await chrome.tabs.query({ groupId: rec.groupId }).catch(() => []);
  return urlOf(tabs.find((t) => t.active) || tabs[0]);
}

/**
 * Whether a click lands on something that looks irreversible: a button,
 * link or submit whose label, or whose form's action and buttons, say buy,
 * pay, order, delete, send, create account…, or a link that downloads.
 */
async function looksIrreversibleClick(session, tool, args) {
  const tabId = Number.isInteger(args?.tabId) ? args.tabId : await currentTabId(session);
  if (tabId === null) return false;
  let point;
  try {
    if (typeof args.ref === 'string') {
      const loc = await runAgent(tabId, 'locate', { ref: args.ref }); // the page agent's refs
      point = { x: loc.x, y: loc.y };
    } else if (typeof args.selector === 'string') {
      point = { selector: args.selector };
    } else if (Array.isArray(args.coordinate)) {
      const [x, y] = imageToCss(args.coordinate, await getTabScale(tabId));
      point = { x, y };
    } else if (typeof args.x === 'number' && typeof args.y === 'number') {
      point = { x: args.x, y: args.y };
    } else {
      return false;
    }
  } catch {
    return false; // the tool says what is wrong with its target
  }
  try {
    const [res] = await chrome.scripting.executeScript({ target: { tabId }, func: describeClickTarget, args: [point] });
    const r = res?.result;
    return !!r && (r.download || looksIrreversible(r.text));
  } catch {
    return false; // not scriptable: the policy's rule for the site still applies
  }
}

async function currentTabId(session) {
  const rec = await sessions.record(session.id);
  return Number.isInteger(rec?.currentTabId) ? rec.currentTabId : null;
}

// Runs in the page (isolated world): the words of what a click at point
// would press.
function describeClickTarget(point) {
  const el = point.selector ? document.querySelector(point.selector) : document.elementFromPoint(point.x, point.y);
  if (!el) return null;
  const target = el.closest('button, a, input, [role="button"], [role="link"], summary') || el;
  const label = (e) =>
    [e.innerText, e.value, e.getAttribute?.('aria-label'), e.title, e.getAttribute?.('name')]
      .filter((s) => typeof s === 'string')
      .join(' ');
  const parts = [label(target)];
  const form = target.form || target.closest('form');
  const submits =
    target.matches('button:not([type]), button[type="submit"], input[type="submit"], input[type="image"]') && form;
  if (submits) parts.push(form.getAttribute('action') || '', form.getAttribute('aria-label') || '', form.id, form.name);
  const download = target.matches('a[download]');
  return { text: parts.join(' ').slice(0, 2000), download };
}

/**
 * Wraps the relay's direct methods (sw/relay-methods.js) so that each one
 * crosses the gate as tools do; a refusal is a JSON-RPC error (-32000) with
 * the same sentence.
 * @param {Record<string, Function>} methods
 * @param {new (code: number, message: string) => Error} RpcError
 * @returns {Record<string, Function>}
 */
export function guardRelay(methods, RpcError) {
  const out = {};
  for (const [name, fn] of Object.entries(methods)) {
    out[name] = async (params, ctx) => {
      const session = { id: ctx.session?.id || 'relay', client: 'relay', remote: true };
      const note = {};
      const started = Date.now();
      const why = await check({ tool: name, args: params, session, relay: true, signal: ctx.signal, note });
      const entry = { at: started, client: 'relay', remote: true, session: session.id, tool: name, args: params };
      const done = (outcome, error) =>
        audit.record({
          ...entry,
          site: note.site || '',
          decision: note.decision,
          why: note.why,
          outcome,
          error,
          ms: Date.now() - started,
        });
      if (why) {
        done('refused', why);
        throw new RpcError(-32000, why);
      }
      try {
        const res = await fn(params, ctx);
        done('ok');
        return res;
      } catch (err) {
        done('error', String(err?.message || err).slice(0, 200));
        throw err;
      }
    };
  }
  return out;
}
