// The popup (issue 14): popup-view.js says what is shown in each state (the
// cause and fix of a bridge that could not start, no stale error once the
// host is back, tool calls as history and no "never used" line above
// them, compact cards for many clients); popup.js draws it on a minimal DOM
// and follows storage (issue 12: live sessions only, newest first).
import { test, mock } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeChrome } from './fake-chrome.js';
import {
  statusView,
  clientsView,
  callsView,
  popupView,
  ago,
  approvalsView,
  controlView,
  scopeView,
  COMPACT_AFTER,
  relayView,
} from '../popup-view.js';
import { callTarget } from '../sw/calltarget.js';

const fake = installFakeChrome();
const flush = async () => {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
};

const NOW = 1_700_000_000_000;
const open = { port: 'open', attempt: 0, at: NOW - 60_000 };
const ready = {
  state: 'ready',
  browserId: 'abcdefgh12',
  bridgeVersion: '0.1.0',
  mcpUrl: 'http://127.0.0.1:3456/mcp',
  bridgeInstance: 'b1',
  at: NOW - 50_000,
};
const connected = { state: 'connected', socket: '/run/user/1000/browserbridge/bridge.sock', at: NOW - 55_000 };

/** Every string a view would put on screen, for "is this shown anywhere". */
const shown = (v) => JSON.stringify(v);

test('status: nothing yet, then the native host starting', () => {
  for (const s of [{}, { native: { port: 'connecting', attempt: 0 } }]) {
    const v = statusView(s, NOW);
    assert.equal(v.tone, 'wait');
    assert.equal(v.label, 'Waiting for bridge');
    assert.equal(v.problem, null);
  }
});

test('status: the native host is missing: the cause, the fix and the retry', () => {
  const v = statusView(
    {
      native: {
        port: 'disconnected',
        lastError: 'Specified native messaging host not found.',
        lastErrorAt: NOW - 1000,
        retryInMs: 4000,
        attempt: 3,
        at: NOW - 1000,
      },
    },
    NOW,
  );
  assert.equal(v.tone, 'error');
  assert.equal(v.label, 'Error');
  assert.equal(v.problem.cause, 'Specified native messaging host not found.');
  assert.match(v.problem.fix, /browserbridge install --browser/);
  assert.equal(v.problem.retry, 'Trying again (attempt 3) in 3 s.');
  assert.equal(v.reconnect, true);
});

test('status: the host started the bridge and waits for it', () => {
  const v = statusView({ native: open, hostState: { state: 'starting_bridge', at: NOW } }, NOW);
  assert.equal(v.tone, 'wait');
  assert.equal(v.title, 'Starting the bridge…');
});

test('status: stopped with browserbridge stop: not an error, and how to start it', () => {
  const v = statusView({ native: open, hostState: { state: 'stopped', at: NOW } }, NOW);
  assert.equal(v.tone, 'off');
  assert.equal(v.label, 'Stopped');
  assert.equal(v.title, 'The bridge is stopped');
  assert.match(v.detail, /browserbridge start/);
  assert.equal(v.problem, null);
});

test('status: a bad config: the file, the error, the fix, and no "starting"', () => {
  const failure = {
    kind: 'config',
    error: 'config: unknown key "lisen" (check its spelling)',
    configFile: '/home/u/.config/browserbridge/config.json',
    fix: 'Correct /home/u/.config/browserbridge/config.json (strict JSON; the error names the key). The host starts the bridge again by itself, or run `browserbridge doctor`.',
    logFile: '/home/u/.local/state/browserbridge/bridge.log',
  };
  const v = statusView(
    {
      native: open,
      hostState: {
        state: 'bridge_failed',
        failure,
        error: 'the bridge could not start: …',
        retryInMs: 7000,
        at: NOW - 2000,
      },
    },
    NOW,
  );
  assert.equal(v.tone, 'error');
  assert.equal(v.title, 'The bridge could not start');
  assert.equal(v.problem.cause, failure.error);
  assert.equal(
    v.problem.fix,
    'Correct the config file (strict JSON; the error names the key). The host starts the bridge again by itself, or run `browserbridge doctor`.',
  );
  assert.deepEqual(
    v.problem.facts.map((f) => [f.label, f.value]),
    [
      ['Config', failure.configFile],
      ['Log', failure.logFile],
    ],
  );
  assert.equal(v.problem.retry, 'The native host starts it again in 5 s.');
  assert.doesNotMatch(shown(v), /starting the bridge/i);
});

