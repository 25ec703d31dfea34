// A small in-memory fake of the chrome.* APIs the extension's core touches,
// for `node --test extension/test/`. It stands for one browser profile with
// one normal window: chrome.runtime (connectNative with a port the test
// drives, lastError during onDisconnect, id, getManifest), chrome.storage
// (local and session), chrome.tabs and chrome.tabGroups (tabs, groups,
// history, load events), chrome.windows, chrome.alarms (with scheduledTime), chrome.identity (the
// test answers launchWebAuthFlow through fake.onAuthFlow) and a stub of
// chrome.scripting, chrome.notifications, chrome.action's badge, chrome.commands, and chrome.webNavigation (fake.failUrls makes a load fail). It models what the core relies on, not every detail of
// Chrome: loads finish after a macrotask, a group disappears with its last
// tab, and errors carry Chrome's wording where the code looks at it.

/** An event like chrome.events.Event, with dispatch() for tests. */
export class FakeEvent {
  constructor() {
    this.listeners = [];
  }
  addListener(fn) {
    this.listeners.push(fn);
  }
  removeListener(fn) {
    this.listeners = this.listeners.filter((l) => l !== fn);
  }
  hasListener(fn) {
    return this.listeners.includes(fn);
  }
  dispatch(...args) {
    return [...this.listeners].map((l) => l(...args));
  }
}

/** The native port connectNative returns; the test plays the host. */
export class FakePort {
  constructor(fake, name) {
    this.fake = fake;
    this.name = name;
    this.onMessage = new FakeEvent();
    this.onDisconnect = new FakeEvent();
    this.sent = []; // messages the extension posted
    this.closed = false;
  }
  postMessage(msg) {
    if (this.closed) throw new Error('Attempting to use a disconnected port object');
    this.sent.push(JSON.parse(JSON.stringify(msg)));
  }
  disconnect() {
    this.closed = true;
  }
  /** The host sends a message to the extension. */
  hostSends(msg) {
    this.onMessage.dispatch(JSON.parse(JSON.stringify(msg)));
  }
  /** The port closes from the host's side, with lastError set as Chrome does. */
  hostCloses(error = 'Native host has exited.') {
    this.closed = true;
    this.fake.runtime.lastError = { message: error };
    try {
      this.onDisconnect.dispatch(this);
    } finally {
      this.fake.runtime.lastError = undefined;
    }
  }
}

function storageArea(onChanged, areaName) {
  let data = {};
  const copy = (v) => (v === undefined ? v : structuredClone(v));
  return {
    async get(keys) {
      if (keys === null || keys === undefined) return copy(data);
      const list = typeof keys === 'string' ? [keys] : Array.isArray(keys) ? keys : Object.keys(keys);
      const out = {};
      for (const k of list) {
        if (k in data) out[k] = copy(data[k]);
        else if (keys && typeof keys === 'object' && !Array.isArray(keys)) out[k] = keys[k];
      }
      return out;
    },
    async set(items) {
      const changes = {};
      for (const [k, v] of Object.entries(items)) {
        changes[k] = { oldValue: data[k], newValue: copy(v) };
        data[k] = copy(v);
      }
      onChanged.dispatch(changes, areaName);
    },
    async remove(keys) {
      const changes = {};
      for (const k of [].concat(keys)) {
        if (!(k in data)) continue;
        changes[k] = { oldValue: data[k] };
        delete data[k];
      }
      if (Object.keys(changes).length) onChanged.dispatch(changes, areaName);
    },
    async clear() {
      data = {};
    },
    _dump: () => copy(data),
  };
}

/**
 * Creates a fake chrome and installs it as globalThis.chrome.
 * @returns {object} the fake, with helpers: ports, tabsById, groupsById, lastPort()
 */
