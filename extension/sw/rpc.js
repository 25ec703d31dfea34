// The JSON-RPC 2.0 dispatcher between the bridge and the extension
// (docs/protocol.md, "Messages").
//
// Incoming requests go to a handler by method and are always answered with
// the same id and exactly one of result or error (-32601 unknown method,
// -32602 bad params, -32603 anything else). Incoming notifications:
// notifications/cancelled aborts that request's AbortSignal, session.ended
// goes to the sessions module. Outgoing requests (hello, session.close) get
// ids "ext:<n>" and a timeout, and fail at once when the link goes down.
//
// Handlers: core methods are registered with register(); methods relay
// clients call (spec 001: createTab, click, …) come from setExtraMethods().
// A handler is `async (params, ctx) => result` with
//   ctx = {id, method, session: {id, client}|null, signal, sessions, resolveTab(tabId?, {create?}), createTab(url?),
//          afterReply(fn)}
// where session is taken from the id's prefix ("local-…:" or "conn-…:").
// afterReply runs fn once the reply has been posted (at once if it already
// has): bookkeeping the answer does not depend on (recent calls, the audit
// entry) goes there, so that its storage calls and notifications do not go
// out ahead of the reply. Functions run in the order given.
//
// In-flight maps live in memory on purpose: requests and their replies
// belong to one port, which dies with the worker.

import * as sessions from './sessions.js';

/** JSON-RPC error codes used on the link. */
export const CODES = Object.freeze({
  parseError: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internal: -32603,
});

/** Default time an outgoing request waits for its reply. */
export const REQUEST_TIMEOUT_MS = 15_000;

/** Largest reply the extension sends; Chrome refuses more towards the host. */
export const MAX_REPLY_CHARS = 64 << 20;

/** An error a handler throws to answer with a specific JSON-RPC code. */
export class RpcError extends Error {
  /**
   * @param {number} code a JSON-RPC error code (see CODES)
   * @param {string} message for a person
   * @param {*} [data]
   */
  constructor(code, message, data) {
    super(message);
    this.name = 'RpcError';
    this.code = code;
    this.data = data;
  }
}

let transport = { send: () => false, linkUp: () => false };
const methods = new Map(); // method → handler
let extraMethods = {};
const inflight = new Map(); // incoming request id → AbortController
const pending = new Map(); // outgoing id → {resolve, reject, timer}
let nextId = 0; // outgoing ids need only be unique among those in flight on this port

/**
 * Sets how messages leave (native.send) and whether the bridge can be
 * reached now (native.linkUp).
 * @param {{send: (msg: object) => boolean, linkUp: () => boolean}} t
 */
export function setTransport(t) {
  transport = t;
}

/**
 * Registers the handler of an incoming method.
 * @param {string} method
 * @param {(params: any, ctx: object) => Promise<any>|any} handler
 */
export function register(method, handler) {
  methods.set(method, handler);
}

/**
 * Sets the methods relay clients call (sw/relay-methods.js's extraMethods);
 * they are looked up after the core methods.
 * @param {Record<string, Function>|undefined} table
 */
export function setExtraMethods(table) {
  extraMethods = table && typeof table === 'object' ? table : {};
}

/**
 * The session a request id belongs to: "local-<id>:<n>" and
 * "conn-<id>:<n>" name it before the first colon.
 * @param {*} id
 * @returns {{id: string, client: string}|null}
 */
export function sessionFromId(id) {
  if (typeof id !== 'string') return null;
  const m = /^((local|conn)-[^:]+):/.exec(id);
  if (!m) return null;
  return { id: m[1], client: m[2] === 'conn' ? `relay ${m[1].slice(5, 13)}` : m[1] };
}

/**
 * Handles one message from the link: a request, a notification or a reply.
 * @param {*} msg a parsed JSON-RPC message
 * @returns {Promise<void>} settles when a request has been answered
 */
export async function receive(msg) {
  if (!msg || typeof msg !== 'object' || Array.isArray(msg) || msg.jsonrpc !== '2.0') {
    return reply(
      validId(msg?.id),
      null,
      new RpcError(CODES.invalidRequest, `message is not a JSON-RPC 2.0 request or response: ${preview(msg)}`),
    );
  }
  const hasId = msg.id !== undefined && msg.id !== null;
  if (typeof msg.method === 'string') {
    if (!hasId) return notification(msg.method, msg.params);
    if (!validId(msg.id)) {
      return reply(
        null,
        null,
        new RpcError(CODES.invalidRequest, `request id must be a string or a number: ${preview(msg.id)}`),
      );
    }
    return handleRequest(msg);
  }
  if (hasId && ('result' in msg || 'error' in msg)) return settle(msg);
  return reply(
    validId(msg.id),
    null,
    new RpcError(CODES.invalidRequest, `message is not a JSON-RPC 2.0 request or response: ${preview(msg)}`),
  );
}

