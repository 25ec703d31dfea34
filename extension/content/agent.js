// Runs the page agent in a tab: the classic scripts of content/page/ (see
// page/base.js), injected into the extension's ISOLATED world of the page's
// top frame, where they install globalThis.__browserBridgePage once per
// document. A call runs one small function that calls an op of that
// namespace; only when the namespace is missing (a new document) or was
// installed by another start of the worker (whose code may differ) are the
// files injected first. The element refs (page/refs.js) live on the same
// globalThis apart from the code, so they survive both.

/**
 * The page agent's files, in load order, relative to this folder (so that
 * each names a file beside this one). Each only adds to the namespace that
 * base.js creates; injecting them again replaces what they define and
 * keeps the refs.
 */
export const PAGE_SCRIPTS = [
  'page/base.js',
  'page/refs.js',
  'page/hidden.js',
  'page/a11y.js',
  'page/snapshot.js',
  'page/text.js',
  'page/find.js',
  'page/form.js',
  'page/actions.js',
  'page/settle.js',
];

const PAGE_DIR = 'content/';

// Which start of the worker installed a document's agent: files injected by
// an earlier start (before an update of the extension, say) are injected
// again, so a page never runs code older than the worker's.
const TOKEN = `${Date.now().toString(36)}.${Math.random().toString(36).slice(2, 10)}`;

/**
 * The function executeScript runs for each call (serialised: it must not
 * refer to anything outside its body). It answers {missing: true} when the
 * agent is not installed (or, unless install is set, was installed by
 * another token); install marks a fresh injection as this token's.
 */
export function callAgent(token, op, args, install) {
  const A = globalThis.__browserBridgePage;
  if (!A || typeof A.run !== 'function' || (!install && A.token !== token)) return { missing: true };
  if (install) A.token = token;
  return A.run(op, args);
}

/** Words for a page the extension cannot script, from executeScript's error. */
function scriptingError(tabId, e) {
  const msg = String((e && e.message) || e);
  if (/showing error page/i.test(msg)) {
    // Chrome's error page: the load failed (usePage in sw/pageload.js names the error when it knows it).
    return new Error(
      `tab ${tabId} shows Chrome's error page: its page did not load. Call navigate with a working URL first`,
    );
  }
  if (/Cannot access|cannot be scripted|chrome:\/\/|extensions gallery|Missing host permission/i.test(msg)) {
    return new Error(`this page cannot be read or scripted by extensions (${msg})`);
  }
  return new Error(msg);
}

// tabId -> the installation of the agent into the tab's new document that
// preload started; a call into that tab's top frame waits for it rather
// than find no agent and inject the files a second time.
const preloading = new Map();

/**
 * Installs the page agent into a tab's document as soon as it commits, so
 * that the first call after a navigation (nearly always read_page) finds it
 * instead of paying for the files then (three executeScript calls in place
 * of one: about half of that call's time on a small page). It only runs the
 * agent's files in the page, as a call would; nothing is read out of the
 * page. Failures are left for the next call to meet and report.
 * @param {number} tabId
 * @param {string} [documentId] the committed document (webNavigation's), so a later one is never confused with it
 * @returns {Promise<void>}
 */
export function preload(tabId, documentId) {
  const target = documentId ? { tabId, documentIds: [documentId] } : { tabId, frameIds: [0] };
  const p = (async () => {
    await chrome.scripting.executeScript({ target, world: 'ISOLATED', files: PAGE_SCRIPTS.map((f) => PAGE_DIR + f) });
    await chrome.scripting.executeScript({
      target,
      world: 'ISOLATED',
      func: callAgent,
      args: [TOKEN, 'refOf', { elements: [] }, true],
    });
  })()
    .catch(() => {})
    .finally(() => {
      if (preloading.get(tabId) === p) preloading.delete(tabId);
    });
  preloading.set(tabId, p);
  return p;
}

/**
 * Runs the page agent's op with args in a tab's frame (ISOLATED world) and
 * returns its value, or throws an Error with the agent's message.
 * @param {number} tabId
 * @param {string} op an op of content/page/ (snapshot, text, find, fill, locate, …)
 * @param {object} [args]
 * @param {{frameId?: number}} [opts]
 */
export async function runAgent(tabId, op, args = {}, { frameId = 0 } = {}) {
  const target = { tabId, frameIds: [frameId] };
  const call = async (install) => {
    const results = await chrome.scripting.executeScript({
      target,
      world: 'ISOLATED',
      func: callAgent,
      args: [TOKEN, op, args, install],
    });
    return results && results[0] && results[0].result;
  };
  if (frameId === 0 && preloading.has(tabId)) await preloading.get(tabId);
  let r;
  try {
    r = await call(false);
    if (r && r.missing) {
      await chrome.scripting.executeScript({ target, world: 'ISOLATED', files: PAGE_SCRIPTS.map((f) => PAGE_DIR + f) });
      r = await call(true);
    }
  } catch (e) {
    throw scriptingError(tabId, e);
  }
  if (!r || r.missing) throw new Error('the page did not answer (it may be navigating; try again)');
  if (!r.ok) throw new Error(r.error);
  return r.value;
}
