// The core tab tools: tabs_context, tabs_context_mcp, tabs_create,
// tabs_create_mcp and navigate. Each acts on the calling session's tab group
// (sw/sessions.js) unless the caller names a tab id.

import { ToolError } from '../sw/tools.js';
import { tabId as tabIdProp } from './props.js';
import { trackTab, mainDocument, mainFrameMark } from '../sw/cdp.js';
import * as steadyview from '../sw/steadyview.js';
import { HistoryEnd, step as stepHistory } from '../sw/history.js';
import { ABORTED, errorPage, httpErrorText, httpStatusLine, isHttpError, loadFailedText } from '../sw/pageload.js';

/** How long navigate waits for a page to finish loading by default. */
export const NAVIGATE_TIMEOUT_MS = 30_000;

function describe(tab, { owner, mine, current }) {
  return {
    tabId: tab.id,
    windowId: tab.windowId,
    url: tab.url || tab.pendingUrl || '',
    title: tab.title || '',
    active: !!tab.active,
    status: tab.status || 'unknown',
    groupId: tab.groupId ?? -1,
    ...(owner ? { session: owner.client } : {}),
    inThisSession: !!mine,
    current: !!current,
  };
}

function line(t, windows) {
  const marks = [
    windows > 1 && `window ${t.windowId}`,
    t.current && 'current',
    t.inThisSession && 'this session',
    !t.inThisSession && t.session && `session "${t.session}"`,
    t.active && 'active in its window',
  ]
    .filter(Boolean)
    .join(', ');
  return `- tab ${t.tabId}: ${t.title || '(no title)'} — ${t.url}${marks ? ` [${marks}]` : ''}`;
}

async function context(ctx, onlyMine) {
  const records = await ctx.sessions.listSessions();
  const byGroup = new Map(records.filter((r) => r.groupId !== null).map((r) => [r.groupId, r]));
  const self = records.find((r) => r.id === ctx.session.id);
  const all = onlyMine ? await ctx.sessions.sessionTabs(ctx.session) : await chrome.tabs.query({});
  const tabs = all.map((tab) => {
    const owner = byGroup.get(tab.groupId) || null;
    const mine = owner?.id === ctx.session.id;
    return describe(tab, { owner, mine, current: mine && self?.currentTabId === tab.id });
  });
  return tabs;
}

/** tabs_context: every open tab, marking this session's. */
const tabsContext = {
  name: 'tabs_context',
  description: "All open tabs; use other sessions' only if the user asks.",
  inputSchema: { type: 'object', properties: {}, additionalProperties: false },
  annotations: { readOnlyHint: true, openWorldHint: false },
  async run(args, ctx) {
    const tabs = await context(ctx, false);
    // The window only when there are several: which tabs share one is then worth a word.
    const windows = new Set(tabs.map((t) => t.windowId)).size;
    const head = `${tabs.length} open tab${tabs.length === 1 ? '' : 's'}${windows > 1 ? ` in ${windows} windows` : ''}:`;
    const text = tabs.length ? `${head}\n${tabs.map((t) => line(t, windows)).join('\n')}` : 'No tabs are open.';
    return { content: [{ type: 'text', text }] };
  },
};

/** tabs_context_mcp: only this session's tabs. */
const tabsContextMcp = {
  name: 'tabs_context_mcp',
  description: "Your session's tabs and which is current; createIfEmpty opens one.",
  inputSchema: {
    type: 'object',
    properties: {
      createIfEmpty: {
        type: 'boolean',
      },
    },
    additionalProperties: false,
  },
  annotations: { readOnlyHint: false, idempotentHint: true, openWorldHint: false },
  async run(args, ctx) {
    let tabs = await context(ctx, true);
    if (!tabs.length && args.createIfEmpty) {
      await ctx.createTab('about:blank');
      tabs = await context(ctx, true);
    }
    const text = tabs.length
      ? `Your session has ${tabs.length} tab${tabs.length === 1 ? '' : 's'}:\n${tabs.map((t) => line(t, 1)).join('\n')}`
      : "Your session has no tabs yet. navigate with a url opens one in your session's tab group and loads the page (tabs_create_mcp opens one too); the page tools need a tab and do not open one.";
    return { content: [{ type: 'text', text }] };
  },
};

/**
 * Turns what a model typed into a URL to load: adds https:// to a bare host,
 * refuses javascript: (javascript_tool runs code).
 * @param {string} raw
 * @returns {string}
 */
