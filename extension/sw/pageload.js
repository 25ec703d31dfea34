// Whether a tab's page loaded: the main-frame load errors Chrome reports
// (chrome.webNavigation.onErrorOccurred, e.g. net::ERR_NAME_NOT_RESOLVED)
// and the HTTP status of the main document (CDP, sw/cdp.js), turned into
// tool errors that say which tab, which URL, what failed and what to do.
//
// A failed load leaves the tab on Chrome's error page, which extensions
// cannot script ("Frame with ID 0 is showing error page"). navigate reports
// the failure itself; the page tools call usePage() instead of useTab() and
// so answer with the same words instead of Chrome's.
//
// State: the last main-frame error of each tab, {url, error, at}, in memory
// and in chrome.storage.session under "bb.loaderr.<tabId>", so a restarted
// worker still knows why a tab shows an error page. A committed main-frame
// load clears it; whether the tab shows an error page right now is asked of
// the browser (webNavigation.getFrame), the record only names the error.

import { useTab } from './cdp.js';
import { ToolError } from './tools.js';

const STORAGE_PREFIX = 'bb.loaderr.';

/** net::ERR_ABORTED: a load replaced or cancelled; the tab keeps its page. */
export const ABORTED = 'net::ERR_ABORTED';

/** tabId -> {url, error, at}: the last main-frame load error. */
const errors = new Map();

// What the common network errors mean, for a model deciding what to do next.
const NET_ERRORS = {
  'net::ERR_NAME_NOT_RESOLVED': 'the host name does not resolve (DNS): check the spelling of the host',
  'net::ERR_NAME_RESOLUTION_FAILED': 'the host name could not be resolved (DNS)',
  'net::ERR_CONNECTION_REFUSED': 'nothing accepts connections at that host and port',
  'net::ERR_CONNECTION_RESET': 'the server reset the connection',
  'net::ERR_CONNECTION_CLOSED': 'the server closed the connection without answering',
  'net::ERR_CONNECTION_TIMED_OUT': 'the server did not answer in time',
  'net::ERR_TIMED_OUT': 'the request timed out',
  'net::ERR_ADDRESS_UNREACHABLE': 'the address is unreachable from this machine',
  'net::ERR_INTERNET_DISCONNECTED': 'this machine is offline',
  'net::ERR_EMPTY_RESPONSE': 'the server closed the connection without sending anything',
  'net::ERR_TOO_MANY_REDIRECTS': 'the site redirects in a loop',
  'net::ERR_SSL_PROTOCOL_ERROR': 'the TLS handshake failed',
  'net::ERR_CERT_AUTHORITY_INVALID': "the site's TLS certificate is not trusted",
  'net::ERR_CERT_COMMON_NAME_INVALID': "the site's TLS certificate is for another host name",
  'net::ERR_CERT_DATE_INVALID': "the site's TLS certificate has expired or is not valid yet",
  'net::ERR_BLOCKED_BY_CLIENT': 'an extension or the browser blocked the request',
  'net::ERR_BLOCKED_BY_ADMINISTRATOR': 'a browser policy blocks this URL',
  'net::ERR_UNSAFE_PORT': 'the browser refuses to connect to that port',
  'net::ERR_FILE_NOT_FOUND': 'the file does not exist',
  'net::ERR_INVALID_URL': 'the URL is not valid',
  'net::ERR_HTTP_RESPONSE_CODE_FAILURE': 'the server answered with an HTTP error status and an empty page',
};

/** Standard reason phrases, for HTTP/2 and HTTP/3 answers, which carry none. */
const REASONS = {
  400: 'Bad Request',
  401: 'Unauthorized',
  402: 'Payment Required',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  406: 'Not Acceptable',
  407: 'Proxy Authentication Required',
  408: 'Request Timeout',
  409: 'Conflict',
  410: 'Gone',
  411: 'Length Required',
  412: 'Precondition Failed',
  413: 'Content Too Large',
  414: 'URI Too Long',
  415: 'Unsupported Media Type',
  418: "I'm a teapot",
  421: 'Misdirected Request',
  422: 'Unprocessable Content',
  423: 'Locked',
  425: 'Too Early',
  426: 'Upgrade Required',
  428: 'Precondition Required',
  429: 'Too Many Requests',
  431: 'Request Header Fields Too Large',
  451: 'Unavailable For Legal Reasons',
  500: 'Internal Server Error',
  501: 'Not Implemented',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
  505: 'HTTP Version Not Supported',
  507: 'Insufficient Storage',
  508: 'Loop Detected',
  511: 'Network Authentication Required',
};

/**
 * A net error with what it means, e.g. "net::ERR_CONNECTION_REFUSED
 * (nothing accepts connections at that host and port)".
 * @param {string|null|undefined} error Chrome's error string
 * @returns {string}
 */
export function describeNetError(error) {
  if (!error) return 'an error the browser did not name';
  const why = NET_ERRORS[error];
  return why ? `${error} (${why})` : error;
}

/**
 * "HTTP 404 Not Found": the status and its reason phrase (the server's, else
 * the standard one).
 * @param {number} status
 * @param {string} [statusText]
 * @returns {string}
 */
export function httpStatusLine(status, statusText) {
  const reason = (statusText || '').trim() || REASONS[status] || '';
  return `HTTP ${status}${reason ? ` ${reason}` : ''}`;
}

/** Whether an HTTP status is an error the page's loader should report (4xx, 5xx). */
export const isHttpError = (status) => Number.isInteger(status) && status >= 400 && status <= 599;

