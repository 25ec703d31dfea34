// Loads the page agent's classic scripts (content/page/, in the order
// content/agent.js injects them) into this process's global scope, the way
// Chrome runs them in a page's isolated world: as scripts, not modules.
import { readFileSync } from 'node:fs';
import { runInThisContext } from 'node:vm';
import { PAGE_SCRIPTS } from '../content/agent.js';

const dir = new URL('../content/', import.meta.url);

/** Runs every page script once more and returns globalThis.__browserBridgePage. */
export function loadPageAgent() {
  for (const f of PAGE_SCRIPTS) {
    const url = new URL(f, dir);
    runInThisContext(readFileSync(url, 'utf8'), { filename: url.pathname });
  }
  return globalThis.__browserBridgePage;
}