export function normaliseUrl(raw) {
  const s = String(raw).trim();
  if (!s) throw new ToolError('url is empty.');
  if (/^javascript:/i.test(s)) {
    throw new ToolError('navigate does not run javascript: URLs; use javascript_tool to run code in the page.');
  }
  if (/^[a-z][a-z0-9+.-]*:/i.test(s) && !/^[^:/]+:\d+(\/|$)/.test(s)) return s; // has a scheme (not host:port)
  if (/^(localhost|\d{1,3}(\.\d{1,3}){3}|\[[0-9a-f:]+\])(:\d+)?(\/|$)/i.test(s)) return `http://${s}`;
  return `https://${s}`;
}

function createTool(name, description) {
  return {
    name,
    description,
    inputSchema: {
      type: 'object',
      properties: {
        url: {
          type: 'string',
        },
      },
      additionalProperties: false,
    },
    annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
    async run(args, ctx) {
      const url = args.url === undefined ? 'about:blank' : normaliseUrl(args.url);
      // Open blank, start console/network capture, then load: the page's
      // first console lines and requests are part of what the tools report.
      const tab = await ctx.createTab('about:blank');
      await trackTab(tab.id).catch(() => {}); // chrome:// pages cannot be debugged
      if (url !== 'about:blank') await chrome.tabs.update(tab.id, { url });
      return {
        content: [
          {
            type: 'text',
            text: `Opened tab ${tab.id} (${url}) in your session's tab group; it is now your current tab.`,
          },
        ],
      };
    },
  };
}

const tabsCreate = createTool('tabs_create', 'Same as tabs_create_mcp.');
const tabsCreateMcp = createTool('tabs_create_mcp', 'Opens url in a new current tab; does not wait for the load.');

const ACTIONS = ['back', 'forward', 'reload'];

/** navigate: load a URL, or go back, forward or reload; waits for the load. */
const navigate = {
  name: 'navigate',
  description:
    'Loads url (or does action), opening a tab if needed; waits up to timeoutMs; returns the final URL or error.',
  inputSchema: {
    type: 'object',
    properties: {
      url: {
        type: 'string',
      },
      action: {
        type: 'string',
        enum: ACTIONS,
      },
      tabId: tabIdProp,
      timeoutMs: {
        type: 'integer',
        minimum: 100,
        maximum: 120000,
        default: NAVIGATE_TIMEOUT_MS,
      },
    },
    additionalProperties: false,
  },
  annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
  async run(args, ctx) {
    let { url, action } = args;
    if (url !== undefined && ACTIONS.includes(url.trim().toLowerCase())) {
      action = action || url.trim().toLowerCase();
      url = undefined;
    }
    if ((url === undefined) === (action === undefined)) {
      throw new ToolError('Pass either url or action (back, forward or reload), not both and not neither.');
    }
    const target = url === undefined ? null : normaliseUrl(url);
    // navigate with a url is one of the tools that open a tab: a session
    // without one gets it here, in its group (sw/sessions.js, resolveTab).
    const tab = await ctx.resolveTab(args.tabId, { create: target !== null });
    await trackTab(tab.id).catch(() => {}); // capture from the moment the tab is in use
    // The page keeps its size while Chrome moves the debugger's bar around this load (sw/steadyview.js).
    await steadyview.hold(tab);
    let stepped = null; // back/forward: the history entries moved between
    const go =
      {
        back: async () => (stepped = await stepHistory(tab.id, -1)),
        forward: async () => (stepped = await stepHistory(tab.id, 1)),
        reload: () => chrome.tabs.reload(tab.id),
      }[action] || (() => chrome.tabs.update(tab.id, { url: target }));
    const timeoutMs = args.timeoutMs ?? NAVIGATE_TIMEOUT_MS;
    const since = mainFrameMark(tab.id); // documents committed after this are this load's
    const {
      tab: after,
      timedOut,
      moved,
      netError,
      committed,
    } = await loadAndWait(tab.id, go, { timeoutMs, signal: ctx.signal, what: action || target, from: tab.url }).finally(
      () => steadyview.releaseSoon(tab.id), // also when no load ended (a refused URL, a timeout)
    );
    const done = after || tab;
    if (target && !moved && done.url !== target) {
      // Chrome ignores some navigations from extensions (data: URLs in the top frame, for one).
      throw new ToolError(
        `The browser did not load ${target}; tab ${tab.id} still shows ${done.url || 'its old page'}. Chrome refuses some URLs from extensions (data: URLs, for one).`,
      );
    }
    // The main document's status: from the capture's events when its document committed during the wait, else
    // asked of the page (CDP), beside the error-page check (webNavigation).
    const loadedDoc = timedOut
      ? null
      : mainDocument(tab.id, { since, documentId: committed?.documentId }).catch(() => null);
    // A load still under way at the timeout leaves the old page in the frame: its state says nothing of this load.
    // A load whose document committed with no error after it ended on no error page (Chrome reports an error
    // page's commit as onErrorOccurred, never onCommitted): no need to ask.
    const failed = (timedOut && !netError) || committed ? null : await loadFailure(tab.id, netError);
    if (failed) {
      // An HTTP error with an empty body also ends on Chrome's error page: say the status first.
      const doc = await (loadedDoc || mainDocument(tab.id));
      const http = doc && isHttpError(doc.status) ? `${httpStatusLine(doc.status, doc.statusText)}: ` : '';
      return {
        isError: true,
        content: [
          {
            type: 'text',
            text:
              http +
              loadFailedText({
                tabId: tab.id,
                url: failed.url || done.url || target,
                error: failed.error,
                what: action || 'load',
              }),
          },
        ],
      };
    }
    const doc = await loadedDoc;
    if (doc && isHttpError(doc.status)) {
      return {
        isError: true,
        content: [
          {
            type: 'text',
            text: httpErrorText({
              tabId: tab.id,
              url: done.url || doc.url,
              status: doc.status,
              statusText: doc.statusText,
              title: done.title,
            }),
          },
        ],
      };
    }
    const what = action ? { back: 'Went back', forward: 'Went forward', reload: 'Reloaded' }[action] : 'Navigated';
    const entry = stepped ? ` (history entry ${stepped.to + 1} of ${stepped.entries})` : '';
    const text =
      `${what} in tab ${tab.id}: ${done.url || target} — "${done.title || ''}"${entry}` +
      (timedOut ? `. The page had not finished loading after ${timeoutMs} ms; it may still be loading.` : '.');
    return { content: [{ type: 'text', text }] };
  },
};

