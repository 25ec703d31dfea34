// The forwarded methods of spec 001 that relay clients ("conn-<id>:<n>"
// request ids) call directly: createTab, getTabs, selectTab, activateTab,
// closeTab, browser_navigate, goBack, goForward, forwardCDPCommand, click,
// type, hover, screenshot. Each answers a plain JSON result or throws an
// error with a JSON-RPC code (-32602 bad params, -32000 failed).
//
// ctx = {session: {id: "conn-…", client}, resolveTab(tabId?), createTab(url?), sessions, signal}

import * as cdp from './cdp.js';
import * as steadyview from './steadyview.js';
import * as history from './history.js';
import { captureTab, DEFAULT_MAX_EDGE, DEFAULT_BUDGET } from './screenshot.js';
import { runAgent } from '../content/agent.js';

class RelayError extends Error {
  constructor(message, code = -32000) {
    super(message);
    this.code = code;
  }
}

const bad = (msg) => new RelayError(msg, -32602);

function optTabId(params) {
  const t = params.tabId;
  if (t === undefined || t === null) return undefined;
  if (!Number.isInteger(t) || t < 0) throw bad('tabId must be a non-negative integer');
  return t;
}

function needString(params, key) {
  const v = params[key];
  if (typeof v !== 'string' || v === '') throw bad(`${key} must be a non-empty string`);
  return v;
}

function tabInfo(tab) {
  return {
    tabId: tab.id,
    url: tab.url || tab.pendingUrl || '',
    title: tab.title || '',
    active: !!tab.active,
    windowId: tab.windowId,
    status: tab.status,
  };
}

// A connection without a tab yet is told to open one: only createTab and
// browser_navigate (create) open a tab, as navigate does for MCP tools.
async function useTab(ctx, params, { create = false } = {}) {
  try {
    return await cdp.useTab(ctx, optTabId(params), { create });
  } catch (e) {
    if (e instanceof RelayError) throw e;
    if (e?.name === 'TabError' && optTabId(params) === undefined) {
      throw new RelayError(
        'This connection has no tab yet: call createTab, or browser_navigate with a url, first (getTabs lists the open tabs to pass as tabId).',
      );
    }
    throw new RelayError(e.message);
  }
}

/** Waits until the tab's status is "complete" (or the time runs out); returns the tab. */
export function waitForLoad(tabId, timeoutMs = 30000) {
  return new Promise((resolve) => {
    let done = false;
    const finish = async () => {
      if (done) return;
      done = true;
      chrome.tabs.onUpdated.removeListener(onUpdated);
      clearTimeout(timer);
      try {
        resolve(await chrome.tabs.get(tabId));
      } catch {
        resolve(null);
      }
    };
    const onUpdated = (id, info) => {
      if (id === tabId && info.status === 'complete') finish();
    };
    const timer = setTimeout(finish, timeoutMs);
    chrome.tabs.onUpdated.addListener(onUpdated);
    chrome.tabs.get(tabId).then((t) => {
      if (t.status === 'complete' && !t.pendingUrl) {
        setTimeout(
          () =>
            chrome.tabs.get(tabId).then((t2) => {
              if (t2.status === 'complete') finish();
            }, finish),
          50,
        );
      }
    }, finish);
  });
}

/** Resolves {ref | selector | x,y} to viewport CSS px. */
async function point(tabId, params) {
  if (typeof params.ref === 'string') {
    const loc = await runAgent(tabId, 'locate', { ref: params.ref }).catch((e) => {
      throw new RelayError(e.message);
    });
    return { x: loc.x, y: loc.y, element: { ref: params.ref, role: loc.role, name: loc.name } };
  }
  if (typeof params.selector === 'string') {
    const r = await runAgent(tabId, 'find', { query: params.selector, limit: 1 }).catch((e) => {
      throw new RelayError(e.message);
    });
    if (!r.matches.length) throw new RelayError(`no visible element matches ${JSON.stringify(params.selector)}`);
    const m = r.matches[0];
    const loc = await runAgent(tabId, 'locate', { ref: m.ref }).catch((e) => {
      throw new RelayError(e.message);
    });
    return { x: loc.x, y: loc.y, element: { ref: m.ref, role: m.role, name: m.name } };
  }
  if (typeof params.x === 'number' && typeof params.y === 'number') return { x: params.x, y: params.y, element: null };
  throw bad('give the target as ref, selector, or x and y (viewport CSS pixels)');
}

async function navigateAndWait(tabId, fn, timeoutMs) {
  const wait = waitForLoad(tabId, timeoutMs);
  await fn();
  await new Promise((r) => setTimeout(r, 50));
  const tab = await wait;
  return tab ? tabInfo(tab) : { tabId };
}

