// The options page: settings in chrome.storage.local (sw/store.js,
// DEFAULT_SETTINGS). After saving, it asks the service worker to say hello
// again so a new profile label reaches the bridge.
//
// "Remote MCP servers" (sw/remote.js): the list comes from the worker
// (remote.status) and is drawn again whenever the worker stores a change
// (the server list in storage.local, states in storage.session). Every change
// is a message to the worker; Sign in is sent from the click itself, so the
// worker's chrome.identity window follows the user's gesture.

import { LOCAL, getSettings } from './sw/store.js';
import { CONFIG_KEY, STATES_KEY } from './sw/remote.js';
import { offHint } from './options-remote.js';

const form = document.getElementById('form');

async function load() {
  const s = await getSettings();
  form.elements.onSessionEnd.value = s.onSessionEnd;
  form.elements.profileLabel.value = s.profileLabel;
}

form.addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const current = await getSettings();
  const next = {
    ...current,
    onSessionEnd: form.elements.onSessionEnd.value === 'close' ? 'close' : 'ungroup',
    profileLabel: form.elements.profileLabel.value.trim().slice(0, 64),
  };
  await chrome.storage.local.set({ [LOCAL.settings]: next });
  chrome.runtime.sendMessage({ type: 'settingsChanged' }).catch(() => {});
  const saved = document.getElementById('saved');
  saved.hidden = false;
  setTimeout(() => {
    saved.hidden = true;
  }, 2000);
});

load();

// ---------------------------------------------------------------------------
// Remote MCP servers

const STATE_LABELS = {
  disabled: 'off',
  disconnected: 'not connected',
  'needs-auth': 'sign-in needed',
  registering: 'registering with the server…',
  authorizing: 'waiting for you to sign in…',
  authenticated: 'signed in',
  connecting: 'connecting…',
  connected: 'connected',
  error: 'error',
  'token-refresh': 'renewing the sign-in…',
  'invalid-token': 'sign-in expired',
};
const STATE_CLASS = { connected: 'ok', error: 'bad', 'needs-auth': 'warn', 'invalid-token': 'warn', disabled: 'muted' };
const SIGN_IN_WHEN = new Set(['needs-auth', 'invalid-token', 'error', 'disconnected']);
const SIGN_OUT_WHEN = new Set(['connected', 'authenticated', 'token-refresh', 'invalid-token', 'error']);

const $ = (id) => document.getElementById(id);

function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'dataset') Object.assign(e.dataset, v);
    else if (k.startsWith('aria') || k === 'for' || k === 'role') {
      e.setAttribute(k === 'ariaLabel' ? 'aria-label' : k, v);
    } else e[k] = v;
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) e.append(c);
  return e;
}

async function ask(msg) {
  const res = await chrome.runtime.sendMessage(msg);
  if (!res?.ok) throw new Error(res?.error || 'the service worker did not answer');
  return res.result;
}

function showError(err) {
  const box = $('remote-error');
  box.textContent = err ? err.message || String(err) : '';
  box.hidden = !err;
}

/** Runs a request from a control, with the control disabled meanwhile. */
async function act(control, msg) {
  control.disabled = true;
  showError(null);
  try {
    await ask(msg);
  } catch (err) {
    showError(err);
  } finally {
    control.disabled = false;
    scheduleRender();
  }
}

const pending = new Set(); // ids of servers with a sign-in in progress

