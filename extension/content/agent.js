// Runs the page agent in a tab: the classic scripts of content/page/ (see
// page/base.js), injected into the extension's ISOLATED world of the page's
// top frame, where they install globalThis.__browserBridgePage once per
// document. A call runs one small function that calls an op of that
// namespace; only when the namespace is missing (a new document) or was
// installed by another start of the worker (whose code may differ) are the
// files injected first. In the tabs agents use, the files are injected as
// each document commits (preload, from sw/preload.js), so that the first
// call there is one round trip too. The element refs (page/refs.js) live on
// the same globalThis apart from the code, so they survive both.

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
  'page/warm.js',
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

/**
 * The injection of the page agent's files into a document. immediately: at
 * once, not at document idle (a document that just committed has no DOM
 * yet, and the files need none).
 */
async function injectFiles(target, immediately) {
  const files = PAGE_SCRIPTS.map((f) => PAGE_DIR + f);
  await chrome.scripting.executeScript({ target, world: 'ISOLATED', files, injectImmediately: immediately });
}

/**
 * The mark of this worker's token on what the files installed (callAgent's
 * install, without an op), after them.
 */
async function mark(target, immediately) {
  const results = await chrome.scripting.executeScript({
    target,
    world: 'ISOLATED',
    func: markAgent,
    args: [TOKEN, true],
    injectImmediately: immediately,
  });
  return !!(results && results[0] && results[0].result);
}

/**
 * Marks the agent installed in this document as token's (serialised, like
 * callAgent); warm: a preload, whose agent warms its code up once the page
 * has loaded (page/warm.js).
 */
export function markAgent(token, warm) {
  const A = globalThis.__browserBridgePage;
  if (!A || typeof A.run !== 'function') return false;
  A.token = token;
  if (warm && typeof A.warmAfterLoad === 'function') A.warmAfterLoad();
  return true;
}

/**
 * tabId -> the injection into its top frame's new document that preload()
 * started when the document committed, {files, done}: files settles when the
 * agent's files are in (true) or could not be put there (false), done when
 * they are marked too. runAgent waits for the files rather than finding the
 * agent missing and injecting them itself, and does not wait for the mark
 * (a second round trip to a renderer still busy with the load): its own
 * call marks them.
 */
const preloads = new Map();

/**
 * How long (ms) runAgent waits for a preload still under way before it goes
 * on as without one (the preload may have stalled with its document).
 */
const PRELOAD_WAIT_MS = 2000;

/**
 * Injects the page agent into a tab's top-frame document as it commits, so
 * that the first call of a tool there runs the op in one round trip instead
 * of three (a call that finds the agent missing, the files, the call again;
 * about 20 ms of a first read_page on a busy machine) and parses the files
 * while the page loads rather than while the model waits. The files only
 * define the agent; nothing runs on the page until a tool calls an op.
 * @param {number} tabId
 * @param {string} [documentId] the committed document (webNavigation's
 *   documentId): the files go to that document or nowhere
 * @returns {Promise<boolean>} whether the agent is installed there
 */
export function preload(tabId, documentId) {
  const target = documentId ? { tabId, documentIds: [documentId] } : { tabId, frameIds: [0] };
  const files = injectFiles(target, true).then(
    () => true,
    () => false,
  );
  const done = files.then((ok) => ok && mark(target, true)).catch(() => false);
  const entry = { files, done };
  preloads.set(tabId, entry);
  done.then(() => {
    if (preloads.get(tabId) === entry) preloads.delete(tabId);
  });
  return done;
}

/**
 * Waits (PRELOAD_WAIT_MS at most) for the files of a preload under way into
 * tabId's top frame; true when they are in and the mark may not be yet.
 */
async function preloaded(tabId) {
  const entry = preloads.get(tabId);
  if (!entry) return false;
  let timer;
  const ok = await Promise.race([
    entry.files,
    new Promise((resolve) => (timer = setTimeout(() => resolve(false), PRELOAD_WAIT_MS))),
  ]);
  clearTimeout(timer);
  return ok;
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
  let r;
  try {
    // Files a preload of this worker put in: this call marks them (install), the mark under way or not.
    r = await call(frameId === 0 && (await preloaded(tabId)));
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
