// The native-messaging port to browserbridge-host (docs/protocol.md). This
// module owns the port: it connects, reconnects with exponential backoff when
// the port closes, reassembles native.chunk runs, records the port's and the
// host's state in chrome.storage.session for the popup, and tells its hooks
// when the link to the bridge comes up (host.state "connected": say hello)
// or goes down (anything else, or the port closing: fail pending requests).
//
// The port object itself cannot be stored; if the worker stops, the port is
// gone with it and the next start connects afresh (background.js calls
// connect() at top level). Chrome stops the worker on an update, a crash,
// memory pressure or devtools' Stop, and a stopped worker has no timer and no
// listener of its own to come back by: a standing alarm (WAKE_ALARM) wakes it
// every 30 s, and its listener connects if the port is not open.

import { createReassembler } from './chunks.js';
import * as store from './store.js';

/** The native host's registered name. */
export const HOST_NAME = 'com.browserbridge.host';
/** First reconnection delay; it doubles per failed attempt. */
export const BACKOFF_MIN_MS = 250;
/** Longest reconnection delay. */
export const BACKOFF_MAX_MS = 30_000;
/**
 * The standing alarm that wakes a stopped worker to reconnect. It replaces
 * the alarm an earlier version created only while disconnected: that one
 * was set from the port's onDisconnect, which never runs when the worker
 * itself is stopped. One standing alarm covers both cases; while the worker
 * lives, the backoff timer retries sooner.
 */
export const WAKE_ALARM = 'native-wake';
/** The earlier per-disconnection alarm, cleared when the wake alarm is first created. */
export const LEGACY_RECONNECT_ALARM = 'native-reconnect';
/** The wake alarm's period: 30 s, the least Chrome allows an installed extension. */
export const WAKE_PERIOD_MINUTES = 0.5;

/**
 * The delay before reconnection attempt number `attempt` (0-based).
 * @param {number} attempt
 * @returns {number} milliseconds
 */
export function backoffDelay(attempt) {
  return Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** Math.min(attempt, 20));
}

let port = null; // the live chrome.runtime.Port, or null
let reassembler = null; // one per port: a partial message never outlives its port
let attempt = 0; // failed attempts since the host last spoke; reset on success
let timer = null; // the pending reconnection
let hostConnected = false; // the last host.state was "connected"
let confirmed = false; // the host has spoken on this port
/**
 * @typedef {object} Hooks
 * @property {(msg: any) => void} onMessage a JSON-RPC message that is not host.state or native.chunk
 * @property {(params: any) => void} onConnected host.state params with state "connected"
 * @property {(reason: string) => void} onLinkDown why the bridge can no longer be reached
 */
/** @type {Hooks} */
let hooks = { onMessage: () => {}, onConnected: () => {}, onLinkDown: () => {} };

/**
 * Sets the callbacks for messages and link changes (background.js wires
 * them to rpc.js and hello.js).
 * @param {Partial<Hooks>} h
 */
export function init(h) {
  hooks = { ...hooks, ...h };
}

/**
 * Opens the port unless one is open. Safe to call any number of times.
 */
export function connect() {
  if (port) return;
  clearTimeout(timer);
  timer = null;
  let p;
  try {
    p = chrome.runtime.connectNative(HOST_NAME);
  } catch (err) {
    scheduleReconnect(`connectNative failed: ${err.message}`);
    return;
  }
  port = p;
  confirmed = false;
  reassembler = createReassembler({ onMessage: dispatch });
  record({ port: 'connecting', attempt });
  p.onMessage.addListener((msg) => {
    if (port === p) receive(msg);
  });
  p.onDisconnect.addListener(() => {
    // lastError must be read inside the listener, or Chrome logs it as unchecked.
    const why = chrome.runtime.lastError?.message || 'the native host closed the connection';
    if (port === p) closed(why);
  });
}

/**
 * Posts one JSON-RPC message to the host. The extension never chunks: Chrome
 * accepts 64 MiB towards the host.
 * @param {object} msg
 * @returns {boolean} false if there is no port to post on
 */
export function send(msg) {
  if (!port) return false;
  try {
    port.postMessage(msg);
    return true;
  } catch (err) {
    console.warn(`native: posting failed: ${err.message}`);
    return false;
  }
}

/** @returns {boolean} whether frames reach the bridge now (port open, host connected). */
export function linkUp() {
  return port !== null && hostConnected;
}

/** @returns {boolean} whether the port is open (the host may still be looking for the bridge). */
export function portOpen() {
  return port !== null;
}

function receive(msg) {
  if (!confirmed) {
    // The host answered: the port works, so the backoff starts over.
    confirmed = true;
    attempt = 0;
    record({ port: 'open', attempt: 0, retryInMs: null });
  }
  if (msg && msg.method === 'native.chunk' && msg.id === undefined) {
    reassembler.accept(msg.params);
    return;
  }
  dispatch(msg);
}

function dispatch(msg) {
  if (msg && msg.method === 'host.state' && msg.id === undefined) {
    hostState(msg.params || {});
    return;
  }
  hooks.onMessage(msg);
}

function hostState(params) {
  store.set('session', store.SESSION.hostState, { ...params, at: Date.now() }).catch(() => {});
  if (params.state === 'connected') {
    hostConnected = true;
    hooks.onConnected(params);
    return;
  }
  hostConnected = false;
  const why = params.error ? `: ${params.error}` : '';
  hooks.onLinkDown(`the native host lost the bridge (${params.state || 'unknown state'}${why})`);
}

function closed(why) {
  port = null;
  reassembler = null;
  hostConnected = false;
  store.set('session', store.SESSION.hostState, { state: 'no_host', error: why, at: Date.now() }).catch(() => {});
  hooks.onLinkDown(`the native host disconnected: ${why}`);
  scheduleReconnect(why);
}

function scheduleReconnect(why) {
  const delay = backoffDelay(attempt);
  attempt++;
  record({ port: 'disconnected', lastError: why, retryInMs: delay, attempt });
  clearTimeout(timer);
  // A timer dies with the worker; WAKE_ALARM then wakes it to try again.
  timer = setTimeout(() => {
    timer = null;
    connect();
  }, delay);
}

/**
 * Creates the standing wake alarm unless it exists with its period.
 * Called on every worker start: creating it again would push its next
 * firing back each time, and a worker woken often might never see it fire.
 * @returns {Promise<boolean>} whether it had to be created
 */
export async function ensureWakeAlarm() {
  const existing = await chrome.alarms.get(WAKE_ALARM);
  if (existing && existing.periodInMinutes === WAKE_PERIOD_MINUTES) return false;
  await chrome.alarms.create(WAKE_ALARM, { periodInMinutes: WAKE_PERIOD_MINUTES });
  await chrome.alarms.clear(LEGACY_RECONNECT_ALARM);
  return true;
}

/**
 * chrome.alarms.onAlarm: the wake alarm connects the port unless it is open.
 * @param {{name: string}} alarm
 * @returns {boolean} whether the alarm was this module's
 */
export function onAlarm(alarm) {
  if (alarm?.name !== WAKE_ALARM) return false;
  connect();
  return true;
}

function record(state) {
  // lastError stays after a success: the popup shows when it happened.
  store
    .update('session', store.SESSION.native, (prev) => ({
      ...prev,
      ...state,
      ...(state.lastError ? { lastErrorAt: Date.now() } : {}),
      at: Date.now(),
    }))
    .catch(() => {});
}
