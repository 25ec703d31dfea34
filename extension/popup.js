// The popup: draws popup-view.js's view of what the service worker keeps in
// chrome.storage.session (the native port, the host's state with the cause
// and fix of a failure, the live clients with their tab groups, plans and
// activity, the recent tool calls, the calls waiting for the person's
// approval) and offers a button per client to disconnect it, a scope per
// client, the pause button and the policy's two switches (locked, and
// marked, where the organization's managed policy sets them: sw/managed.js).
// Everything comes from storage, so the popup works while the worker sleeps; it redraws on every storage change, and every 5 s for the
// "… ago" times.

import { LOCAL, SESSION } from './sw/store.js';
import { MANAGED_MARK, popupView, relayView } from './popup-view.js';
import { readManaged } from './sw/managed.js';

const $ = (id) => document.getElementById(id);

function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null) continue;
    if (k === 'dataset') Object.assign(e.dataset, v);
    else if (k.startsWith('aria-')) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) e.append(c);
  return e;
}

/** Text with `code` spans, as the host and the bridge write their fixes. */
function rich(text) {
  const out = [];
  String(text)
    .split('`')
    .forEach((part, i) => {
      if (!part) return;
      out.push(i % 2 ? el('code', { textContent: part }) : part);
    });
  return out;
}

/** A path or URL as code that wraps after its slashes, not inside a name. */
function codePath(value) {
  const code = el('code');
  String(value)
    .split(/(?<=[/\\])/)
    .forEach((part, i) => {
      if (i) code.append(el('wbr'));
      code.append(part);
    });
  return code;
}

function facts(list) {
  return list.flatMap((f) => [el('dt', { textContent: f.label }), el('dd', {}, f.code ? codePath(f.value) : f.value)]);
}

function renderStatus(v) {
  for (const id of ['status', 'status-box']) $(id).dataset.tone = v.tone;
  $('status-label').textContent = v.label;
  $('status-title').textContent = v.title;
  $('status-detail').replaceChildren(...rich(v.detail));
  $('status-detail').hidden = !v.detail;

  const p = v.problem;
  $('problem').hidden = !p;
  if (p) {
    $('cause').textContent = p.cause;
    $('fix').replaceChildren(...rich(p.fix));
    $('problem-facts').replaceChildren(...facts(p.facts));
    $('problem-facts').hidden = !p.facts.length;
    $('retry').textContent = p.retry;
  }
  $('reconnect').hidden = !v.reconnect;
  $('mcp-url').hidden = !v.mcpUrl;
  $('mcp-url-text').textContent = v.mcpUrl;
  $('details').hidden = !v.facts.length;
  $('facts').replaceChildren(...facts(v.facts));
}

// The bridge's relay.status for this browser, asked now and then while the
// popup is open (it is the bridge's state, not in storage); null while unknown.
let relayStatus = null;
async function refreshRelay() {
  const res = await chrome.runtime.sendMessage({ type: 'relay.status' }).catch(() => null);
  relayStatus = res?.ok ? res.result : null;
  render();
}

function renderRelay(relay) {
  const v = relayView(relay);
  $('relay').hidden = !v.shown;
  $('relay').dataset.tone = v.tone;
  $('relay-summary').textContent = v.summary;
  $('relay-facts').replaceChildren(...facts(v.facts));
}

// Cards opened or closed by hand, kept across redraws.
const toggled = new Map();