test('status: a port taken: which port and the fix', () => {
  const failure = {
    kind: 'listen',
    error: 'port 3456 is taken by another program (127.0.0.1:3456)',
    listen: '127.0.0.1:3456',
    configFile: '/c.json',
    fix: 'Stop the program that holds port 3456, or set "listen" in /c.json to a free port (e.g. "127.0.0.1:3457").',
  };
  const v = statusView({ native: open, hostState: { state: 'bridge_failed', failure, at: NOW } }, NOW);
  assert.match(v.problem.cause, /port 3456/);
  assert.match(v.problem.fix, /set "listen" in the config file to a free port/);
  assert.deepEqual(
    v.problem.facts.map((f) => f.label),
    ['Config', 'Address'],
  );
});

test('status: a host without the failure field (older host) still shows its error', () => {
  const v = statusView(
    { native: open, hostState: { state: 'bridge_failed', error: 'the bridge could not start: boom', at: NOW } },
    NOW,
  );
  assert.equal(v.problem.cause, 'the bridge could not start: boom');
  assert.match(v.problem.fix, /browserbridge doctor/);
});

test('status: connected clears a past error of the native port', () => {
  const native = { ...open, lastError: 'Native host has exited.', lastErrorAt: NOW - 120_000 };
  const v = statusView({ native, hostState: connected, bridge: ready }, NOW);
  assert.equal(v.tone, 'ok');
  assert.equal(v.label, 'Connected');
  assert.equal(v.problem, null);
  assert.equal(v.mcpUrl, 'http://127.0.0.1:3456/mcp');
  assert.doesNotMatch(shown(v), /exited|error/i);
});

test('status: connected but hello not answered yet, or refused', () => {
  assert.equal(statusView({ native: open, hostState: connected, bridge: { state: 'pending' } }, NOW).tone, 'wait');
  const v = statusView(
    { native: open, hostState: connected, bridge: { state: 'error', error: 'hello timed out' } },
    NOW,
  );
  assert.equal(v.tone, 'error');
  assert.equal(v.problem.cause, 'hello timed out');
});

test('status: the bridge went away: an error until the host is back', () => {
  const v = statusView(
    { native: open, hostState: { state: 'disconnected', error: 'the bridge went away: EOF', at: NOW } },
    NOW,
  );
  assert.equal(v.tone, 'error');
  assert.equal(v.problem.cause, 'the bridge went away: EOF');
});

const rec = (id, client, color, createdAt, extra = {}) => ({
  id,
  client,
  color,
  createdAt,
  lastActive: createdAt,
  bridgeInstance: 'b1',
  groupId: null,
  ...extra,
});

test('clients: cards with group colours, plan and activity; compact past three', () => {
  const records = {
    'local-a': rec('local-a', 'Claude Code', 'blue', NOW - 5000, {
      plan: {
        steps: [
          { step: 'Open the page', status: 'completed' },
          { step: 'Read it', status: 'in_progress' },
        ],
        explanation: '',
      },
      activity: { state: 'answering', summary: 'found it' },
    }),
    'local-b': rec('local-b', 'Cursor', 'not-a-colour', NOW - 4000),
    'conn-r': rec('conn-r', 'relay conn-r', 'green', NOW - 3000),
  };
  const calls = [
    { tool: 'navigate', session: 'local-a', ok: true, at: NOW },
    { tool: 'find', session: 'local-a', ok: true, at: NOW },
  ];
  const v = clientsView(records, ready, calls, NOW);
  assert.equal(v.compact, false);
  assert.deepEqual(
    v.cards.map((c) => [c.name, c.colour, c.canDisconnect]),
    [
      ['relay conn-r (remote)', 'green', false],
      ['Cursor', 'grey', true],
      ['Claude Code', 'blue', true],
    ],
  );
  const claude = v.cards[2];
  assert.equal(claude.activity, 'Answering: found it');
  assert.deepEqual(
    claude.plan.steps.map((s) => s.status),
    ['completed', 'in_progress'],
  );
  assert.equal(claude.calls, 2);
  assert.equal(claude.lastActive, '5 s ago');

  for (let i = 0; i < 10; i++) records[`local-${i}`] = rec(`local-${i}`, `client ${i}`, 'red', NOW - i);
  const many = clientsView(records, ready, [], NOW);
  assert.ok(many.cards.length > COMPACT_AFTER);
  assert.equal(many.compact, true);
});

