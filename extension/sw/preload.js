// Puts the page agent (content/agent.js) into each new document of the tabs
// agents use, as the document commits, so that the first read_page, find or
// click there does not wait for the agent's files (preload in agent.js).
//
// Which tabs: those the debugger is attached to (sw/cdp.js), which are the
// tabs a tool used since the worker started; a tab the person browses
// alone gets nothing. Which documents: a top frame's, at an http(s) or
// file URL (what the extension's host permission covers; Chrome refuses
// the rest anyway), not a prerendered one (its tab is not the agent's yet),
// and not one the person's (or their organization's) site policy keeps the
// agent's tools from (agentPreloadAllowed in sw/policy.js): our code has no
// business on a site the person barred agents from.
//
// The policy is the gate's copy in memory (sw/gate.js, dropped when storage
// changes), so a commit costs no storage read; only the first commit after
// a change waits for one.

import { isAttached } from './cdp.js';
import { cachedPolicy, policy } from './gate.js';
import { agentPreloadAllowed } from './policy.js';
import { preload } from '../content/agent.js';

const SCRIPTABLE = /^(https?|file):/i;

/**
 * webNavigation.onCommitted: a frame shows a new document.
 * @returns {Promise<void>|undefined} settled once the policy was read, when it was not in memory (for tests)
 */
export function onCommitted(d) {
  if (!d || d.frameId !== 0 || !SCRIPTABLE.test(d.url || '')) return undefined;
  if (d.documentLifecycle === 'prerender' || !isAttached(d.tabId)) return undefined;
  const inForce = cachedPolicy();
  if (inForce) {
    // At once, in the commit's task: a call right after it finds the preload under way.
    if (agentPreloadAllowed(inForce, d.url)) preload(d.tabId, d.documentId);
    return undefined;
  }
  return policy().then(
    (p) => {
      if (agentPreloadAllowed(p, d.url)) preload(d.tabId, d.documentId);
    },
    // Unreadable policy: no preload (the person's rules may bar the site); a call that
    // passes the gate injects the agent itself.
    (err) => console.warn(`preload: the site policy could not be read: ${err?.message || err}`),
  );
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
