// The tool registry: tools/list shape, argument checking (-32602 naming the
// argument), results and isError, progress, cancellation, recent calls.
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeChrome } from './fake-chrome.js';
import * as rpc from '../sw/rpc.js';
import * as tools from '../sw/tools.js';
import { validate } from '../sw/schema.js';
import coreTools from '../tools/core.js';
import * as audit from '../sw/audit.js';

const flush = async () => {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
};
let sent;
let seenCtx;
let release;

const testTools = [
  {
    name: 'echo',
    description: 'Echoes its arguments.',
    inputSchema: {
      type: 'object',
      properties: {
        text: { type: 'string' },
        count: { type: 'integer', minimum: 1, maximum: 5 },
        mode: { type: 'string', enum: ['a', 'b'] },
        flags: { type: 'array', items: { type: 'boolean' } },
        point: { type: 'object', properties: { x: { type: 'number' } }, required: ['x'] },
      },
      required: ['text'],
      additionalProperties: false,
    },
    annotations: { readOnlyHint: true },
    async run(args, ctx) {
      seenCtx = ctx;
      ctx.progress(1, 2, 'halfway');
      return { content: [{ type: 'text', text: `${args.text} x${args.count ?? 1}` }] };
    },
  },
  {
    name: 'fails',
    description: 'Throws ToolError.',
    inputSchema: { type: 'object' },
    annotations: {},
    async run() {
      throw new tools.ToolError('The button is not on the page; read_page lists what is.');
    },
  },
  {
    name: 'crashes',
    description: 'Throws TypeError.',
    inputSchema: { type: 'object' },
    annotations: {},
    async run() {
      return null.x;
    },
  },
  {
    name: 'waits',
    description: 'Waits until aborted.',
    inputSchema: { type: 'object' },
    annotations: {},
    run(args, ctx) {
      seenCtx = ctx;
      return new Promise((resolve) => {
        release = resolve;
      });
    },
  },
  { name: 'bad name!', description: 'never registered', inputSchema: { type: 'object' }, run() {} },
];

beforeEach(async () => {
  await tools.flushRecentCalls(); // the last test's, into its own storage
  installFakeChrome();
  sent = [];
  rpc.setTransport({ send: (m) => (sent.push(m), true), linkUp: () => true });
  rpc.register('tools/list', () => tools.list());
  rpc.register('tools/call', (p, ctx) => tools.call(p, ctx));
  tools.clear();
  tools.register(testTools, coreTools);
});

const session = { id: 'local-s1', client: 'Claude Code' };
async function callTool(name, args, extraMeta = {}, id = 'local-s1:1') {
  await rpc.receive({
    jsonrpc: '2.0',
    id,
    method: 'tools/call',
    params: { name, arguments: args, _meta: { 'browserbridge/session': session, ...extraMeta } },
  });
  return sent.find((m) => m.id === id);
}

test('tools/list gives every valid tool with name, description, inputSchema and annotations', async () => {
  await rpc.receive({ jsonrpc: '2.0', id: 'bridge:1', method: 'tools/list', params: {} });
  const { tools: list } = sent[0].result;
  const names = list.map((t) => t.name);
  assert.ok(!names.includes('bad name!'), 'a tool with a bad name was listed');
  for (const n of ['echo', 'tabs_context', 'tabs_context_mcp', 'tabs_create', 'tabs_create_mcp', 'navigate']) {
    assert.ok(names.includes(n), n);
  }
  for (const t of list) {
    assert.match(t.name, /^[A-Za-z0-9_.-]{1,128}$/);
    assert.equal(typeof t.description, 'string');
    assert.equal(t.inputSchema.type, 'object');
    assert.equal(typeof t.annotations, 'object');
    assert.ok(!('run' in t));
    assert.deepEqual(
      Object.keys(t).filter((k) => !['name', 'title', 'description', 'inputSchema', 'annotations'].includes(k)),
      [],
    );
  }
});

test('invalid arguments are -32602 errors that name the argument', async () => {
  const cases = [
    [{}, /text: is required/],
    [{ text: 5 }, /text: expected a string, got 5/],
    [{ text: 'a', count: 1.5 }, /count: expected an integer/],
    [{ text: 'a', count: 9 }, /count: must be at most 5/],
    [{ text: 'a', count: 0 }, /count: must be at least 1/],
    [{ text: 'a', mode: 'c' }, /mode: must be one of "a", "b"/],
    [{ text: 'a', flags: [true, 'no'] }, /flags\[1\]: expected a boolean/],
    [{ text: 'a', point: {} }, /point\.x: is required/],
    [{ text: 'a', colour: 'red' }, /colour: is not a known argument/],
    ['text', /arguments: expected an object/],
  ];
  let n = 0;
  for (const [args, re] of cases) {
    const reply = await callTool('echo', args, {}, `local-s1:${++n}`);
    assert.equal(reply.error?.code, -32602, JSON.stringify(args));
    assert.match(reply.error.message, /^invalid arguments for echo: /);
    assert.match(reply.error.message, re);
    // The problems ride in data, which the bridge turns into a tool error
    // from MCP 2025-11-25 on.
    assert.ok(
      reply.error.data?.argumentErrors?.some((p) => re.test(p)),
      JSON.stringify(reply.error.data),
    );
  }
});