test('calls: history rows with tool, target, outcome and time; failures carry their text', () => {
  const records = { 'local-a': rec('local-a', 'Claude Code', 'purple', NOW) };
  const v = callsView(
    [
      {
        tool: 'navigate',
        target: 'example.com/docs',
        session: 'local-a',
        client: 'Claude Code',
        ms: 340,
        ok: true,
        at: NOW - 12_000,
      },
      {
        tool: 'computer',
        target: 'left click (10, 20)',
        session: 'local-gone',
        client: 'Old client',
        ms: 2500,
        ok: false,
        error: 'no element there',
        at: NOW - 300_000,
      },
    ],
    records,
    NOW,
  );
  assert.deepEqual(
    v.rows.map((r) => [r.tool, r.target, r.outcome, r.when, r.client, r.colour, r.error]),
    [
      ['navigate', 'example.com/docs', 'ok · 340 ms', '12 s ago', 'Claude Code', 'purple', ''],
      ['computer', 'left click (10, 20)', 'failed · 2.5 s', '5 min ago', 'Old client', 'grey', 'no element there'],
    ],
  );
});

test('popup: "never used" only without any call; calls without clients are history', () => {
  const base = { native: open, hostState: connected, bridge: ready };
  assert.equal(popupView({ ...base }, NOW).empty, 'No MCP client has used this browser yet.');
  const call = { tool: 'navigate', session: 'local-x', client: 'X', ms: 5, ok: true, at: NOW };
  const past = popupView({ ...base, recentCalls: [call] }, NOW);
  assert.equal(past.empty, 'No MCP client is connected now.');
  assert.equal(past.calls.rows.length, 1);
  const live = popupView(
    { ...base, recentCalls: [call], sessions: { 'local-x': rec('local-x', 'X', 'blue', NOW) } },
    NOW,
  );
  assert.equal(live.empty, '');
  assert.doesNotMatch(shown(live), /has used this browser yet/);
});

test('ago: words for a glance', () => {
  assert.equal(ago(NOW - 1000, NOW), 'just now');
  assert.equal(ago(NOW - 42_000, NOW), '42 s ago');
  assert.equal(ago(NOW - 7 * 60_000, NOW), '7 min ago');
  assert.equal(ago(NOW - 3 * 3600_000, NOW), '3 h ago');
  assert.equal(ago(undefined, NOW), '');
});

test('call targets: the page, the action, never what was typed', () => {
  assert.equal(callTarget('navigate', { url: 'https://example.com/a/b?token=secret#x', tabId: 3 }), 'example.com/a/b');
  assert.equal(callTarget('navigate', { url: 'back', tabId: 3 }), 'back');
  assert.equal(callTarget('computer', { action: 'type', text: 'hunter2', tabId: 3 }), 'type (7 chars)');
  assert.equal(callTarget('computer', { action: 'left_click', coordinate: [10.4, 20.6] }), 'left click (10, 21)');
  assert.equal(callTarget('computer', { action: 'left_click', ref: 'ref_12' }), 'left click ref_12');
  assert.equal(callTarget('find', { query: 'the search box', tabId: 2 }), '“the search box”');
  assert.equal(
    callTarget('javascript_tool', { action: 'javascript_exec', text: 'document.cookie', tabId: 9 }),
    'tab 9',
  );
  assert.equal(callTarget('tabs_context_mcp', {}), '');
  assert.ok(callTarget('navigate', { url: `https://example.com/${'x'.repeat(200)}` }).length <= 60);
});

// ---------------------------------------------------------------------------
// popup.js on a minimal DOM.

function element(tag) {
  const e = {
    tagName: tag.toUpperCase(),
    children: [],
    style: {},
    dataset: {},
    attrs: {},
    hidden: false,
    textContent: '',
    className: '',
    listeners: {},
    append(...c) {
      e.children.push(...c);
    },
    replaceChildren(...c) {
      e.children = c;
    },
    setAttribute(k, v) {
      e.attrs[k] = String(v);
    },
    addEventListener(type, fn) {
      e.listeners[type] = fn;
    },
  };
  return e;
}
const byId = new Map();
globalThis.document = {
  createElement: element,
  getElementById: (id) => byId.get(id) || (byId.set(id, element('div')), byId.get(id)),
};
const find = (e, pred) =>
  typeof e === 'object' && e ? (pred(e) ? e : e.children.map((c) => find(c, pred)).find(Boolean)) : undefined;
const names = () => byId.get('clients').children.map((li) => find(li, (x) => x.className === 'name').textContent);

