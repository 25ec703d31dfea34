// Back and forward by exactly one entry of a tab's session history.
//
// chrome.tabs.goBack/goForward skip the entries a page added without a user
// gesture (Chrome's history manipulation intervention), so in a tab only an
// agent drove they often find no earlier page, or skip one. The DevTools
// protocol lists every entry (Page.getNavigationHistory) and goes to the one
// asked for (Page.navigateToHistoryEntry), as the address bar's back button
// list does.

import * as cdp from './cdp.js';

/** HistoryEnd is thrown when there is no entry to step to. */
export class HistoryEnd extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = 'HistoryEnd';
  }
}

/**
 * Moves a tab one entry back (delta -1) or forward (+1) in its history.
 * Resolves once the navigation started; the caller waits for the load.
 * Without the DevTools protocol (another debugger holds the tab, a page
 * Chrome lets no extension debug) it falls back to chrome.tabs, and says
 * so if that finds nothing.
 * @param {number} tabId
 * @param {-1|1} delta
 * @returns {Promise<{from: number, to: number, entries: number, url: string}|null>} the entry indices (0-based), or null after the fallback
 */
export async function step(tabId, delta) {
  const word = delta < 0 ? 'earlier' : 'later';
  let hist;
  try {
    hist = await cdp.send(tabId, 'Page.getNavigationHistory');
  } catch (e) {
    try {
      await (delta < 0 ? chrome.tabs.goBack(tabId) : chrome.tabs.goForward(tabId));
    } catch (err) {
      throw new HistoryEnd(
        `Chrome found no ${word} page in tab ${tabId}'s history that an extension may go to ` +
          `(chrome.tabs skips pages opened without a user gesture), and the tab's full history was out of reach: ${e.message}.`,
        { cause: err },
      );
    }
    return null;
  }
  const entries = hist?.entries || [];
  const to = hist.currentIndex + delta;
  if (to < 0 || to >= entries.length) {
    throw new HistoryEnd(
      `There is no ${word} page in tab ${tabId}'s history: it shows entry ${hist.currentIndex + 1} of ${entries.length}.`,
    );
  }
  await cdp.send(tabId, 'Page.navigateToHistoryEntry', { entryId: entries[to].id });
  return { from: hist.currentIndex, to, entries: entries.length, url: entries[to].url };
}