test('an unknown tool is a -32602 error', async () => {
  const reply = await callTool('nope', {});
  assert.equal(reply.error.code, -32602);
  assert.match(reply.error.message, /unknown tool "nope"/);
  assert.equal(reply.error.data, undefined, 'an unknown tool is no argument error');
});

test('a tool result comes back as a CallToolResult with progress on the way', async () => {
  const reply = await callTool('echo', { text: 'hi', count: 2 }, { progressToken: 'local-s1:1' });
  assert.deepEqual(reply.result, {
    content: [{ type: 'text', text: 'hi x2' }],
  });
  const progress = sent.find((m) => m.method === 'notifications/progress');
  assert.deepEqual(progress.params, { progressToken: 'local-s1:1', progress: 1, total: 2, message: 'halfway' });
  assert.ok(!('id' in progress));
  assert.deepEqual(seenCtx.session, { ...session, remote: false });
  assert.equal(seenCtx.requestId, 'local-s1:1');
  for (const f of ['resolveTab', 'createTab', 'progress']) assert.equal(typeof seenCtx[f], 'function', f);
});

test('no progress is sent without a progressToken', async () => {
  await callTool('echo', { text: 'hi' });
  assert.ok(!sent.some((m) => m.method === 'notifications/progress'));
});

test('ToolError and other exceptions become isError results, not protocol errors', async () => {
  let reply = await callTool('fails', {});
  assert.deepEqual(reply.result, {
    isError: true,
    content: [{ type: 'text', text: 'The button is not on the page; read_page lists what is.' }],
  });
  reply = await callTool('crashes', {}, {}, 'local-s1:2');
  assert.equal(reply.result.isError, true);
  assert.match(reply.result.content[0].text, /^crashes failed: .*null/);
});

test('notifications/cancelled aborts ctx.signal and the call is still answered', async () => {
  const done = rpc.receive({
    jsonrpc: '2.0',
    id: 'local-s1:9',
    method: 'tools/call',
    params: { name: 'waits', arguments: {}, _meta: { 'browserbridge/session': session } },
  });
  await flush();
  assert.equal(seenCtx.signal.aborted, false);
  await rpc.receive({
    jsonrpc: '2.0',
    method: 'notifications/cancelled',
    params: { requestId: 'local-s1:9', reason: 'stop' },
  });
  await done;
  assert.equal(seenCtx.signal.aborted, true);
  const replies = sent.filter((m) => m.id === 'local-s1:9');
  assert.equal(replies.length, 1);
  assert.ok(replies[0].error);
  release({ content: [] }); // the tool finishing late sends nothing more
  await flush();
  assert.equal(sent.filter((m) => m.id === 'local-s1:9').length, 1);
});

test('recent calls are recorded for the popup, newest first, at most 50', async () => {
  for (let i = 0; i < 55; i++) {
    await callTool(i % 2 ? 'fails' : 'echo', { ...(i % 2 ? {} : { text: 'x' }) }, {}, `local-s1:${100 + i}`);
  }
  await tools.flushRecentCalls();
  const calls = (await chrome.storage.session.get('recentCalls')).recentCalls;
  assert.equal(calls.length, 50);
  assert.equal(calls[0].tool, 'echo');
  assert.equal(calls[0].ok, true);
  assert.equal(calls[1].ok, false);
  assert.match(calls[1].error, /button is not on the page/);
  assert.equal(calls[0].session, 'local-s1');
  assert.equal(calls[0].client, 'Claude Code');
  assert.equal(typeof calls[0].ms, 'number');
});

