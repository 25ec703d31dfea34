// The errors the remote-MCP core throws, and how a failure is sorted into a
// category (spec 000, "Error Handling": auth, network, server, Cloudflare;
// plus the few this core adds). Every message is a sentence a person can act
// on; no message ever contains a token.

/**
 * Error categories.
 *   auth       401/403, sign-in refused or cancelled, a token that no longer works
 *   network    the request never got an answer (DNS, refused, reset, CORS, redirect refused)
 *   timeout    no answer within the request's time limit
 *   server     5xx, 429, or an answer that is not MCP
 *   cloudflare a Cloudflare Worker error page (error code 1101 and friends) in front of the server
 *   protocol   a JSON-RPC error from the server, or an answer that breaks the protocol
 *   ssrf       a URL refused by ssrf.js before anything was sent
 *   cancelled  the caller aborted the request
 *   config     the server's configuration cannot work (bad URL, unsupported option)
 */
export const CATEGORIES = Object.freeze([
  'auth',
  'network',
  'timeout',
  'server',
  'cloudflare',
  'protocol',
  'ssrf',
  'cancelled',
  'config',
]);

/** An error with a category, a sentence for a person and optional details. */
export class RemoteError extends Error {
  /**
   * @param {string} category one of CATEGORIES
   * @param {string} message a sentence for a person; never a token
   * @param {{code?: number, status?: number, retryAfter?: number, data?: any,
   *   challenge?: object, needsSignIn?: boolean, cause?: any}} [opts]
   *   code: JSON-RPC error code; status: HTTP status; retryAfter: ms to wait
   *   (Retry-After); challenge: the parsed Bearer WWW-Authenticate challenge
   *   of a 401/403; needsSignIn: only an interactive sign-in can fix it.
   */
  constructor(category, message, { code, status, retryAfter, data, challenge, needsSignIn, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'RemoteError';
    this.category = category;
    if (code !== undefined) this.code = code;
    if (status !== undefined) this.status = status;
    if (retryAfter !== undefined) this.retryAfter = retryAfter;
    if (data !== undefined) this.data = data;
    if (challenge !== undefined) this.challenge = challenge;
    if (needsSignIn) this.needsSignIn = true;
  }
}

/**
 * Whether trying again later may help: network trouble, timeouts, 5xx, 429
 * and Cloudflare errors are transient; auth, protocol, ssrf, cancelled and
 * config errors are not.
 * @param {unknown} err
 */
export function isTransient(err) {
  if (!(err instanceof RemoteError)) return false;
  return ['network', 'timeout', 'server', 'cloudflare'].includes(err.category);
}

/**
 * Parses a Retry-After header (seconds or an HTTP date) into milliseconds.
 * @param {string|null} value
 * @param {number} now ms epoch
 * @returns {number|undefined}
 */
export function parseRetryAfter(value, now) {
  if (!value) return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/**
 * The error for an HTTP answer that is not a success, from its status, its
 * headers and the start of its body.
 * @param {Response} res
 * @param {string} what what was asked, e.g. "the MCP server at example.com"
 * @param {{now: number, body?: string}} opts
 * @returns {RemoteError}
 */
export function httpError(res, what, { now, body = '' }) {
  const status = res.status;
  const retryAfter = parseRetryAfter(res.headers.get('retry-after'), now);
  if (status >= 500 && isCloudflareError(res, body)) {
    return new RemoteError(
      'cloudflare',
      `${capitalize(what)} is behind Cloudflare, and Cloudflare answered with an error (HTTP ${status}${cloudflareCode(body)}); the server's worker failed, try again later.`,
      { status, retryAfter },
    );
  }
  if (status === 429) {
    return new RemoteError('server', `${capitalize(what)} is rate-limiting requests (HTTP 429); try again later.`, {
      status,
      retryAfter,
    });
  }
  if (status >= 500) {
    return new RemoteError('server', `${capitalize(what)} failed with HTTP ${status}; try again later.`, {
      status,
      retryAfter,
    });
  }
  if (status === 401 || status === 403) {
    return new RemoteError('auth', `${capitalize(what)} refused the request (HTTP ${status}).`, { status });
  }
  return new RemoteError('protocol', `${capitalize(what)} answered HTTP ${status}${snippet(body)}.`, { status });
}

function isCloudflareError(res, body) {
  const server = (res.headers.get('server') || '').toLowerCase();
  return /error code: 1\d{3}/i.test(body) || (server === 'cloudflare' && status52x(res.status));
}

function status52x(status) {
  return status >= 520 && status <= 530;
}

function cloudflareCode(body) {
  const m = /error code: (1\d{3})/i.exec(body);
  return m ? `, error code ${m[1]}` : '';
}

function snippet(body) {
  const text = String(body || '')
    .replace(/\s+/g, ' ')
    .trim()
    .slice(0, 200);
  return text ? `: ${text}` : '';
}

/** The first letter in upper case. */
export function capitalize(s) {
  return s ? s[0].toUpperCase() + s.slice(1) : s;
}
