// Puts the page agent (content/agent.js) into each new document of the tabs
// agents use, as the document commits, so that the first read_page, find or
// click there does not wait for the agent's files (preload in agent.js).
//
// Which tabs: those the debugger is attached to (sw/cdp.js), which are the
// tabs a tool used since the worker started; a tab the person browses
// alone gets nothing. Which documents: a top frame's, at an http(s) or
// file URL (what the extension's host permission covers; Chrome refuses
// the rest anyway), not a prerendered one (its tab is not the agent's yet).

import { isAttached } from './cdp.js';
import { preload } from '../content/agent.js';

const SCRIPTABLE = /^(https?|file):/i;

/** webNavigation.onCommitted: a frame shows a new document. */
export function onCommitted(d) {
  if (!d || d.frameId !== 0 || !SCRIPTABLE.test(d.url || '')) return;
  if (d.documentLifecycle === 'prerender' || !isAttached(d.tabId)) return;
  preload(d.tabId, d.documentId);
}

/**
 * Adds the listener (at the top level of the worker; tests call it on their fake).
 * @param {typeof chrome} api
 */
export function listen(api = globalThis.chrome) {
  if (!api?.webNavigation?.onCommitted || !api?.scripting) return false;
  api.webNavigation.onCommitted.addListener(onCommitted);
  return true;
}

listen();