async function renderClients({ cards, compact }, empty) {
  // Not under the person's hand: a scope list being chosen from stays until it is left.
  if (document.activeElement?.matches?.('select.scope')) return;
  $('clients-count').textContent = cards.length ? String(cards.length) : '';
  $('no-clients').textContent = empty;
  $('no-clients').hidden = !empty;
  const list = $('clients');
  list.className = compact ? 'clients compact' : 'clients';
  const items = await Promise.all(
    cards.map(async (c) => {
      let tabs = [];
      if (c.groupId !== null) tabs = await chrome.tabs.query({ groupId: c.groupId }).catch(() => []);
      const open = toggled.has(c.id) ? toggled.get(c.id) : !compact;
      const meta = [
        `${tabs.length} tab${tabs.length === 1 ? '' : 's'}`,
        c.lastActive && (compact ? c.lastActive : `active ${c.lastActive}`),
      ]
        .filter(Boolean)
        .join(' · ');

      // One line per client when there are many: its name opens the card.
      const parts = [
        el('span', { className: 'chev', textContent: '▸' }),
        el('span', { className: 'dot' }),
        el('span', { className: 'name', textContent: c.name }),
      ];
      const name = compact
        ? el('button', { type: 'button', className: 'client-name', 'aria-expanded': String(open) }, ...parts)
        : el('div', { className: 'client-name' }, ...parts);
      name.addEventListener('click', () => {
        if (!compact) return;
        toggled.set(c.id, !open);
        render();
      });
      const head = el('div', { className: 'client-head' }, name);
      if (compact) head.append(el('span', { className: 'client-meta', textContent: meta }));
      if (c.canDisconnect) {
        const btn = el('button', {
          type: 'button',
          className: 'small danger',
          textContent: compact ? '✕' : 'Disconnect',
          title: 'End this MCP session; its tabs are closed or ungrouped as set in Settings.',
          'aria-label': `Disconnect ${c.name}`,
        });
        btn.addEventListener('click', () => disconnect(c.id, btn));
        head.append(btn);
      }
      const li = el('li', { className: 'client card', dataset: { colour: c.colour, session: c.id } }, head);
      if (!compact) li.append(el('p', { className: 'client-meta', textContent: meta }));
      if (open) li.append(scopeSelect(c));
      if (open) {
        const body = el('div', { className: 'client-body' });
        if (c.activity) body.append(el('span', { className: 'activity', textContent: c.activity }));
        if (c.plan) {
          const plan = el('ol', { className: 'plan', 'aria-label': 'Plan' });
          if (c.plan.explanation) plan.append(el('li', { className: 'why', textContent: c.plan.explanation }));
          for (const s of c.plan.steps) plan.append(el('li', { dataset: { status: s.status }, textContent: s.step }));
          body.append(plan);
        }
        if (tabs.length) {
          body.append(
            el(
              'ul',
              { className: 'tabs' },
              ...tabs.slice(0, 4).map((t) => el('li', { textContent: t.title || t.url, title: t.url || '' })),
              tabs.length > 4 ? el('li', { textContent: `and ${tabs.length - 4} more` }) : null,
            ),
          );
        }
        if (body.children.length) li.append(body);
      }
      return li;
    }),
  );
  list.replaceChildren(...items);
}

// What the client may do: read only, read and act, or everything.
function scopeSelect(c) {
  const id = `scope-${c.id}`;
  const select = el(
    'select',
    { id, className: 'scope', dataset: { key: c.scope.key } },
    ...c.scope.options.map((o) =>
      el('option', { value: o.value, textContent: o.label, selected: o.value === c.scope.scope }),
    ),
  );
  select.addEventListener('change', () => {
    const scope = select.value;
    updatePolicy((p) => ({ ...p, scopes: { ...(p.scopes || {}), [c.scope.key]: scope } }));
  });
  select.disabled = c.scope.locked;
  return el(
    'div',
    { className: 'client-scope' },
    el('label', { htmlFor: id, textContent: c.scope.remote ? 'Scope (remote)' : 'Scope' }),
    select,
    c.scope.locked ? el('span', { className: 'managed-mark', textContent: MANAGED_MARK }) : null,
  );
}

// The approvals' ids as last drawn: the cards are rebuilt only when the
// list changes (a card rebuilt under the person's pointer would lose the
// click); otherwise only their time left is updated.
let shownApprovals = '';