export function installFakeChrome() {
  const fake = {};
  const ports = [];
  let nextTab = 1;
  let nextGroup = 100;
  let nextWindow = 10;
  const tabs = new Map();
  const groups = new Map();
  const windows = new Map();
  const alarms = new Map();

  const onChanged = new FakeEvent();
  const tabsEvents = {
    onRemoved: new FakeEvent(),
    onUpdated: new FakeEvent(),
    onCreated: new FakeEvent(),
    onActivated: new FakeEvent(),
  };
  const groupEvents = { onRemoved: new FakeEvent(), onUpdated: new FakeEvent() };
  const navEvents = {
    onBeforeNavigate: new FakeEvent(),
    onCreatedNavigationTarget: new FakeEvent(),
    onErrorOccurred: new FakeEvent(),
    onCommitted: new FakeEvent(),
    onCompleted: new FakeEvent(),
  };

  const noTab = (id) => new Error(`No tab with id: ${id}.`);
  const tabCopy = (t) => {
    const { history, historyIndex, loadToken, ...rest } = t;
    return structuredClone(rest);
  };

  function addWindow() {
    const w = { id: nextWindow++, focused: windows.size === 0, type: 'normal' };
    windows.set(w.id, w);
    return w;
  }
  addWindow();

  function dropEmptyGroups() {
    for (const g of [...groups.values()]) {
      if (![...tabs.values()].some((t) => t.groupId === g.id)) {
        groups.delete(g.id);
        groupEvents.onRemoved.dispatch(structuredClone(g));
      }
    }
  }

  // A load of a URL in fake.failUrls (url -> "net::ERR_…") fails as in
  // Chrome: webNavigation.onErrorOccurred, no onCommitted, and the tab on
  // an error page (getFrame's errorOccurred) that still completes loading.
  // A load that commits ends with webNavigation.onCompleted (the page's load
  // event), then the tab's status "complete" (the whole tab stopped loading),
  // which fake.withholdComplete holds back for good (Chrome tells it after
  // onCompleted, up to tens of ms later on a busy machine).
  function load(tab, url) {
    tab.url = url;
    tab.status = 'loading';
    const token = (tab.loadToken = (tab.loadToken || 0) + 1); // a new load supersedes the last
    tabsEvents.onUpdated.dispatch(tab.id, { status: 'loading', url }, tabCopy(tab));
    navEvents.onBeforeNavigate.dispatch({ tabId: tab.id, frameId: 0, url });
    setTimeout(() => {
      if (!tabs.has(tab.id) || tab.loadToken !== token) return;
      const error = fake.failUrls.get(url);
      tab.errorPage = !!error;
      const documentId = `doc-${tab.id}-${token}`;
      if (error) navEvents.onErrorOccurred.dispatch({ tabId: tab.id, frameId: 0, url, error });
      else navEvents.onCommitted.dispatch({ tabId: tab.id, frameId: 0, url, documentId });
      fake.afterCommit?.(tab.id, url); // the page's scripts, as it loads (they may send the tab on)
      tab.title = url === 'about:blank' ? '' : `Title of ${url}`;
      if (!error) navEvents.onCompleted.dispatch({ tabId: tab.id, frameId: 0, url, documentId });
      if (fake.withholdComplete) return;
      tab.status = 'complete';
      tabsEvents.onUpdated.dispatch(tab.id, { status: 'complete' }, tabCopy(tab));
    }, 5);
  }

  function createTab({ url = 'about:blank', windowId, active = true } = {}) {
    const win = windowId !== undefined ? windows.get(windowId) : [...windows.values()].find((w) => w.focused);
    if (!win) throw new Error('No current window');
    if (active) for (const t of tabs.values()) if (t.windowId === win.id) t.active = false;
    const tab = {
      id: nextTab++,
      windowId: win.id,
      index: [...tabs.values()].filter((t) => t.windowId === win.id).length,
      url: '',
      title: '',
      active,
      status: 'loading',
      groupId: -1,
      history: [url],
      historyIndex: 0,
    };
    tabs.set(tab.id, tab);
    tabsEvents.onCreated.dispatch(tabCopy(tab));
    load(tab, url);
    return tab;
  }

  fake.runtime = {
    id: 'amcokjncpgajgpgekekceeedjfediofp',
    lastError: undefined,
    getManifest: () => ({ name: 'Browser Bridge', version: '0.1.0', manifest_version: 3 }),
    connectNative(name) {
      if (fake.connectNativeThrows) throw new Error(fake.connectNativeThrows);
      const p = new FakePort(fake, name);
      ports.push(p);
      return p;
    },
    onStartup: new FakeEvent(),
    onInstalled: new FakeEvent(),
    onMessage: new FakeEvent(),
    sendMessage: async () => undefined,
    getURL: (path = '') => `chrome-extension://${fake.runtime.id}/${String(path).replace(/^\//, '')}`,
  };
  // managed stands for the organization's policy, which Chrome fills (read-only to the extension); tests set it.
  fake.storage = {
    local: storageArea(onChanged, 'local'),
    session: storageArea(onChanged, 'session'),
    managed: storageArea(onChanged, 'managed'),
    onChanged,
  };
  // alarmsByName keeps each alarm's create() info as given; get() and
  // getAll() answer Chrome's Alarm shape, with the scheduledTime that
  // create() set (creating an alarm again reschedules it, as in Chrome).
  // fake.alarmCreates counts create() calls.
  const scheduled = new Map();
  fake.alarmCreates = 0;
  fake.alarms = {
    async create(name, info) {
      fake.alarmCreates++;
      alarms.set(name, info);
      const delayMin = info.delayInMinutes ?? info.periodInMinutes ?? 0;
      scheduled.set(name, info.when ?? Date.now() + delayMin * 60_000);
    },
    async clear(name) {
      scheduled.delete(name);
      return alarms.delete(name);
    },
    async get(name) {
      return alarms.has(name) ? { name, ...alarms.get(name), scheduledTime: scheduled.get(name) } : undefined;
    },
    async getAll() {
      return [...alarms].map(([name, info]) => ({ name, ...info, scheduledTime: scheduled.get(name) }));
    },
    onAlarm: new FakeEvent(),
  };
  // launchWebAuthFlow calls are recorded in fake.authFlows; the test answers
  // them by setting fake.onAuthFlow = ({url, interactive}) => redirectedUrl
  // (or throwing). Without it the flow fails as when the user closes the window.
  fake.authFlows = [];
  fake.onAuthFlow = null;
  fake.identity = {
    getRedirectURL: (path = '') => `https://${fake.runtime.id}.chromiumapp.org/${String(path).replace(/^\//, '')}`,
    async launchWebAuthFlow({ url, interactive = false } = {}) {
      fake.authFlows.push({ url, interactive });
      if (fake.onAuthFlow) return fake.onAuthFlow({ url, interactive });
      throw new Error('The user did not approve access.');
    },
  };
  fake.windows = {
    async getLastFocused() {
      const w = [...windows.values()].find((x) => x.focused);
      if (!w) throw new Error('No last-focused window');
      return { ...w };
    },
    async create({ url = 'about:blank', focused = false } = {}) {
      const w = addWindow();
      w.focused = focused || w.focused;
      const tab = createTab({ url, windowId: w.id, active: true });
      return { ...w, tabs: [tabCopy(tab)] };
    },
  };
  fake.tabs = {
    ...tabsEvents,
    async create(props) {
      return tabCopy(createTab(props));
    },
    async get(id) {
      if (!tabs.has(id)) throw noTab(id);
      return tabCopy(tabs.get(id));
    },
    async query(q = {}) {
      return [...tabs.values()]
        .filter((t) => Object.entries(q).every(([k, v]) => k === 'windowTypes' || t[k] === v))
        .map(tabCopy);
    },
    async update(id, { url, active } = {}) {
      const t = tabs.get(id);
      if (!t) throw noTab(id);
      if (active) for (const o of tabs.values()) if (o.windowId === t.windowId) o.active = o.id === id;
      if (url !== undefined) {
        t.history = t.history.slice(0, t.historyIndex + 1).concat(url);
        t.historyIndex++;
        load(t, url);
      }
      return tabCopy(t);
    },
    async goBack(id) {
      const t = tabs.get(id);
      if (!t) throw noTab(id);
      if (t.historyIndex === 0) throw new Error('Cannot find a next page in history.');
      load(t, t.history[--t.historyIndex]);
    },
    async goForward(id) {
      const t = tabs.get(id);
      if (!t) throw noTab(id);
      if (t.historyIndex >= t.history.length - 1) throw new Error('Cannot find a next page in history.');
      load(t, t.history[++t.historyIndex]);
    },
    async reload(id) {
      const t = tabs.get(id);
      if (!t) throw noTab(id);
      load(t, t.url);
    },
    async remove(ids) {
      for (const id of [].concat(ids)) {
        if (!tabs.has(id)) throw noTab(id);
        const t = tabs.get(id);
        tabs.delete(id);
        tabsEvents.onRemoved.dispatch(id, { windowId: t.windowId, isWindowClosing: false });
      }
      dropEmptyGroups();
    },
    async group({ tabIds, groupId, createProperties } = {}) {
      const ids = [].concat(tabIds);
      let g;
      if (groupId !== undefined) {
        g = groups.get(groupId);
        if (!g) throw new Error(`No group with id: ${groupId}.`);
      } else {
        const windowId = createProperties?.windowId ?? tabs.get(ids[0])?.windowId;
        g = { id: nextGroup++, windowId, title: '', color: 'grey', collapsed: false };
        groups.set(g.id, g);
      }
      for (const id of ids) {
        const t = tabs.get(id);
        if (!t) throw noTab(id);
        t.groupId = g.id;
        t.windowId = g.windowId;
      }
      dropEmptyGroups();
      return g.id;
    },
    async ungroup(ids) {
      for (const id of [].concat(ids)) {
        const t = tabs.get(id);
        if (!t) throw noTab(id);
        t.groupId = -1;
      }
      dropEmptyGroups();
    },
  };
  fake.failUrls = new Map();
  fake.withholdComplete = false;
  fake.webNavigation = {
    ...navEvents,
    async getFrame({ tabId, frameId }) {
      const t = tabs.get(tabId);
      if (!t || frameId !== 0) return null;
      return { errorOccurred: !!t.errorPage, url: t.url, parentFrameId: -1, frameType: 'outermost_frame' };
    },
  };
  fake.tabGroups = {
    ...groupEvents,
    TAB_GROUP_ID_NONE: -1,
    async get(id) {
      if (!groups.has(id)) throw new Error(`No group with id: ${id}.`);
      return structuredClone(groups.get(id));
    },
    async query(q = {}) {
      return [...groups.values()]
        .filter((g) => Object.entries(q).every(([k, v]) => g[k] === v))
        .map((g) => structuredClone(g));
    },
    async update(id, props) {
      const g = groups.get(id);
      if (!g) throw new Error(`No group with id: ${id}.`);
      Object.assign(g, props);
      groupEvents.onUpdated.dispatch(structuredClone(g));
      return structuredClone(g);
    },
  };
  fake.scripting = {
    async executeScript() {
      return [{ frameId: 0, result: undefined }];
    },
  };
  // chrome.notifications: fake.notificationsById holds the live ones as
  // created; the test clicks their buttons or closes them through the events.
  const notifications = new Map();
  fake.notifications = {
    async create(id, options) {
      notifications.set(id, structuredClone(options));
      return id;
    },
    async clear(id) {
      return notifications.delete(id);
    },
    async getAll() {
      return Object.fromEntries([...notifications.keys()].map((id) => [id, true]));
    },
    onButtonClicked: new FakeEvent(),
    onClosed: new FakeEvent(),
  };
  // chrome.action: the badge and title as last set.
  fake.badge = { text: '', color: null, title: '' };
  fake.action = {
    async setBadgeText({ text }) {
      fake.badge.text = text;
    },
    async setBadgeBackgroundColor({ color }) {
      fake.badge.color = color;
    },
    async setTitle({ title }) {
      fake.badge.title = title;
    },
  };
  fake.commands = { onCommand: new FakeEvent() };

  Object.assign(fake, {
    ports,
    tabsById: tabs,
    groupsById: groups,
    windowsById: windows,
    alarmsByName: alarms,
    notificationsById: notifications,
    lastPort: () => ports[ports.length - 1],
    /** Opens a plain user tab (not in any group). */
    userTab: (url = 'https://user.example/') => tabCopy(createTab({ url })),
    addWindow,
  });
  globalThis.chrome = fake;
  return fake;
}
