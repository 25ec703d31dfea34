// The tool registry: tools/list and tools/call (docs/protocol.md).
//
// A tool is `{name, title?, description, inputSchema, annotations, async run(args, ctx)}`.
// run returns an MCP CallToolResult-like `{content: [...]}` (a bare string or
// object is wrapped as text). Results carry content only, never
// structuredContent: Claude Code hands a model JSON.stringify(structuredContent)
// in place of a result's text whenever a result has both (images are kept),
// so the text, which says what a model acts on, would be lost. The text
// carries everything (ids, URIs, sizes); no tool declares an outputSchema.
// Throwing ToolError(msg), or anything else, answers
// `{isError: true, content: [{type: "text", text: msg}]}`: a tool that ran
// and failed is a result, not a protocol error. Protocol refusals are JSON-RPC errors: an unknown tool or invalid arguments -32602.
//
// ctx = {session: {id, client, remote}, requestId, signal, progress(progress, total?, message?),
//        resolveTab(tabId?, {create?}), createTab(url?), sessions}
// resolveTab without a tabId throws sessions.TabError (shown as it is) when
// the session has no tab yet; only the tools meant to open one pass create.
//
// Tool modules are registered by background.js (static imports: a module
// service worker may not use import()).

import * as rpc from './rpc.js';
import * as sessions from './sessions.js';
import * as store from './store.js';
import { validate } from './schema.js';
import { callTarget } from './calltarget.js';
import * as gate from './gate.js';
import * as audit from './audit.js';
import { classify, siteName } from './policy.js';
import { idleWriter } from './idlewrite.js';

/** A tool's failure, shown to the model as an isError result with this message. */
export class ToolError extends Error {
  /** @param {string} message what went wrong and, if possible, what to do instead */
  constructor(message) {
    super(message);
    this.name = 'ToolError';
  }
}

/** How many calls the popup's "recent calls" keeps. */
export const RECENT_CALLS = 50;

const NAME = /^[A-Za-z0-9_.-]{1,128}$/;
const tools = new Map(); // name → tool; filled once per worker start from static imports

/**
 * Adds tools to the registry. Accepts tools, arrays of tools, or module
 * namespaces with a default export; skips (and logs) malformed ones.
 * @param {...any} sources
 * @returns {number} how many tools were added
 */
export function register(...sources) {
  let added = 0;
  const visit = (t) => {
    if (!t) return;
    if (Array.isArray(t)) return t.forEach(visit);
    if (t[Symbol.toStringTag] === 'Module') return visit(t.default ?? t.tools);
    const why = problem(t);
    if (why) {
      console.warn(`tools: skipping ${t.name ?? 'a tool'}: ${why}`);
      return;
    }
    if (tools.has(t.name)) console.warn(`tools: ${t.name} is registered twice; the later one wins`);
    tools.set(t.name, t);
    added++;
  };
  sources.forEach(visit);
  return added;
}

function problem(t) {
  if (typeof t !== 'object') return 'not an object';
  if (typeof t.name !== 'string' || !NAME.test(t.name)) return 'name must match [A-Za-z0-9_.-]{1,128}';
  if (typeof t.description !== 'string' || !t.description) return 'description is missing';
  if (!t.inputSchema || t.inputSchema.type !== 'object') {
    return 'inputSchema must be a JSON Schema with "type": "object"';
  }
  if (typeof t.run !== 'function') return 'run is not a function';
  return '';
}

/** Empties the registry (tests). */
export function clear() {
  tools.clear();
}

/**
 * The tools/list result.
 * @returns {{tools: object[]}}
 */
export function list() {
  return {
    tools: [...tools.values()].map((t) => {
      const out = {
        name: t.name,
        description: t.description,
        inputSchema: t.inputSchema,
        annotations: listedAnnotations(t.annotations),
      };
      if (t.title) out.title = t.title;
      return out;
    }),
  };
}

// The MCP spec's values for hints a tool leaves out. Every tools/list goes
// into a model's context on every turn, so tools/list leaves out a hint with
// its default value, the hints the spec gives meaning only to tools that
// write (destructive, idempotent) on a read-only one, and annotations' title
// (the extension's tools have none: a client shows their names).
const DEFAULT_HINTS = { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true };
const WRITE_HINTS = ['destructiveHint', 'idempotentHint'];