test('popup.js draws the live sessions only, newest first, the failure, and follows storage', async () => {
  await chrome.storage.session.set({
    native: open,
    hostState: connected,
    bridge: { ...ready, bridgeInstance: 'b1' },
    sessions: {
      'local-1': rec('local-1', 'Oldest', 'blue', 1000, { lastActive: 9000 }),
      'local-3': rec('local-3', 'Newest', 'red', 3000),
      'conn-r': { ...rec('conn-r', 'relay conn-r', 'green', 2000), bridgeInstance: undefined },
      'local-9': { ...rec('local-9', 'Of a dead bridge', 'pink', 4000), bridgeInstance: 'b0' },
    },
  });
  const sent = [];
  fake.runtime.sendMessage = async (msg) => {
    sent.push(msg);
  };
  mock.timers.enable({ apis: ['setInterval'] }); // the popup's 5 s refresh would keep the test running
  try {
    await import('../popup.js');
    await flush();
    assert.deepEqual(names(), ['Newest', 'relay conn-r (remote)', 'Oldest']);
    assert.equal(byId.get('no-clients').hidden, true);
    assert.equal(byId.get('status').dataset.tone, 'ok');
    assert.equal(byId.get('problem').hidden, true);
    assert.deepEqual(
      sent,
      [{ type: 'reconnect' }, { type: 'relay.status' }],
      'opening the popup did not wake the worker and ask for the relay',
    );

    // Sessions end: the service worker deletes their records, the popup follows.
    await chrome.storage.session.set({ sessions: {} });
    await flush();
    assert.deepEqual(names(), []);
    assert.equal(byId.get('no-clients').hidden, false);
    assert.equal(byId.get('no-clients').textContent, 'No MCP client has used this browser yet.');

    // The bridge cannot start: the cause and the fix, with its `code`.
    await chrome.storage.session.set({
      hostState: {
        state: 'bridge_failed',
        at: Date.now(),
        failure: {
          kind: 'listen',
          error: 'port 3456 is taken',
          fix: 'Set "listen" in `config.json`.',
          listen: '127.0.0.1:3456',
        },
      },
    });
    await flush();
    assert.equal(byId.get('status').dataset.tone, 'error');
    assert.equal(byId.get('status-label').textContent, 'Error');
    assert.equal(byId.get('problem').hidden, false);
    assert.equal(byId.get('cause').textContent, 'port 3456 is taken');
    const fix = byId.get('fix').children;
    assert.deepEqual(
      fix.map((c) => (typeof c === 'string' ? c : `<${c.tagName}>${c.textContent}`)),
      ['Set "listen" in ', '<CODE>config.json', '.'],
    );
  } finally {
    mock.timers.reset();
  }
});

test('the calls waiting for the person: who, what, where, the buttons and the time left', () => {
  const now = 1_000_000;
  const cards = approvalsView(
    [
      {
        id: 'a1',
        session: 'local-x',
        client: 'Claude Code',
        tool: 'form_input',
        cls: 'act',
        site: 'https://shop.example',
        target: 'tab 4',
        why: '',
        deadline: now + 105_000,
      },
      {
        id: 'a2',
        session: 'conn-r',
        client: 'relay',
        remote: true,
        tool: 'computer',
        cls: 'act',
        site: 'https://bank.example',
        why: 'irreversible',
        deadline: now - 5,
      },
      {
        id: 'a3',
        session: 'local-y',
        client: 'Cursor',
        tool: 'update_plan',
        cls: 'plan',
        site: 'docs.example, api.example',
        deadline: now + 1000,
      },
      null,
    ],
    { 'local-x': { color: 'blue' } },
    now,
  );
  assert.deepEqual(
    cards.map((c) => [c.client, c.what, c.detail, c.siteButton, c.irreversible, c.left, c.colour]),
    [
      [
        'Claude Code',
        'act on https://shop.example',
        'form_input · tab 4',
        'Allow this site for Claude Code',
        false,
        '1:45 left',
        'blue',
      ],
      [
        'relay (remote)',
        'act on https://bank.example',
        'computer',
        'Allow this site for relay',
        true,
        '0:00 left',
        'grey',
      ],
      [
        'Cursor',
        'approve a plan on docs.example, api.example',
        'update_plan',
        'Approve the plan',
        false,
        '0:01 left',
        'grey',
      ],
    ],
  );
});

test('the switches and the pause button say what is true now', () => {
  assert.deepEqual(controlView(undefined, undefined), {
    paused: false,
    pauseLabel: 'Pause all agents',
    pausedNote: '',
    pauseLocked: false,
    askUnlisted: false,
    askUnlistedLocked: false,
    confirmIrreversible: false,
    confirmIrreversibleLocked: false,
    rules: 0,
    managedNote: '',
  });
  const v = controlView({ unlisted: 'ask', confirmIrreversible: true, sites: [{ pattern: 'a.example' }] }, { at: 1 });
  assert.equal(v.pauseLabel, 'Resume agents');
  assert.match(v.pausedNote, /every call gets an error/);
  assert.deepEqual([v.askUnlisted, v.confirmIrreversible, v.rules], [true, true, 1]);
});