function renderApprovals(cards) {
  $('approvals-section').hidden = cards.length === 0;
  $('approvals-count').textContent = cards.length ? String(cards.length) : '';
  const ids = cards.map((a) => a.id).join(' ');
  if (ids === shownApprovals) {
    for (const a of cards) {
      const left = $('approvals').querySelector(`[data-approval="${a.id}"] .approval-left`);
      if (left) left.textContent = a.left;
    }
    return;
  }
  shownApprovals = ids;
  $('approvals').replaceChildren(
    ...cards.map((a) => {
      const button = (answer, label, className) => {
        const b = el('button', { type: 'button', className, textContent: label, dataset: { answer } });
        b.addEventListener('click', () => answerApproval(a.id, answer, b));
        return b;
      };
      return el(
        'li',
        {
          className: 'approval card',
          dataset: { colour: a.colour, approval: a.id, irreversible: String(a.irreversible) },
        },
        el(
          'p',
          { className: 'approval-what' },
          el('span', { className: 'dot' }),
          el('strong', { textContent: a.client }),
          ` wants to ${a.what}`,
        ),
        a.irreversible ? el('p', { className: 'approval-warn', textContent: 'This click looks irreversible.' }) : null,
        el('p', { className: 'approval-detail', textContent: a.detail, title: a.detail }),
        el(
          'div',
          { className: 'approval-actions' },
          button('once', 'Allow once', 'small primary'),
          button('site', a.siteButton, 'small'),
          button('deny', 'Deny', 'small danger'),
          el('span', { className: 'approval-left', textContent: a.left }),
        ),
      );
    }),
  );
}

async function answerApproval(id, answer, btn) {
  for (const b of btn.parentElement.querySelectorAll('button')) b.disabled = true;
  const res = await chrome.runtime
    .sendMessage({ type: 'approval.answer', id, answer })
    .catch((err) => ({ ok: false, error: err.message }));
  if (!res?.ok) {
    for (const b of btn.parentElement.querySelectorAll('button')) b.disabled = false;
    btn.title = `Failed: ${res?.error || 'no answer from the service worker'}`;
  }
}

function renderControl(v) {
  $('control').dataset.paused = String(v.paused);
  $('pause').textContent = v.pauseLabel;
  $('pause').setAttribute('aria-pressed', String(v.paused));
  $('pause').className = v.paused ? 'pause primary' : 'pause danger';
  $('pause').disabled = v.pauseLocked;
  $('paused-note').textContent = v.pausedNote;
  // A setting the organization manages shows its value and cannot be changed here.
  for (const [id, checked, locked] of [
    ['ask-unlisted', v.askUnlisted, v.askUnlistedLocked],
    ['confirm-irreversible', v.confirmIrreversible, v.confirmIrreversibleLocked],
  ]) {
    $(id).checked = checked;
    $(id).disabled = locked;
    $(`${id}-managed`).hidden = !locked;
  }
  $('managed-note').textContent = v.managedNote;
  $('managed-note').hidden = !v.managedNote;
}

// The policy is the person's: the popup writes it to chrome.storage.local,
// where the service worker reads it (sw/gate.js).
// One write after another, so that two quick changes both land.
let writing = Promise.resolve();
function updatePolicy(fn) {
  writing = writing
    .then(async () => {
      const got = await chrome.storage.local.get(LOCAL.policy);
      await chrome.storage.local.set({ [LOCAL.policy]: fn(got[LOCAL.policy] || {}) });
    })
    .catch((err) => console.error(`saving the policy: ${err.message}`));
  return writing;
}