function listedAnnotations(a = {}) {
  const out = {};
  for (const [k, v] of Object.entries(a)) {
    if (k === 'title' || DEFAULT_HINTS[k] === v) continue;
    if (a.readOnlyHint === true && WRITE_HINTS.includes(k)) continue;
    out[k] = v;
  }
  return out;
}

/**
 * Handles tools/call.
 * @param {{name: string, arguments?: object, _meta?: object}} params
 * @param {{id: string|number, signal: AbortSignal, session?: object, afterReply?: (fn: Function) => void}} rpcCtx
 *   from rpc.js
 * @returns {Promise<object>} a CallToolResult
 * @throws {rpc.RpcError} -32602 for an unknown tool or invalid arguments
 */
export async function call(params, rpcCtx) {
  const { name, _meta: meta = {} } = params || {};
  const args = params?.arguments ?? {};
  if (typeof name !== 'string') {
    throw new rpc.RpcError(rpc.CODES.invalidParams, 'tools/call needs params.name, the tool to call');
  }
  const tool = tools.get(name);
  if (!tool) {
    throw new rpc.RpcError(
      rpc.CODES.invalidParams,
      `unknown tool ${JSON.stringify(name)}; tools/list names the tools this browser has`,
    );
  }
  const problems = validate(args, tool.inputSchema);
  if (problems.length) {
    // The problems in data tell the bridge these are bad arguments, which
    // from MCP 2025-11-25 reach the model as a tool error (SEP-1303).
    throw new rpc.RpcError(rpc.CODES.invalidParams, `invalid arguments for ${name}: ${problems.join('; ')}`, {
      argumentErrors: problems,
    });
  }

  const session = callSession(meta['browserbridge/session'], rpcCtx);
  const token = meta.progressToken;
  const note = {}; // the gate's decision and the tab's URL, for the audit trail
  const ctx = {
    session,
    requestId: rpcCtx.id,
    signal: rpcCtx.signal,
    sessions,
    resolveTab: async (tabId, opts) => {
      const tab = await sessions.resolveTab(session, tabId, opts);
      note.tabUrl = tab?.url || tab?.pendingUrl || note.tabUrl;
      return tab;
    },
    createTab: (url) => sessions.createTab(session, url),
    progress(progress, total, message) {
      if (token === undefined || token === null) return false;
      const p = { progressToken: token, progress };
      if (total !== undefined) p.total = total;
      if (message !== undefined) p.message = message;
      return rpc.notify('notifications/progress', p);
    },
  };

  const started = Date.now();
  let result;
  let checkMs;
  let refused = null;
  try {
    await sessions.touch(session);
    // The person's policy, pause and approvals (sw/gate.js): nothing runs past this without them.
    const t0 = performance.now();
    refused = await gate.check({ tool: name, args, session, signal: ctx.signal, progress: ctx.progress, note });
    checkMs = Math.round((performance.now() - t0) * 1000) / 1000;
    if (refused) throw new ToolError(refused);
    result = normalise(await tool.run(args, ctx));
  } catch (err) {
    const text =
      err instanceof ToolError || err instanceof sessions.TabError
        ? err.message
        : `${name} failed: ${err?.message || err}`;
    result = { isError: true, content: [{ type: 'text', text }] };
  }
  const ms = Date.now() - started;
  // The popup's recent calls and the audit entry wait until the reply is
  // posted (rpc.js afterReply): the answer does not depend on them, and
  // their storage calls and the audit.decision notification would otherwise
  // go out ahead of it. They keep the order in which calls finish.
  const bookkeeping = () => {
    recordCall({
      tool: name,
      target: callTarget(name, args),
      session: session.id,
      client: session.client,
      ...(session.remote ? { remote: true } : {}),
      ms,
      checkMs,
      ok: !result.isError,
      error: result.isError ? firstText(result) : undefined,
    });
    auditCall({ name, args, session, note, started, refused, result, ms });
  };
  if (typeof rpcCtx?.afterReply === 'function') rpcCtx.afterReply(bookkeeping);
  else bookkeeping(); // a shortcut's step: its entries come before the shortcut's own
  return result;
}

