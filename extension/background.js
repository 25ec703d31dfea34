// Browser Bridge's service worker: wires the native port, the JSON-RPC
// dispatcher, the tools and the tab groups together, and registers every
// chrome.* listener synchronously at top level (a restarted worker must get
// the event that woke it).
//
// All imports are static: a module service worker may not call import().
// Modules of the page tools register their own chrome.debugger listeners at
// top level when imported here.

import * as native from './sw/native.js';
import * as rpc from './sw/rpc.js';
import * as tools from './sw/tools.js';
import * as sessions from './sw/sessions.js';
import * as hello from './sw/hello.js';
import * as store from './sw/store.js';
import coreTools from './tools/core.js';
import * as pageTools from './tools/page.js';
import * as relay from './sw/relay-methods.js';
import { readScreenshotResource } from './sw/screenshot.js';
import * as remote from './sw/remote.js';
import { RemoteServer } from './remote/client.js';
import * as gate from './sw/gate.js';
import * as approvals from './sw/approvals.js';
import * as audit from './sw/audit.js';
import './sw/preload.js'; // injects the page agent into agents' tabs as documents commit
import './sw/steadyview.js'; // holds agents' pages at their size while the debugger's bar moves

tools.register(coreTools, pageTools);
// The relay's direct methods cross the person's policy as tools do (sw/gate.js).
rpc.setExtraMethods(gate.guardRelay(relay.extraMethods ?? relay.default, rpc.RpcError));

rpc.setTransport({ send: native.send, linkUp: native.linkUp });
// Each audit entry also goes to the bridge, which logs the decision (docs/protocol.md, audit.decision).
audit.configure({ notify: (entry) => rpc.notify('audit.decision', entry) });
rpc.register('ping', () => ({}));
rpc.register('tools/list', () => tools.list());
rpc.register('tools/call', (params, ctx) => tools.call(params, ctx));
// Remote MCP servers signed in through this browser (sw/remote.js).
remote.init({ RemoteServer });
rpc.register('remote.list', () => remote.list());
rpc.register('remote.call', (params, ctx) => remote.call(params, ctx));
// Full-resolution screenshots offered as resource links
// (browserbridge://screenshots/<id>); kept in memory, the most recent first.
rpc.register('resources/read', (params) => {
  const res = readScreenshotResource(params?.uri);
  if (!res) {
    throw new rpc.RpcError(
      -32002,
      `resource ${params?.uri} is not here: screenshots are kept in memory, the latest 30, until the browser's service worker restarts; take it again`,
    );
  }
  return res;
});

native.init({
  onMessage: (msg) => {
    rpc.receive(msg).catch((err) => console.error(`rpc: ${err.message}`));
  },
  onConnected: () => {
    hello.sayHello();
  },
  onLinkDown: (reason) => {
    rpc.failPending(reason);
    store
      .set('session', store.SESSION.bridge, { state: 'disconnected', error: reason, at: Date.now() })
      .catch(() => {});
  },
});

// Wake-ups. Any event Chrome delivers starts a stopped worker, and the
// top-level connect() at the end of this file then reconnects; the listeners
// below connect too, for a worker that is running with its port closed. The
// standing alarm (sw/native.js) is the one that needs nobody: every 30 s.
// Browser start and install/update are certain moments to connect, and a
// tab switched to is the user back at the browser, the moment a bridge that
// was away should return rather than at the next alarm.
chrome.runtime.onStartup.addListener(() => native.connect());
chrome.runtime.onInstalled.addListener(() => native.connect());
chrome.tabs.onActivated.addListener(() => native.connect());
chrome.alarms.onAlarm.addListener((alarm) => {
  if (native.onAlarm(alarm)) return;
  remote.onAlarm(alarm); // token refresh alarms of remote servers; ignores the others
});
chrome.tabs.onRemoved.addListener((tabId) => {
  sessions.onTabRemoved(tabId).catch((err) => console.warn(`tabs.onRemoved: ${err.message}`));
});
chrome.tabGroups.onRemoved.addListener((group) => {
  sessions.onGroupRemoved(group).catch((err) => console.warn(`tabGroups.onRemoved: ${err.message}`));
});
// The person's control (sw/gate.js, sw/approvals.js): the cached policy
// follows storage, the notification's buttons answer a waiting call (closing
// it denies), and the keyboard shortcut pauses or resumes every agent.
chrome.storage.onChanged.addListener((changes, area) => {
  gate.onStorageChanged(changes, area);
  // The organization's policy changed (sw/managed.js): its pause ends waiting calls, the badge follows.
  if (area === 'managed') approvals.onManagedChanged().catch((err) => console.warn(`managed policy: ${err.message}`));
});
chrome.notifications.onButtonClicked.addListener((id, button) => approvals.onNotificationButton(id, button));
chrome.notifications.onClosed.addListener((id, byUser) => approvals.onNotificationClosed(id, byUser));
chrome.commands.onCommand.addListener((command) => {
  if (command === 'pause-agents') approvals.togglePause().catch((err) => console.warn(`pause: ${err.message}`));
});
chrome.runtime.onMessage.addListener((msg, sender, sendResponse) => {
  // Only our own pages (popup, options, apps): an extension page open in a tab
  // has sender.tab too, so the URL tells them from content scripts.
  if (sender.id !== chrome.runtime.id || !sender.url?.startsWith(chrome.runtime.getURL(''))) return false;
  pageMessage(msg).then(sendResponse, (err) => sendResponse({ ok: false, error: err.message }));
  return true; // answers asynchronously
});

/**
 * Requests from the popup and options pages.
 * @param {{type: string, session?: string}} msg
 */
async function pageMessage(msg) {
  switch (msg?.type) {
    case 'session.close': {
      // The bridge ends the MCP session and then sends session.ended, which closes or ungroups the tabs.
      const result = await rpc.request('session.close', { session: msg.session });
      return { ok: true, result };
    }
    case 'relay.status':
      // The popup shows the bridge's cloud relay; no bridge, nothing to show.
      if (!native.linkUp()) return { ok: true, result: null };
      return { ok: true, result: await rpc.request('relay.status', {}, { timeoutMs: 5000 }) };
    case 'approval.answer':
      return { ok: true, result: await approvals.answer(msg.id, msg.answer) };
    case 'agents.pause':
      await approvals.pause();
      return { ok: true };
    case 'agents.resume':
      await approvals.resume();
      return { ok: true };
    case 'reconnect':
      native.connect();
      return { ok: true };
    case 'settingsChanged':
      // The profile label is part of hello: say it again if the bridge is there.
      if (native.linkUp()) await hello.sayHello();
      return { ok: true };
    case 'remote.status':
    case 'remote.setEnabled':
    case 'remote.signIn':
    case 'remote.signOut':
    case 'remote.reconnect':
    case 'remote.setToolEnabled':
    case 'remote.addServer':
    case 'remote.removeServer':
    case 'remote.setDeveloperMode':
    case 'remote.openApp':
    case 'remote.appCall':
      return { ok: true, result: await remote.pageMessage(msg) };
    default:
      throw new Error(`unknown request ${JSON.stringify(msg?.type)}`);
  }
}

// Waiting calls of a worker that stopped died with its port: drop their records.
approvals.clearStale().catch((err) => console.error(`approvals: ${err.message}`));
native.ensureWakeAlarm().catch((err) => console.error(`the wake alarm: ${err.message}`));
native.connect();