test("a client's scope: its own, else the default of local or remote clients", () => {
  assert.deepEqual(
    [scopeView({}, { id: 'local-a', client: 'Cursor' }).scope, scopeView({}, { id: 'conn-b', client: 'relay' }).scope],
    ['full', 'act'],
  );
  const set = { scopes: { 'local:Cursor': 'read', 'remote:relay': 'full' } };
  const local = scopeView(set, { id: 'local-a', client: 'Cursor' });
  assert.deepEqual([local.key, local.scope, local.remote], ['local:Cursor', 'read', false]);
  const remote = scopeView(set, { id: 'conn-b', client: 'relay' });
  assert.deepEqual([remote.key, remote.scope, remote.remote], ['remote:relay', 'full', true]);
  assert.deepEqual(
    local.options.map((o) => o.value),
    ['read', 'act', 'full'],
  );
  const v = popupView({ sessions: { 'local-a': { id: 'local-a', client: 'Cursor', createdAt: 1 } } }, 2, {
    policy: set,
  });
  assert.equal(v.clients.cards[0].scope.scope, 'read');
});

test('remote clients carry their own name, marked remote, in cards and recent calls (issue 31)', () => {
  const records = {
    'conn-kabc': { id: 'conn-kabc', client: 'claude.ai', remote: true, color: 'red', lastActive: 1, createdAt: 1 },
    'local-a': { id: 'local-a', client: 'Claude Code', color: 'blue', lastActive: 2, createdAt: 2 },
  };
  const calls = [
    { tool: 'navigate', session: 'conn-kabc', client: 'claude.ai', remote: true, ok: true, at: 1 },
    { tool: 'navigate', session: 'local-a', client: 'Claude Code', ok: true, at: 2 },
  ];
  assert.deepEqual(
    callsView(calls, records, 10).rows.map((r) => r.client),
    ['claude.ai (remote)', 'Claude Code'],
  );
  const cards = clientsView(records, undefined, calls, 10).cards;
  assert.deepEqual(cards.map((c) => [c.name, c.remote, c.canDisconnect]).sort(), [
    ['Claude Code', false, true],
    ['claude.ai (remote)', true, false],
  ]);
});

test('issue 31: no disconnect while the bridge is stopped; the MCP URL once; the relay shown', () => {
  const sessions = { 'local-a': { id: 'local-a', client: 'Claude Code', color: 'blue', lastActive: 1, createdAt: 1 } };
  const ready = { state: 'ready', mcpUrl: 'http://127.0.0.1:8787/mcp', bridgeVersion: '1.2', browserId: 'b1' };
  const up = popupView(
    { native: { port: 'connected' }, hostState: { state: 'connected' }, bridge: ready, sessions },
    10,
  );
  assert.equal(up.clients.cards[0].canDisconnect, true);
  assert.equal(up.status.mcpUrl, ready.mcpUrl);
  assert.ok(!up.status.facts.some((f) => f.value === ready.mcpUrl), 'Connection details repeat the MCP URL');
  const stopped = popupView(
    { native: { port: 'connected' }, hostState: { state: 'stopped' }, bridge: ready, sessions },
    10,
  );
  assert.equal(stopped.clients.cards.length, 1);
  assert.equal(stopped.clients.cards[0].canDisconnect, false, 'a disconnect button while the bridge is stopped');

  assert.equal(relayView(null).shown, false);
  assert.equal(relayView({ configured: false, servers: [] }).shown, false);
  const r = relayView({
    configured: true,
    url: 'wss://proxy.example/extension',
    browser: { state: 'connected', userId: 'alice', extensionId: 'ext-1', name: 'Chrome #abc', peers: 2 },
    servers: [{ server: 'everything', state: 'connected' }],
  });
  assert.equal(r.tone, 'ok');
  assert.equal(r.summary, 'Remote access through proxy.example as alice');
  const facts = Object.fromEntries(r.facts.map((f) => [f.label, f.value]));
  assert.equal(facts.Proxy, 'wss://proxy.example/extension');
  assert.equal(facts.User, 'alice');
  assert.equal(facts['Servers offered'], 'everything (connected)');
  const refused = relayView({
    configured: true,
    url: 'wss://proxy.example/extension',
    browser: { state: 'auth_failed', error: 'token expired' },
    servers: [],
  });
  assert.equal(refused.tone, 'error');
  assert.match(refused.summary, /refused by the proxy/);
  assert.ok(refused.facts.some((f) => f.label === 'Last error' && f.value === 'token expired'));
});