/**
 * navigate's words for a load that failed at the network level.
 * @param {{tabId: number, url: string, error?: string|null, what?: string}} f
 *   what: "load" (default), "back", "forward" or "reload"
 * @returns {string}
 */
export function loadFailedText({ tabId, url, error, what = 'load' }) {
  const verb = { back: 'Going back to', forward: 'Going forward to', reload: 'Reloading' }[what] || 'Loading';
  return (
    `${verb} ${url} in tab ${tabId} failed: ${describeNetError(error)}. The tab now shows Chrome's error page, ` +
    'which has no content to read or act on. Call navigate with a working URL (or action "reload" once the site is back).'
  );
}

/**
 * navigate's words for a page that loaded with an HTTP error status.
 * @param {{tabId: number, url: string, status: number, statusText?: string, title?: string}} r
 * @returns {string}
 */
export function httpErrorText({ tabId, url, status, statusText, title }) {
  const line = httpStatusLine(status, statusText);
  return (
    `${line}: the server answered ${url} with status ${status} in tab ${tabId}${title ? ` ("${title}")` : ''}. ` +
    "The tab shows the server's error page: read it with get_page_text if it helps, or navigate to another URL."
  );
}

/**
 * A page tool's words for a tab that shows Chrome's error page.
 * @param {{tabId: number, url?: string, error?: string|null}} p
 * @returns {string}
 */
export function errorPageText({ tabId, url, error }) {
  const what = url ? `loading ${url} failed` : 'its last load failed';
  const why = error ? ` with ${describeNetError(error)}` : '';
  return (
    `Tab ${tabId} shows Chrome's error page: ${what}${why}. There is no page content to read or act on; ` +
    'call navigate with a working URL (or action "reload" to try again) first.'
  );
}

// ---------------------------------------------------------------------------
// Recording

function storage() {
  return typeof chrome !== 'undefined' && chrome.storage && chrome.storage.session ? chrome.storage.session : null;
}

/** webNavigation.onErrorOccurred: remembers a main-frame error (not an abort: the tab kept its page). */
export function onErrorOccurred(details) {
  if (!details || details.frameId !== 0 || details.error === ABORTED) return;
  const rec = { url: details.url, error: details.error, at: Date.now() };
  errors.set(details.tabId, rec);
  storage()
    ?.set({ [STORAGE_PREFIX + details.tabId]: rec })
    .catch(() => {});
}

/** webNavigation.onCommitted: a main-frame document loaded; the tab's old error is gone. */
export function onCommitted(details) {
  if (!details || details.frameId !== 0) return;
  forget(details.tabId);
}

/** Drops what is known about a tab's loads (a closed tab). */
export function forget(tabId) {
  errors.delete(tabId);
  storage()
    ?.remove(STORAGE_PREFIX + tabId)
    .catch(() => {});
}

/** The last main-frame error recorded for a tab, or null. */
export async function lastError(tabId) {
  if (errors.has(tabId)) return errors.get(tabId);
  try {
    const key = STORAGE_PREFIX + tabId;
    const got = await storage()?.get(key);
    return got?.[key] || null;
  } catch {
    return null;
  }
}

/**
 * Adds the listeners (at the top level of the worker, so a restarted worker
 * gets the events at once; tests call it on their fake).
 * @param {typeof chrome} api
 */
export function listen(api = globalThis.chrome) {
  if (!api?.webNavigation) return false;
  api.webNavigation.onErrorOccurred.addListener(onErrorOccurred);
  api.webNavigation.onCommitted.addListener(onCommitted);
  api.tabs?.onRemoved?.addListener((tabId) => forget(tabId));
  return true;
}

listen();

// ---------------------------------------------------------------------------
// Asking

/**
 * Whether a tab shows Chrome's error page, and why.
 * @param {number} tabId
 * @returns {Promise<{tabId: number, url: string, error: string|null}|null>} null when the page loaded (or nothing says otherwise)
 */
export async function errorPage(tabId) {
  if (typeof chrome === 'undefined' || !chrome.webNavigation?.getFrame) return null;
  let frame;
  try {
    frame = await chrome.webNavigation.getFrame({ tabId, frameId: 0 });
  } catch {
    return null;
  }
  if (!frame || !frame.errorOccurred) return null;
  const rec = await lastError(tabId);
  return { tabId, url: rec?.url || frame.url || '', error: rec?.error || null };
}

/** A page tool's failure: the tab shows an error page. */
export class ErrorPageError extends ToolError {
  constructor(info) {
    super(errorPageText(info));
    this.name = 'ErrorPageError';
    this.info = info;
  }
}

/**
 * useTab (sw/cdp.js) for the tools that need the page itself: read_page,
 * get_page_text, find, form_input, javascript_tool, upload_image and the
 * computer actions that act on content. A tab on Chrome's error page is
 * refused with errorPageText().
 * @param {object} ctx the tool's ctx
 * @param {number} [tabId]
 * @returns {Promise<chrome.tabs.Tab>}
 * @throws {ErrorPageError}
 */
export async function usePage(ctx, tabId) {
  // A named tab's error page is asked about while the tab is resolved: two browser round trips at once.
  const early = Number.isInteger(tabId) ? errorPage(tabId) : null;
  const tab = await useTab(ctx, tabId);
  const failed = await (early && tab.id === tabId ? early : errorPage(tab.id));
  if (failed) throw new ErrorPageError(failed);
  return tab;
}