/**
 * Why the tab's last load failed, or null if it did not: the tab shows
 * Chrome's error page (webNavigation.getFrame) for the error seen while
 * waiting, else the one recorded (sw/pageload.js), else the one the
 * network capture saw.
 * @param {number} tabId
 * @param {{url: string, error: string}|null} seen the main-frame error of this load, if one was seen
 * @returns {Promise<{url: string, error: string|null}|null>}
 */
async function loadFailure(tabId, seen) {
  const page = await errorPage(tabId);
  if (!page) return null;
  let error = seen?.error || page.error;
  if (!error) error = (await mainDocument(tabId))?.errorText || null;
  return { url: seen?.url || page.url, error };
}

/**
 * Starts a navigation with go() and waits for the tab to finish loading:
 * the main frame's load event for a document that began loading and
 * committed during the wait (webNavigation.onCompleted; the load event of a
 * page waits for its subframes'), else the tab's status "complete" (which
 * Chrome tells after it, up to tens of ms later on a busy machine, and which
 * is all a same-document navigation says).
 * netError is the main-frame load error Chrome reported meanwhile (not an
 * abort: an aborted load leaves the old page), unless a later load committed;
 * committed is the main-frame commit seen last, if no error came after it
 * (a document other than an error page), none of which happens to a
 * same-document navigation or without webNavigation.
 * @returns {Promise<{tab: chrome.tabs.Tab|null, timedOut: boolean, moved: boolean, netError: {url: string, error: string}|null, committed: {url: string, documentId?: string}|null}>}
 */