/**
 * Records a call in the audit trail (sw/audit.js), after the fact and
 * without holding the call up. The site is the gate's when it looked the
 * tab up, else that of the tab the tool resolved (no lookup of its own).
 */
export function auditCall({ name, args, session, note, started, refused, result, ms = Date.now() - started }) {
  const entry = {
    at: started,
    client: session.client,
    remote: !!session.remote,
    session: session.id,
    tool: name,
    args,
    decision: note.decision,
    why: note.why,
    outcome: refused ? 'refused' : result.isError ? 'error' : 'ok',
    error: result.isError ? firstText(result) : undefined,
    ms,
  };
  const site = note.site || (note.tabUrl && classify(name, args).cls ? siteName(note.tabUrl) : '');
  gate
    .policy()
    .then((p) => {
      audit.configure({ maxEntries: p.auditMaxEntries, maxDays: p.auditMaxDays });
      audit.record({ ...entry, site });
    })
    .catch((err) => console.warn(`audit: ${err.message}`));
}

/**
 * Whose call this is: the bridge's _meta session, else the session the
 * request id names. A call whose id came through the cloud relay ("conn-…")
 * is remote, whatever its _meta says, and is the relay connection's own
 * session: a remote client cannot take a local session's tab group, scope
 * or grants by naming it. The bridge's relay marks its calls remote too
 * (_meta "remote": true, docs/protocol.md).
 * @returns {{id: string, client: string, remote: boolean}}
 */
export function callSession(s, rpcCtx) {
  const byId = rpc.sessionFromId(rpcCtx?.id);
  const viaRelay = !!byId && byId.id.startsWith('conn-');
  let session =
    s && typeof s.id === 'string'
      ? { id: s.id, client: s.client || s.id }
      : rpcCtx?.session || { id: 'default', client: 'Browser Bridge' };
  if (viaRelay && !session.id.startsWith('conn-')) session = { id: byId.id, client: session.client };
  return { id: session.id, client: session.client || session.id, remote: viaRelay || s?.remote === true };
}

function normalise(r) {
  if (r === undefined || r === null) return { content: [] };
  if (typeof r === 'string') return { content: [{ type: 'text', text: r }] };
  if (Array.isArray(r.content)) return r;
  return { content: [{ type: 'text', text: JSON.stringify(r) }] };
}

function firstText(r) {
  const t = r.content?.find((c) => c.type === 'text')?.text || '';
  return t.length > 200 ? `${t.slice(0, 200)}…` : t;
}

// The recent calls as this worker last wrote them: it is their only writer,
// so a write costs no read. Storage stays the source: a worker restart (or
// another storage area, in tests) reads them once. They are written once the
// calls pause (sw/idlewrite.js), not per call: the popup shows a burst's
// calls at most RECENT_WRITE_MAX_MS late, and no call waits behind the
// write and its onChanged events.
let recent = null; // {area, calls}
let unwritten = []; // entries not yet written, oldest first
let recentWrites = Promise.resolve(); // the writes, one at a time, in order

/** The recent calls are written once no call came for this long (ms)… */
export const RECENT_WRITE_QUIET_MS = 100;
/** …and at the latest this long (ms) after the oldest unwritten one. */
export const RECENT_WRITE_MAX_MS = 1000;

const recentWriter = idleWriter(writeRecent, { quietMs: RECENT_WRITE_QUIET_MS, maxMs: RECENT_WRITE_MAX_MS });

function recordCall(entry) {
  unwritten.push({ ...entry, at: Date.now() });
  recentWriter.poke();
}

function writeRecent() {
  const batch = unwritten.reverse(); // newest first, as the list keeps them
  unwritten = [];
  const area = chrome.storage.session;
  recentWrites = recentWrites
    .then(async () => {
      if (recent?.area !== area) recent = { area, calls: await store.get('session', store.SESSION.recentCalls, []) };
      recent.calls = [...batch, ...recent.calls].slice(0, RECENT_CALLS);
      await store.set('session', store.SESSION.recentCalls, recent.calls);
    })
    .catch(() => {
      recent = null; // read them again next time
    });
  return recentWrites;
}

/**
 * Writes the recent calls not yet written now (tests, and whoever must see
 * them in storage at once).
 * @returns {Promise<void>} settles once they are stored
 */
export function flushRecentCalls() {
  recentWriter.flush();
  return recentWrites;
}
