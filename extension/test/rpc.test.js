// The JSON-RPC dispatcher: same id back, result or error, spec codes,
// notifications, outgoing requests and cancellation.
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeChrome } from './fake-chrome.js';
import * as rpc from '../sw/rpc.js';

let sent;
let up;
beforeEach(() => {
  installFakeChrome();
  sent = [];
  up = true;
  rpc.setTransport({ send: (m) => (sent.push(m), true), linkUp: () => up });
  rpc.setExtraMethods({});
  rpc.register('ping', () => ({}));
  rpc.register('echo', (params) => params);
  rpc.register('boom', () => {
    throw new Error('it broke');
  });
  rpc.register('refuse', () => {
    throw new rpc.RpcError(rpc.CODES.invalidParams, 'x: is required');
  });
});

test('a request is answered with the same id and its result', async () => {
  await rpc.receive({ jsonrpc: '2.0', id: 'bridge:7', method: 'echo', params: { a: 1 } });
  assert.deepEqual(sent, [{ jsonrpc: '2.0', id: 'bridge:7', result: { a: 1 } }]);
});

test('ping answers {} and numeric ids come back unchanged', async () => {
  await rpc.receive({ jsonrpc: '2.0', id: 42, method: 'ping' });
  assert.deepEqual(sent, [{ jsonrpc: '2.0', id: 42, result: {} }]);
});

test('errors carry spec codes and exactly one of result or error', async () => {
  const cases = [
    ['unknown method', { jsonrpc: '2.0', id: 'a', method: 'nope' }, -32601, /method not found: nope/],
    ['handler throws', { jsonrpc: '2.0', id: 'b', method: 'boom' }, -32603, /it broke/],
    ['bad params', { jsonrpc: '2.0', id: 'c', method: 'refuse' }, -32602, /x: is required/],
    ['not JSON-RPC 2.0', { id: 'd', method: 'ping' }, -32600, /not a JSON-RPC 2.0/],
    ['not an object', 'hello', -32600, /not a JSON-RPC 2.0/],
    ['id of a bad type', { jsonrpc: '2.0', id: { x: 1 }, method: 'ping' }, -32600, /id must be/],
  ];
  for (const [name, msg, code, re] of cases) {
    sent = [];
    await rpc.receive(msg);
    assert.equal(sent.length, 1, name);
    const [reply] = sent;
    assert.ok(!('result' in reply), `${name}: has a result`);
    assert.equal(reply.error.code, code, name);
    assert.match(reply.error.message, re, name);
    assert.equal(
      reply.id,
      typeof msg === 'object' && (typeof msg.id === 'string' || typeof msg.id === 'number') ? msg.id : null,
      name,
    );
  }
});

test('relay methods come from the extra table with the session from the id', async () => {
  let seen;
  rpc.setExtraMethods({
    getTabs: (params, ctx) => {
      seen = ctx;
      return { tabs: [] };
    },
  });
  await rpc.receive({ jsonrpc: '2.0', id: 'conn-abc:4', method: 'getTabs', params: {} });
  assert.deepEqual(sent[0], { jsonrpc: '2.0', id: 'conn-abc:4', result: { tabs: [] } });
  assert.equal(seen.session.id, 'conn-abc');
  assert.equal(typeof seen.resolveTab, 'function');
  assert.ok(seen.signal instanceof AbortSignal);
});

test('sessionFromId reads local- and conn- prefixes only', () => {
  assert.deepEqual(rpc.sessionFromId('local-7f3a:12'), { id: 'local-7f3a', client: 'local-7f3a' });
  assert.equal(rpc.sessionFromId('conn-abc:1').id, 'conn-abc');
  assert.equal(rpc.sessionFromId('bridge:9'), null);
  assert.equal(rpc.sessionFromId(3), null);
});

test('notifications are never answered; unknown ones are ignored', async () => {
  await rpc.receive({ jsonrpc: '2.0', method: 'something/else', params: {} });
  await rpc.receive({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'nobody' } });
  assert.deepEqual(sent, []);
});

test('notifications/cancelled aborts the request and it is still answered', async () => {
  let signal;
  rpc.register('slow', (params, ctx) => {
    signal = ctx.signal;
    return new Promise(() => {}); // never settles by itself
  });
  const done = rpc.receive({ jsonrpc: '2.0', id: 'local-s:1', method: 'slow' });
  await new Promise((r) => setImmediate(r));
  assert.equal(signal.aborted, false);
  await rpc.receive({
    jsonrpc: '2.0',
    method: 'notifications/cancelled',
    params: { requestId: 'local-s:1', reason: 'user hit stop' },
  });
  await done;
  assert.equal(signal.aborted, true);
  assert.equal(sent.length, 1);
  assert.equal(sent[0].id, 'local-s:1');
  assert.equal(sent[0].error.code, -32603);
  assert.match(sent[0].error.message, /cancelled: user hit stop/);
});

test('a second request with an id still in flight is refused', async () => {
  rpc.register('hang', () => new Promise(() => {}));
  rpc.receive({ jsonrpc: '2.0', id: 'dup:1', method: 'hang' });
  await new Promise((r) => setImmediate(r));
  await rpc.receive({ jsonrpc: '2.0', id: 'dup:1', method: 'ping' });
  assert.equal(sent.at(-1).error.code, -32600);
  rpc.receive({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'dup:1' } });
});

test('outgoing requests use ext: ids and settle on the reply', async () => {
  const p = rpc.request('session.close', { session: 'local-a' });
  const out = sent[0];
  assert.match(out.id, /^ext:\d+$/);
  assert.equal(out.method, 'session.close');
  await rpc.receive({ jsonrpc: '2.0', id: out.id, result: { closed: true } });
  assert.deepEqual(await p, { closed: true });

  const q = rpc.request('session.close', { session: 'local-b' });
  await rpc.receive({ jsonrpc: '2.0', id: sent[1].id, error: { code: -32602, message: 'session is not open' } });
  await assert.rejects(q, (err) => err.code === -32602 && /not open/.test(err.message));
  assert.notEqual(sent[0].id, sent[1].id);
});

test('outgoing requests time out, fail when the link drops, and are refused while it is down', async () => {
  await assert.rejects(rpc.request('hello', {}, { timeoutMs: 10 }), /no reply from the bridge within 10 ms/);
  const p = rpc.request('hello', {});
  assert.equal(rpc.pendingCount(), 1);
  rpc.failPending('the native host lost the bridge (disconnected)');
  await assert.rejects(p, /lost the bridge/);
  assert.equal(rpc.pendingCount(), 0);
  up = false;
  await assert.rejects(rpc.request('hello', {}), /not connected/);
});

test('a reply to an unknown id is ignored', async () => {
  await rpc.receive({ jsonrpc: '2.0', id: 'ext:999', result: {} });
  assert.deepEqual(sent, []);
});