function loadAndWait(tabId, go, { timeoutMs, signal, what, from }) {
  return new Promise((resolve, reject) => {
    const start = Date.now();
    let sawLoading = false;
    let moved = false; // the tab's URL changed: the navigation was not ignored
    // A new tab's own first load (to about:blank) does not count as moving.
    const isMove = (url) => url !== undefined && url !== from && url !== '' && url !== 'about:blank';
    const nav = chrome.webNavigation; // absent in a browser without the permission: then errorPage() decides alone
    let netError = null;
    let committed = null;
    let began = false; // a main-frame load began during the wait (not one under way before it)
    let pending = false; // a main-frame load began and has neither committed nor failed: the tab moves on
    let done = false;
    const finish = (fn, v) => {
      if (done) return;
      done = true;
      if (nav) {
        nav.onErrorOccurred.removeListener(onNavError);
        nav.onCommitted.removeListener(onCommitted);
        nav.onBeforeNavigate?.removeListener(onBeforeNavigate);
        nav.onCompleted?.removeListener(onCompleted);
      }
      if (v && typeof v === 'object' && 'timedOut' in v) Object.assign(v, { netError, committed });
      chrome.tabs.onUpdated.removeListener(onUpdated);
      chrome.tabs.onRemoved.removeListener(onRemoved);
      signal?.removeEventListener('abort', onAbort);
      clearInterval(poll);
      clearTimeout(timer);
      fn(v);
    };
    const onUpdated = (id, info, tab) => {
      if (id !== tabId) return;
      if (isMove(info.url)) moved = true;
      if (info.status === 'loading') sawLoading = true;
      else if (info.status === 'complete' && sawLoading) finish(resolve, { tab, timedOut: false, moved });
    };
    const onRemoved = (id) =>
      id === tabId && finish(reject, new ToolError(`Tab ${tabId} was closed while loading ${what}.`));
    const onNavError = (d) => {
      if (d.tabId !== tabId || d.frameId !== 0) return;
      pending = false;
      if (d.error !== ABORTED) {
        netError = { url: d.url, error: d.error };
        committed = null;
      }
    };
    const onCommitted = (d) => {
      if (d.tabId === tabId && d.frameId === 0) {
        pending = false;
        netError = null;
        committed = { url: d.url, documentId: d.documentId };
      }
    };
    const onBeforeNavigate = (d) => {
      if (d.tabId === tabId && d.frameId === 0) began = pending = true;
    };
    const onCompleted = (d) => {
      if (d.tabId !== tabId || d.frameId !== 0 || !began || pending || !committed) return;
      if (committed.documentId && d.documentId && d.documentId !== committed.documentId) return;
      // The tab as the load left it: its URL and title are the document's.
      chrome.tabs.get(tabId).then(
        (t) => {
          if (isMove(t.url)) moved = true;
          finish(resolve, { tab: t, timedOut: false, moved });
        },
        () => {}, // closed meanwhile: onRemoved says so
      );
    };
    const onAbort = () => finish(reject, new ToolError('Navigation wait cancelled.'));
    // Events can be missed (same-document navigations never say "loading"),
    // so look at the tab now and then as well.
    const poll = setInterval(async () => {
      const t = await chrome.tabs.get(tabId).catch(() => null);
      if (!t) return;
      if (isMove(t.url)) moved = true;
      if (t.status === 'loading') sawLoading = true;
      else if (t.status === 'complete' && (sawLoading || Date.now() - start > 1000)) {
        finish(resolve, { tab: t, timedOut: false, moved });
      }
    }, 250);
    const timer = setTimeout(
      () =>
        chrome.tabs
          .get(tabId)
          .catch(() => null)
          .then((t) => finish(resolve, { tab: t, timedOut: true, moved })),
      timeoutMs,
    );
    chrome.tabs.onUpdated.addListener(onUpdated);
    chrome.tabs.onRemoved.addListener(onRemoved);
    if (nav) {
      nav.onErrorOccurred.addListener(onNavError);
      nav.onCommitted.addListener(onCommitted);
      nav.onBeforeNavigate?.addListener(onBeforeNavigate);
      nav.onCompleted?.addListener(onCompleted);
    }
    signal?.addEventListener('abort', onAbort);
    Promise.resolve()
      .then(go)
      .catch((err) => {
        const msg = err?.message || String(err);
        if (err instanceof HistoryEnd) {
          finish(reject, new ToolError(msg));
        } else if (/history/i.test(msg)) {
          finish(
            reject,
            new ToolError(`There is no ${what === 'back' ? 'earlier' : 'later'} page in tab ${tabId}'s history.`),
          );
        } else {
          finish(
            reject,
            new ToolError(`Could not ${what === 'reload' ? 'reload' : `load ${what}`} in tab ${tabId}: ${msg}`),
          );
        }
      });
  });
}

export default [tabsContext, tabsContextMcp, tabsCreate, tabsCreateMcp, navigate];