function renderServer(s) {
  const key = (what) => `${s.id}:${what}`;
  const state = pending.has(s.id) && s.state !== 'connected' ? 'authorizing' : s.state;
  const enabled = el('input', {
    type: 'checkbox',
    id: `en-${s.id}`,
    checked: s.enabled,
    ariaLabel: `Use ${s.title}`,
    dataset: { focus: key('enabled') },
  });
  enabled.addEventListener('change', () =>
    act(enabled, { type: 'remote.setEnabled', id: s.id, enabled: enabled.checked }),
  );

  const actions = el('span', { className: 'actions' });
  if (s.enabled && SIGN_IN_WHEN.has(state)) {
    const b = el('button', {
      type: 'button',
      textContent: 'Sign in',
      ariaLabel: `Sign in to ${s.title}`,
      dataset: { focus: key('signin') },
    });
    b.addEventListener('click', () => {
      pending.add(s.id);
      scheduleRender();
      act(b, { type: 'remote.signIn', id: s.id }).finally(() => {
        pending.delete(s.id);
        scheduleRender();
      });
    });
    actions.append(b);
  }
  if (s.enabled && ['error', 'disconnected'].includes(state)) {
    const b = el('button', {
      type: 'button',
      textContent: 'Retry',
      ariaLabel: `Connect to ${s.title} again`,
      dataset: { focus: key('retry') },
    });
    b.addEventListener('click', () => act(b, { type: 'remote.reconnect', id: s.id }));
    actions.append(b);
  }
  if (s.enabled && SIGN_OUT_WHEN.has(state)) {
    const b = el('button', {
      type: 'button',
      textContent: 'Sign out',
      ariaLabel: `Sign out of ${s.title}`,
      dataset: { focus: key('signout') },
    });
    b.addEventListener('click', () => act(b, { type: 'remote.signOut', id: s.id }));
    actions.append(b);
  }
  if (!s.builtin) {
    const b = el('button', {
      type: 'button',
      textContent: 'Remove',
      ariaLabel: `Remove ${s.title}`,
      dataset: { focus: key('remove') },
    });
    b.addEventListener('click', () => {
      if (confirm(`Remove ${s.title} (${s.url}) and forget its sign-in?`)) {
        act(b, { type: 'remote.removeServer', id: s.id });
      }
    });
    actions.append(b);
  }

  const stateText = `${STATE_LABELS[state] || state}${s.message && s.enabled ? `: ${s.message}` : ''}`;
  const extra = [];
  if (s.headerNames.length) extra.push(`headers: ${s.headerNames.join(', ')}`);
  if (s.scopes.length) extra.push(`scopes: ${s.scopes.join(' ')}`);

  let tools = null;
  if (s.enabled && s.tools.length) {
    const on = s.tools.filter((t) => t.enabled).length;
    const list = el('ul');
    for (const t of s.tools) {
      const id = `tool-${s.id}-${t.name}`;
      const box = el('input', { type: 'checkbox', id, checked: t.enabled, dataset: { focus: key(`tool:${t.name}`) } });
      box.addEventListener('change', () =>
        act(box, { type: 'remote.setToolEnabled', id: s.id, tool: t.name, enabled: box.checked }),
      );
      const app = t.app
        ? el('a', {
            href: `apps.html?${new URLSearchParams({ server: s.name, uri: t.app })}`,
            target: '_blank',
            textContent: 'Open app',
            ariaLabel: `Open the app of ${t.name}`,
          })
        : null;
      list.append(
        el(
          'li',
          {},
          box,
          ' ',
          el('label', { className: 'inline', for: id, textContent: t.title ? `${t.title} (${t.name})` : t.name }),
          app ? ' ' : null,
          app,
          t.description ? el('p', { className: 'hint', textContent: t.description }) : null,
        ),
      );
    }
    tools = el('details', {}, el('summary', { textContent: `Tools: ${on} of ${s.tools.length} on` }), list);
    if (openDetails.has(s.id)) tools.open = true;
    tools.addEventListener('toggle', () => (tools.open ? openDetails.add(s.id) : openDetails.delete(s.id)));
  } else if (s.enabled && state === 'connected') {
    tools = el('p', { className: 'hint', textContent: 'This server offers no tools.' });
  }

  // One line: the switch and the name, the actions; then the URL and the state.
  return el(
    'li',
    { className: 'remote', dataset: { state } },
    el(
      'div',
      { className: 'top' },
      el(
        'label',
        { className: 'server-name', for: `en-${s.id}` },
        enabled,
        el('h3', { textContent: s.title }),
        s.builtin ? null : el('span', { className: 'muted', textContent: 'added by you' }),
      ),
      actions,
    ),
    el(
      'p',
      { className: 'server-line' },
      el('span', { className: 'url', textContent: s.url }),
      el('span', { className: `state ${STATE_CLASS[state] || 'warn'}`, textContent: stateText }),
    ),
    extra.length ? el('p', { className: 'hint', textContent: extra.join('; ') }) : null,
    s.enabled ? null : el('p', { className: 'hint off-hint', textContent: offHint(s) }),
    tools,
  );
}

const openDetails = new Set();
let renderTimer = null;

function scheduleRender() {
  clearTimeout(renderTimer);
  renderTimer = setTimeout(render, 100);
}

async function render() {
  let st;
  try {
    st = await ask({ type: 'remote.status' });
  } catch (err) {
    showError(err);
    return;
  }
  // Keep the keyboard focus on the same control across the redraw.
  const focus = document.activeElement?.dataset?.focus;
  $('remote-list').replaceChildren(...st.servers.map(renderServer));
  if (focus) document.querySelector(`[data-focus="${CSS.escape(focus)}"]`)?.focus();
  $('remote-dev').checked = st.developerMode;
  $('remote-redirect').textContent = st.redirectUri
    ? `Servers that need a registered redirect URI: ${st.redirectUri}`
    : '';
}

$('remote-dev').addEventListener('change', (ev) =>
  act(ev.target, { type: 'remote.setDeveloperMode', enabled: ev.target.checked }),
);

$('remote-add').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const f = ev.target;
  const out = $('remote-add-error');
  out.textContent = '';
  const button = f.querySelector('button[type=submit]');
  button.disabled = true;
  try {
    await ask({
      type: 'remote.addServer',
      url: f.elements.url.value.trim(),
      title: f.elements.title.value.trim(),
      headers: f.elements.headers.value,
      scopes: f.elements.scopes.value,
      clientId: f.elements.clientId.value.trim(),
      clientSecret: f.elements.clientSecret.value,
    });
    f.reset();
  } catch (err) {
    out.textContent = err.message;
    f.elements.url.focus();
  } finally {
    button.disabled = false;
    scheduleRender();
  }
});

chrome.storage.onChanged.addListener((changes, area) => {
  if ((area === 'local' && CONFIG_KEY in changes) || (area === 'session' && STATES_KEY in changes)) scheduleRender();
});

render();