test("the reply is posted before the call's recent-calls write and audit entry, which still follow", async () => {
  audit.configure({ notify: (entry) => rpc.notify('audit.decision', entry) });
  const events = [];
  rpc.setTransport({
    send: (m) => (
      sent.push(m),
      events.push(m.method === 'audit.decision' ? `audit ${m.params.tool}` : `reply ${m.id}`),
      true
    ),
    linkUp: () => true,
  });
  const area = chrome.storage.session;
  const { get, set } = area;
  let reads = 0;
  area.get = (keys) => ((reads += keys === 'recentCalls'), get.call(area, keys));
  area.set = (items) => {
    if (items.recentCalls) events.push(`recent calls ${items.recentCalls.map((c) => c.tool).join(' ')}`);
    return set.call(area, items);
  };
  await callTool('echo', { text: 'x' }, {}, 'local-s1:1');
  await callTool('fails', {}, {}, 'local-s1:2');
  await callTool('echo', { text: 'y' }, {}, 'local-s1:3');
  await flush();
  const at = (e) => events.indexOf(e);
  for (const [id, tool] of [
    ['local-s1:1', 'echo'],
    ['local-s1:2', 'fails'],
  ]) {
    assert.ok(at(`reply ${id}`) >= 0 && at(`reply ${id}`) < at(`audit ${tool}`), events.join(', '));
  }
  assert.equal(events.filter((e) => e.startsWith('audit')).length, 3);
  // The burst's recent calls wait for a pause, then go in one write.
  assert.ok(!events.some((e) => e.startsWith('recent calls')), events.join(', '));
  await tools.flushRecentCalls();
  assert.deepEqual(
    events.filter((e) => e.startsWith('recent calls')),
    ['recent calls echo fails echo'],
  );
  assert.equal(reads, 1, 'the list is read once, then kept in memory');
  await callTool('fails', {}, {}, 'local-s1:4');
  await tools.flushRecentCalls();
  assert.equal(reads, 1, 'the list is read once, then kept in memory');
  const calls = (await chrome.storage.session.get('recentCalls')).recentCalls;
  assert.deepEqual(
    calls.map((c) => [c.tool, c.ok]),
    [
      ['fails', false],
      ['echo', true],
      ['fails', false],
      ['echo', true],
    ],
  );
});

test('the recent calls are written once the calls pause, without a flush', async () => {
  const writes = [];
  const area = chrome.storage.session;
  const { set } = area;
  area.set = (items) => {
    if (items.recentCalls) writes.push(items.recentCalls.length);
    return set.call(area, items);
  };
  await callTool('echo', { text: 'x' }, {}, 'local-s1:1');
  await callTool('echo', { text: 'y' }, {}, 'local-s1:2');
  assert.deepEqual(writes, []);
  const deadline = Date.now() + 10_000;
  while (!writes.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  assert.deepEqual(writes, [2]);
});

test('a call answered by its cancellation still records its entry when the tool ends', async () => {
  audit.configure({ notify: (entry) => rpc.notify('audit.decision', entry) });
  const done = rpc.receive({
    jsonrpc: '2.0',
    id: 'local-s1:7',
    method: 'tools/call',
    params: { name: 'waits', arguments: {}, _meta: { 'browserbridge/session': session } },
  });
  await flush();
  await rpc.receive({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'local-s1:7' } });
  await done;
  assert.ok(sent.find((m) => m.id === 'local-s1:7').error);
  assert.equal(sent.filter((m) => m.method === 'audit.decision').length, 0, 'the tool has not ended yet');
  release({ content: [{ type: 'text', text: 'late' }] });
  await flush();
  const entries = sent.filter((m) => m.method === 'audit.decision').map((m) => m.params);
  assert.deepEqual(
    entries.map((e) => [e.tool, e.outcome]),
    [['waits', 'ok']],
  );
  await tools.flushRecentCalls();
  const calls = (await chrome.storage.session.get('recentCalls')).recentCalls;
  assert.equal(calls[0].tool, 'waits');
});

test('validate handles type lists, anyOf, nested arrays and the root', () => {
  assert.deepEqual(validate(null, { type: ['string', 'null'] }), []);
  assert.deepEqual(validate(3, { type: 'number' }), []);
  assert.match(validate('x', { anyOf: [{ type: 'number' }, { type: 'boolean' }] })[0], /arguments: expected a number/);
  assert.deepEqual(
    validate(
      { a: [[1]] },
      { type: 'object', properties: { a: { type: 'array', items: { type: 'array', items: { type: 'integer' } } } } },
    ),
    [],
  );
  assert.match(
    validate(
      { a: [[1.5]] },
      { type: 'object', properties: { a: { type: 'array', items: { type: 'array', items: { type: 'integer' } } } } },
    )[0],
    /^a\[0\]\[0\]: expected an integer/,
  );
  assert.match(
    validate({ x: 1 }, { type: 'object', properties: {}, additionalProperties: false })[0],
    /x: is not a known argument \(this tool takes none\)/,
  );
});