async function handleRequest({ id, method, params }) {
  if (inflight.has(id)) {
    return reply(id, null, new RpcError(CODES.invalidRequest, `request id ${JSON.stringify(id)} is already in flight`));
  }
  const handler = methods.get(method) || (Object.hasOwn(extraMethods, method) ? extraMethods[method] : null);
  if (typeof handler !== 'function') {
    return reply(id, null, new RpcError(CODES.methodNotFound, `method not found: ${method}`));
  }
  const ac = new AbortController();
  inflight.set(id, ac);
  const session = sessionFromId(id);
  let after = []; // afterReply's functions, or null once the reply is out
  const ctx = {
    id,
    method,
    session,
    signal: ac.signal,
    sessions,
    resolveTab: (tabId, opts) => sessions.resolveTab(session, tabId, opts),
    createTab: (url) => sessions.createTab(session, url),
    afterReply: (fn) => (after ? after.push(fn) : runAfter(fn)),
  };
  try {
    const cancelled = new Promise((_, reject) => {
      ac.signal.addEventListener('abort', () =>
        reject(
          new RpcError(
            CODES.internal,
            `request cancelled: ${ac.signal.reason?.message || ac.signal.reason || 'no reason given'}`,
          ),
        ),
      );
    });
    const result = await Promise.race([Promise.resolve().then(() => handler(params ?? {}, ctx)), cancelled]);
    reply(id, result === undefined ? {} : result, null);
  } catch (err) {
    reply(id, null, err);
  } finally {
    inflight.delete(id);
    const fns = after;
    after = null; // a handler still running after a cancellation's reply runs its own at once
    fns.forEach(runAfter);
  }
}

function runAfter(fn) {
  try {
    fn();
  } catch (err) {
    console.warn(`after the reply: ${err?.message || err}`);
  }
}

function notification(method, params) {
  switch (method) {
    case 'notifications/cancelled': {
      const ac = inflight.get(params?.requestId);
      if (ac) ac.abort(new Error(params?.reason || 'cancelled by the client'));
      return;
    }
    case 'session.ended':
      if (typeof params?.session === 'string') {
        return sessions
          .sessionEnded(params.session)
          .catch((err) => console.warn(`session.ended ${params.session}: ${err.message}`));
      }
      console.warn('session.ended without a session id');
      return;
    default: {
      const handler = methods.get(method);
      if (handler) {
        return Promise.resolve()
          .then(() => handler(params ?? {}, { method, session: null }))
          .catch((err) => console.warn(`notification ${method}: ${err.message}`));
      }
      // Unknown notifications are ignored, as JSON-RPC requires.
    }
  }
}

function settle(msg) {
  const p = pending.get(msg.id);
  if (!p) return; // a reply to a request we gave up on, or to an old bridge
  pending.delete(msg.id);
  clearTimeout(p.timer);
  if (msg.error) {
    p.reject(
      new RpcError(
        msg.error.code ?? CODES.internal,
        msg.error.message || 'the bridge returned an error',
        msg.error.data,
      ),
    );
  } else {
    p.resolve(msg.result);
  }
}

function reply(id, result, err) {
  let msg;
  if (err) {
    const code = Number.isInteger(err.code) ? err.code : CODES.internal;
    const error = { code, message: err.message || String(err) };
    if (err.data !== undefined) error.data = err.data;
    msg = { jsonrpc: '2.0', id: id ?? null, error };
  } else {
    msg = { jsonrpc: '2.0', id, result };
    if (approxSize(result) > MAX_REPLY_CHARS) {
      msg = {
        jsonrpc: '2.0',
        id,
        error: { code: CODES.internal, message: `the reply exceeds the ${MAX_REPLY_CHARS}-byte limit of the link` },
      };
    }
  }
  transport.send(msg);
}

/**
 * Sends a request to the bridge and waits for its reply.
 * @param {string} method
 * @param {object} [params]
 * @param {{timeoutMs?: number}} [opts]
 * @returns {Promise<any>} the result; rejects with RpcError on an error
 *   reply, or Error when the link is down, goes down, or the time runs out
 */
export function request(method, params, { timeoutMs = REQUEST_TIMEOUT_MS } = {}) {
  if (!transport.linkUp()) {
    return Promise.reject(new Error(`cannot send ${method}: the bridge is not connected`));
  }
  const id = `ext:${++nextId}`;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      pending.delete(id);
      reject(new Error(`${method} got no reply from the bridge within ${timeoutMs} ms`));
    }, timeoutMs);
    pending.set(id, { resolve, reject, timer });
    const msg = { jsonrpc: '2.0', id, method };
    if (params !== undefined) msg.params = params;
    if (!transport.send(msg)) {
      pending.delete(id);
      clearTimeout(timer);
      reject(new Error(`cannot send ${method}: the native port is closed`));
    }
  });
}

/**
 * Sends a notification to the bridge; dropped if the link is down.
 * @param {string} method
 * @param {object} [params]
 * @returns {boolean} whether it was sent
 */
export function notify(method, params) {
  if (!transport.linkUp()) return false;
  const msg = { jsonrpc: '2.0', method };
  if (params !== undefined) msg.params = params;
  return transport.send(msg);
}

/**
 * Fails every outgoing request still waiting for a reply (the link went down).
 * @param {string} reason
 */
export function failPending(reason) {
  for (const [id, p] of pending) {
    clearTimeout(p.timer);
    p.reject(new Error(`no reply from the bridge: ${reason}`));
    pending.delete(id);
  }
}

/** @returns {number} outgoing requests waiting for a reply */
export function pendingCount() {
  return pending.size;
}

function validId(id) {
  return typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id)) ? id : null;
}

function preview(v) {
  let s;
  try {
    s = JSON.stringify(v);
  } catch {
    s = String(v);
  }
  s = s === undefined ? String(v) : s;
  return s.length > 120 ? `${s.slice(0, 120)}…` : s;
}

// A cheap upper bound of a reply's size without serialising it twice: only
// strings can be large (screenshots), so sum their lengths.
function approxSize(v, depth = 0) {
  if (typeof v === 'string') return v.length;
  if (!v || typeof v !== 'object' || depth > 8) return 8;
  let n = 0;
  for (const x of Array.isArray(v) ? v : Object.values(v)) n += approxSize(x, depth + 1) + 8;
  return n;
}
