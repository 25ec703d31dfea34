// The popup: the state of the native host and the bridge, connected clients
// with their tab groups, plans and activity, recent tool calls, and a button
// per client to disconnect it. Everything shown comes from chrome.storage
// (the service worker writes it), so the popup works while the worker sleeps;
// it redraws on every storage change.

import { SESSION } from './sw/store.js';
import { liveSessions } from './sw/sessions.js';

// Tab group colours as Chrome draws them (approximately).
const GROUP_COLOURS = {
  grey: '#5f6368', blue: '#1a73e8', red: '#d93025', yellow: '#f9ab00', green: '#188038',
  pink: '#d01884', purple: '#a142f4', cyan: '#007b83', orange: '#fa903e',
};

const $ = (id) => document.getElementById(id);

function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  Object.assign(e, props);
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

function ago(t) {
  if (!t) return '';
  const s = Math.round((Date.now() - t) / 1000);
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.round(s / 60)}m ago`;
  return new Date(t).toLocaleTimeString();
}

// fixFor turns Chrome's native-messaging errors into the step that fixes them.
function fixFor(error) {
  if (/not found/i.test(error)) {
    return 'The native host is not registered for this browser or profile: run ./scripts/install.sh, or `browserbridge install --browser <name>`, then `browserbridge doctor`.';
  }
  if (/forbidden/i.test(error)) {
    return "The host's manifest does not allow this extension's id: run `browserbridge install` again (it writes this extension's id).";
  }
  if (/exited|failed to start/i.test(error)) {
    return 'The host started but stopped: run `browserbridge doctor`; the bridge log says why.';
  }
  return '';
}

function renderConnection({ native, hostState, bridge }) {
  const rows = [];
  const row = (label, text, cls = '') => rows.push(el('dt', { textContent: label }), el('dd', { textContent: text, className: cls }));

  if (!native) row('Native host', 'not started yet', 'warn');
  else if (native.port === 'disconnected') {
    row('Native host', `not connected; retrying in ${Math.round((native.retryInMs || 0) / 1000)}s (attempt ${native.attempt})`, 'bad');
  } else row('Native host', native.port === 'open' ? 'running' : 'starting…', native.port === 'open' ? 'ok' : 'warn');
  if (native?.lastError) row('Last error', `${native.lastError} (${ago(native.lastErrorAt)})`, native.port === 'open' ? 'muted' : 'bad');
  if (native?.port !== 'open' && native?.lastError) {
    const fix = fixFor(native.lastError);
    if (fix) row('Fix', fix, 'warn');
  }

  if (hostState && native?.port === 'open') {
    const labels = { connecting: 'looking for the bridge…', starting_bridge: 'starting the bridge…', connected: 'connected', disconnected: 'unreachable' };
    row('Bridge', labels[hostState.state] || hostState.state, hostState.state === 'connected' ? 'ok' : hostState.state === 'disconnected' ? 'bad' : 'warn');
    if (hostState.error && hostState.state !== 'connected') row('Why', hostState.error, 'bad');
    if (hostState.socket) row('Socket', hostState.socket, 'muted');
  }
  if (bridge?.state === 'ready') {
    row('Registered', `as ${bridge.browserId}${bridge.bridgeVersion ? `, bridge ${bridge.bridgeVersion}` : ''}`, 'ok');
    if (bridge.mcpUrl) row('MCP URL', bridge.mcpUrl);
  } else if (bridge?.state === 'error') row('hello', bridge.error, 'bad');

  $('connection').replaceChildren(...rows);
  $('reconnect').hidden = native?.port !== 'disconnected';
}

async function renderClients(sessions, bridge) {
  const list = liveSessions(sessions, bridge);
  $('no-clients').hidden = list.length > 0;
  const items = await Promise.all(list.map(async (s) => {
    let tabs = [];
    if (s.groupId !== null && s.groupId !== undefined) tabs = await chrome.tabs.query({ groupId: s.groupId }).catch(() => []);
    const li = el('li', { className: 'client' });
    li.style.borderLeftColor = GROUP_COLOURS[s.color] || GROUP_COLOURS.grey;
    const top = el('div', { className: 'top' }, el('span', { className: 'name', textContent: s.client || s.id }));
    if (s.id.startsWith('local-')) {
      const btn = el('button', { type: 'button', textContent: 'Disconnect', title: 'End this MCP session; its tabs are closed or ungrouped as set in Settings.' });
      btn.addEventListener('click', () => disconnect(s.id, btn));
      top.append(btn);
    }
    li.append(top);
    const activity = s.activity?.state ? ` · ${s.activity.state}` : '';
    li.append(el('div', { className: 'detail', textContent: `${tabs.length} tab${tabs.length === 1 ? '' : 's'} · active ${ago(s.lastActive)}${activity}` }));
    for (const t of tabs.slice(0, 5)) li.append(el('div', { className: 'detail', textContent: `• ${t.title || t.url}` }));
    if (s.plan) li.append(el('pre', { textContent: typeof s.plan === 'string' ? s.plan : JSON.stringify(s.plan, null, 1) }));
    return li;
  }));
  $('clients').replaceChildren(...items);
}

function renderCalls(calls) {
  const list = calls || [];
  $('no-calls').hidden = list.length > 0;
  $('calls').hidden = list.length === 0;
  $('calls').tBodies[0].replaceChildren(...list.slice(0, 20).map((c) => el('tr', { title: c.error || '' },
    el('td', { textContent: ago(c.at) }),
    el('td', { textContent: c.client || c.session }),
    el('td', { textContent: c.tool }),
    el('td', { className: 'num', textContent: String(c.ms) }),
    el('td', { textContent: c.ok ? '✓' : '✗', className: c.ok ? 'ok' : 'bad' }))));
}

async function disconnect(sessionId, btn) {
  btn.disabled = true;
  btn.textContent = 'Disconnecting…';
  const res = await chrome.runtime.sendMessage({ type: 'session.close', session: sessionId }).catch((err) => ({ ok: false, error: err.message }));
  if (!res?.ok) {
    btn.disabled = false;
    btn.textContent = 'Disconnect';
    btn.title = `Failed: ${res?.error || 'no answer from the service worker'}`;
    btn.classList.add('bad');
  }
}

async function render() {
  const s = await chrome.storage.session.get(Object.values(SESSION));
  renderConnection(s);
  renderCalls(s[SESSION.recentCalls]);
  await renderClients(s[SESSION.sessions], s[SESSION.bridge]);
}

$('reconnect').addEventListener('click', () => chrome.runtime.sendMessage({ type: 'reconnect' }).catch(() => {}));
// Opening the popup wakes a stopped worker, which reconnects at once instead
// of at its next alarm; what is shown then updates through storage.
chrome.runtime.sendMessage({ type: 'reconnect' }).catch(() => {});
chrome.storage.onChanged.addListener((changes, area) => {
  if (area === 'session') render();
});
setInterval(render, 5000); // keeps the "ago" times fresh
render();
