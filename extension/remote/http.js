// Small HTTP helpers shared by the transports and OAuth: a deadline that
// combines a timeout with the caller's AbortSignal, turning fetch failures
// into RemoteErrors, and a JSON fetch for metadata and token endpoints.
//
// Redirects are never followed (redirect: 'error'): a redirect could lead a
// request, and with it a token or a client secret, to another origin or to an
// address ssrf.js would have refused.

import { RemoteError } from './errors.js';

/** Largest body read from a metadata, registration or token endpoint. */
export const MAX_METADATA_BYTES = 1 << 20;

/**
 * A timeout combined with an optional outer signal.
 * @param {number} timeoutMs
 * @param {AbortSignal} [outer]
 */
export function deadline(timeoutMs, outer) {
  const ctl = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    ctl.abort(new RemoteError('timeout', `No answer within ${Math.round(timeoutMs / 1000)} s.`));
  }, timeoutMs);
  const onAbort = () => ctl.abort(outer.reason);
  if (outer) {
    if (outer.aborted) ctl.abort(outer.reason);
    else outer.addEventListener('abort', onAbort, { once: true });
  }
  return {
    signal: ctl.signal,
    get timedOut() {
      return timedOut;
    },
    get cancelled() {
      return !timedOut && ctl.signal.aborted;
    },
    clear() {
      clearTimeout(timer);
      outer?.removeEventListener('abort', onAbort);
    },
  };
}

/**
 * The RemoteError for a failed fetch or body read.
 * @param {any} err what fetch threw
 * @param {string} what e.g. "the MCP server at example.com"
 * @param {{timedOut: boolean, cancelled: boolean}} [dl]
 * @param {number} [timeoutMs]
 */
export function fetchError(err, what, dl, timeoutMs) {
  if (dl?.timedOut) {
    return new RemoteError('timeout', `${cap(what)} did not answer within ${Math.round((timeoutMs || 0) / 1000)} s.`);
  }
  if (err instanceof RemoteError) return err;
  if (dl?.cancelled || err?.name === 'AbortError') return new RemoteError('cancelled', 'The request was cancelled.');
  const detail = err?.cause?.code || err?.cause?.message || err?.message || String(err);
  return new RemoteError(
    'network',
    `Could not reach ${what} (${detail}); check the address and your connection. Redirects are not followed: use the final URL.`,
    { cause: err },
  );
}

/**
 * Fetches a JSON document (metadata, registration, token), with a timeout,
 * no redirects and a size limit. Never throws for an HTTP error status: the
 * caller looks at status and json.
 * @param {{fetch: typeof fetch, now: () => number}} platform
 * @param {string|URL} url
 * @param {RequestInit} init
 * @param {{timeoutMs: number, what: string, signal?: AbortSignal}} opts
 * @returns {Promise<{status: number, ok: boolean, headers: Headers, json: any, text: string}>}
 */
export async function fetchJson(platform, url, init, { timeoutMs, what, signal }) {
  const dl = deadline(timeoutMs, signal);
  try {
    const res = await platform.fetch(String(url), { ...init, redirect: 'error', signal: dl.signal });
    const text = await readText(res, MAX_METADATA_BYTES);
    let json;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: res.status, ok: res.ok, headers: res.headers, json, text };
  } catch (err) {
    throw fetchError(err, what, dl, timeoutMs);
  } finally {
    dl.clear();
  }
}

/**
 * Reads a body as text, refusing one larger than limit bytes.
 * @param {Response} res
 * @param {number} limit
 */
export async function readText(res, limit) {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let size = 0;
  let text = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      reader.cancel().catch(() => {});
      throw new RemoteError('server', `The answer is larger than ${limit} bytes; refusing to read it.`);
    }
    text += decoder.decode(value, { stream: true });
  }
  return text + decoder.decode();
}

function cap(s) {
  return s ? s[0].toUpperCase() + s.slice(1) : s;
}
