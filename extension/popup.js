// The popup: draws popup-view.js's view of what the service worker keeps in
// chrome.storage.session (the native port, the host's state with the cause
// and fix of a failure, the live clients with their tab groups, plans and
// activity, the recent tool calls) and offers a button per client to
// disconnect it. Everything comes from storage, so the popup works while the
// worker sleeps; it redraws on every storage change, and every 5 s for the
// "… ago" times.

import { SESSION } from './sw/store.js';
import { popupView } from './popup-view.js';

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

// Cards opened or closed by hand, kept across redraws.
const toggled = new Map();

async function renderClients({ cards, compact }, empty) {
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
      const v = popupView(s, Date.now());
      renderStatus(v.status);
      renderCalls(v.calls);
      await renderClients(v.clients, v.empty);
    } while (again);
  })().finally(() => {
    drawing = null;
  });
  return drawing;
}

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
  if (area === 'session') render();
});
setInterval(render, 5000); // keeps the "ago" times fresh
render();