export const extraMethods = {
  async createTab(params, ctx) {
    const url = params.url === undefined ? 'about:blank' : needString(params, 'url');
    const tab = await ctx.createTab(url);
    try {
      await cdp.trackTab(tab.id);
    } catch {
      /* not attachable (e.g. chrome://) */
    }
    return { tabId: tab.id, url: tab.url || tab.pendingUrl || url };
  },

  async getTabs(params, ctx) {
    const tabs = await chrome.tabs.query({});
    const mine = ctx.sessions && ctx.sessions.sessionTabs ? await ctx.sessions.sessionTabs(ctx.session) : [];
    const mineIds = new Set(mine.map((t) => t.id));
    const rec =
      ctx.sessions && ctx.sessions.listSessions
        ? (await ctx.sessions.listSessions()).find((r) => r.id === ctx.session.id)
        : null;
    const list = tabs.map((t) => ({
      ...tabInfo(t),
      inSession: mineIds.has(t.id),
      selected: !!rec && rec.currentTabId === t.id,
    }));
    return {
      tabs: params.sessionOnly ? list.filter((t) => t.inSession) : list,
      selectedTabId: rec ? rec.currentTabId : null,
    };
  },

  async selectTab(params, ctx) {
    if (!Number.isInteger(params.tabId)) throw bad('selectTab needs tabId');
    const tab = await useTab(ctx, params);
    return { ...tabInfo(tab), selected: true };
  },

  async activateTab(params, ctx) {
    const tab = await useTab(ctx, params);
    const t = await chrome.tabs.update(tab.id, { active: true });
    try {
      await chrome.windows.update(t.windowId, { focused: true });
    } catch {
      /* headless or no window manager */
    }
    return { ...tabInfo(t), active: true };
  },

  async closeTab(params, ctx) {
    const tab = await useTab(ctx, params);
    await cdp.detach(tab.id);
    await chrome.tabs.remove(tab.id);
    return { tabId: tab.id, closed: true };
  },

  async browser_navigate(params, ctx) {
    const url = needString(params, 'url');
    try {
      new URL(url);
    } catch {
      throw bad(`url is not an absolute URL: ${url}`);
    }
    const tab = await useTab(ctx, params, { create: true });
    return navigateAndWait(tab.id, () => chrome.tabs.update(tab.id, { url }), params.timeoutMs || 30000);
  },

  async goBack(params, ctx) {
    const tab = await useTab(ctx, params);
    return navigateAndWait(tab.id, () => history.step(tab.id, -1), params.timeoutMs || 30000);
  },

  async goForward(params, ctx) {
    const tab = await useTab(ctx, params);
    return navigateAndWait(tab.id, () => history.step(tab.id, 1), params.timeoutMs || 30000);
  },

  async forwardCDPCommand(params, ctx) {
    const method = needString(params, 'method');
    if (!/^[A-Z][A-Za-z]*\.[a-zA-Z]+$/.test(method)) {
      throw bad(`method ${method} is not a CDP method name like "Page.navigate"`);
    }
    const tab = await useTab(ctx, params);
    // A client that emulates the viewport itself: our holds through loads must not undo it (sw/steadyview.js).
    if (method.startsWith('Emulation.')) await steadyview.yieldToClient(tab.id);
    try {
      return await cdp.send(tab.id, method, params.params || {}, { timeoutMs: params.timeoutMs || 30000 });
    } catch (e) {
      throw new RelayError(e.message);
    }
  },

  async click(params, ctx) {
    const tab = await useTab(ctx, params);
    const p = await point(tab.id, params);
    const button = ['left', 'right', 'middle'].includes(params.button) ? params.button : 'left';
    const clickCount =
      Number.isInteger(params.clickCount) && params.clickCount > 0 && params.clickCount <= 3 ? params.clickCount : 1;
    await cdp.mouseClick(tab.id, p.x, p.y, { button, clickCount });
    return { clicked: true, tabId: tab.id, x: p.x, y: p.y, element: p.element };
  },

  async type(params, ctx) {
    if (typeof params.text !== 'string') throw bad('type needs text');
    const tab = await useTab(ctx, params);
    let element = null;
    if (params.ref || params.selector || (typeof params.x === 'number' && typeof params.y === 'number')) {
      const p = await point(tab.id, params);
      await cdp.mouseClick(tab.id, p.x, p.y, { clickCount: params.clear ? 3 : 1 });
      element = p.element;
      if (params.clear) await cdp.pressKeys(tab.id, 'ctrl+a Delete');
    }
    await cdp.typeText(tab.id, params.text);
    if (params.submit) await cdp.pressKeys(tab.id, 'Enter');
    return { typed: params.text.length, tabId: tab.id, element, submitted: !!params.submit };
  },

  async hover(params, ctx) {
    const tab = await useTab(ctx, params);
    const p = await point(tab.id, params);
    await cdp.mouseMove(tab.id, p.x, p.y);
    return { hovered: true, tabId: tab.id, x: p.x, y: p.y, element: p.element };
  },

  async screenshot(params, ctx) {
    const tab = await useTab(ctx, params);
    const format = ['png', 'jpeg', 'webp'].includes(params.format) ? params.format : 'png';
    const shot = await captureTab(tab.id, {
      format,
      quality: Number.isInteger(params.quality) ? params.quality : undefined,
      maxEdge: Number.isInteger(params.maxEdge) ? params.maxEdge : params.fullResolution ? 0 : DEFAULT_MAX_EDGE,
      budget: Number.isInteger(params.maxBytes) ? params.maxBytes : params.fullResolution ? 0 : DEFAULT_BUDGET,
      fullPage: !!params.fullPage,
    }).catch((e) => {
      throw new RelayError(e.message);
    });
    return {
      tabId: tab.id,
      data: shot.data,
      mimeType: shot.mimeType,
      width: shot.width,
      height: shot.height,
      scale: shot.scale,
    };
  },
};

export default extraMethods;