function renderCalls({ rows, total }) {
  $('calls-section').hidden = rows.length === 0;
  $('calls-count').textContent = total > rows.length ? `${rows.length} of ${total}` : String(rows.length);
  $('calls').replaceChildren(
    ...rows.map((r) =>
      el(
        'li',
        { className: `call ${r.ok ? 'is-ok' : 'is-failed'}`, dataset: { colour: r.colour } },
        el('span', { className: 'mark', textContent: r.ok ? '✓' : '✕', 'aria-label': r.ok ? 'succeeded' : 'failed' }),
        el(
          'span',
          { className: 'what' },
          el('span', { className: 'tool', textContent: r.tool }),
          r.target ? el('span', { className: 'target', textContent: r.target, title: r.target }) : null,
        ),
        el('span', { className: 'when', textContent: r.when }),
        el(
          'span',
          { className: 'sub' },
          el('span', { className: 'dot' }),
          el('span', { className: 'who', textContent: r.client }),
          el('span', { textContent: '·' }),
          el('span', { className: 'outcome', textContent: r.outcome }),
        ),
        r.error ? el('span', { className: 'error', textContent: r.error, title: r.error }) : null,
      ),
    ),
  );
}

async function disconnect(sessionId, btn) {
  btn.disabled = true;
  const label = btn.textContent;
  btn.textContent = label === '✕' ? '…' : 'Disconnecting…';
  const res = await chrome.runtime
    .sendMessage({ type: 'session.close', session: sessionId })
    .catch((err) => ({ ok: false, error: err.message }));
  if (!res?.ok) {
    btn.disabled = false;
    btn.textContent = label;
    btn.title = `Failed: ${res?.error || 'no answer from the service worker'}`;
  }
}

let drawing = null;
let again = false;

/** Draws the popup from storage; calls during a draw coalesce into one more. */
async function render() {
  if (drawing) {
    again = true;
    return drawing;
  }
  drawing = (async () => {
    do {
      again = false;
      const s = await chrome.storage.session.get(Object.values(SESSION));
      const [local, managed] = await Promise.all([
        chrome.storage.local.get([LOCAL.policy, LOCAL.paused]),
        readManaged(),
      ]);
      const v = popupView(s, Date.now(), { ...local, managed });
      renderStatus(v.status);
      renderRelay(v.status.tone === 'ok' ? relayStatus : null);
      renderControl(v.control);
      renderApprovals(v.approvals);
      renderCalls(v.calls);
      await renderClients(v.clients, v.empty);
    } while (again);
  })().finally(() => {
    drawing = null;
  });
  return drawing;
}

$('pause').addEventListener('click', async () => {
  const btn = $('pause');
  btn.disabled = true;
  const type = btn.getAttribute('aria-pressed') === 'true' ? 'agents.resume' : 'agents.pause';
  await chrome.runtime.sendMessage({ type }).catch(() => {});
  btn.disabled = false;
});
// Each value is read when the person changes it: a redraw may set the box
// from storage before the policy is written.
$('ask-unlisted').addEventListener('change', (e) => {
  const unlisted = e.target.checked ? 'ask' : 'allow';
  updatePolicy((p) => ({ ...p, unlisted }));
});
$('confirm-irreversible').addEventListener('change', (e) => {
  const confirmIrreversible = e.target.checked;
  updatePolicy((p) => ({ ...p, confirmIrreversible }));
});
$('reconnect').addEventListener('click', () => chrome.runtime.sendMessage({ type: 'reconnect' }).catch(() => {}));
$('copy-url').addEventListener('click', async () => {
  const btn = $('copy-url');
  try {
    await navigator.clipboard.writeText($('mcp-url-text').textContent);
    btn.textContent = 'Copied';
  } catch {
    btn.textContent = 'Select and copy';
  }
  setTimeout(() => {
    btn.textContent = 'Copy';
  }, 1500);
});
// Opening the popup wakes a stopped worker, which reconnects at once instead
// of at its next alarm; what is shown then updates through storage.
chrome.runtime.sendMessage({ type: 'reconnect' }).catch(() => {});
chrome.storage.onChanged.addListener((changes, area) => {
  if (area === 'session' || area === 'managed' || LOCAL.policy in changes || LOCAL.paused in changes) render();
});
setInterval(render, 1000); // keeps the "ago" times and the approvals' time left fresh
setInterval(refreshRelay, 5000);
render();
refreshRelay();
