// native.chunk reassembly (docs/protocol.md, "Chunks").
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createReassembler, decodeBase64, MAX_CHUNKS } from '../sw/chunks.js';

/** Splits a message the way the host does, at byte boundaries (not characters). */
function chunk(msg, id, size) {
  const bytes = Buffer.from(JSON.stringify(msg), 'utf8');
  const parts = [];
  for (let off = 0; off < bytes.length; off += size) parts.push(bytes.subarray(off, off + size));
  return parts.map((p, seq) => ({ id, total: parts.length, seq, data: p.toString('base64') }));
}

function setup() {
  const got = [];
  const logs = [];
  const r = createReassembler({ onMessage: (m) => got.push(m), log: (t) => logs.push(t) });
  return { r, got, logs };
}

test('chunks in order make the message', () => {
  const { r, got } = setup();
  const msg = {
    jsonrpc: '2.0',
    id: 'local-a:1',
    method: 'tools/call',
    params: { name: 'x', arguments: { text: 'a'.repeat(5000) } },
  };
  const chunks = chunk(msg, 'h1', 1000);
  assert.ok(chunks.length > 3);
  for (const c of chunks) r.accept(c);
  assert.deepEqual(got, [msg]);
  assert.equal(r.pending(), false);
});

test('multi-byte UTF-8 split across chunks decodes whole', () => {
  const { r, got } = setup();
  const msg = { text: 'héllo wörld — 日本語 🙂'.repeat(20) };
  // 7-byte chunks split 2-, 3- and 4-byte characters everywhere (and stay under 128 chunks).
  for (const c of chunk(msg, 'h2', 7)) r.accept(c);
  assert.deepEqual(got, [msg]);
});

test('a single chunk is a whole message', () => {
  const { r, got } = setup();
  for (const c of chunk({ a: 1 }, 'h3', 1 << 19)) r.accept(c);
  assert.deepEqual(got, [{ a: 1 }]);
});

test('bad runs are dropped with a log line, and the next run still works', () => {
  const cases = [
    ['out of order', (cs) => [cs[0], cs[2], cs[1]]],
    ['missing start', (cs) => cs.slice(1)],
    ['total changes', (cs) => [cs[0], { ...cs[1], total: cs[1].total + 1 }, ...cs.slice(2)]],
    ['bad base64', (cs) => [cs[0], { ...cs[1], data: '@@@notbase64' }, ...cs.slice(2)]],
    ['total too large', (cs) => [{ ...cs[0], total: MAX_CHUNKS + 1 }]],
    ['total zero', (cs) => [{ ...cs[0], total: 0 }]],
    ['seq not an integer', (cs) => [{ ...cs[0], seq: '0' }]],
    ['not JSON', () => [{ id: 'bad', total: 1, seq: 0, data: Buffer.from('{nope').toString('base64') }]],
    ['not UTF-8', () => [{ id: 'bad', total: 1, seq: 0, data: Buffer.from([0x22, 0xff, 0x22]).toString('base64') }]],
  ];
  for (const [name, mangle] of cases) {
    const { r, got, logs } = setup();
    for (const c of mangle(chunk({ big: 'x'.repeat(300) }, 'h4', 100))) r.accept(c);
    assert.deepEqual(got, [], name);
    assert.ok(logs.length > 0, `${name}: nothing logged`);
    assert.match(logs[0], /native\.chunk: dropping/, name);
    for (const c of chunk({ ok: name }, 'h5', 4)) r.accept(c);
    assert.deepEqual(got, [{ ok: name }], `${name}: the next run was not delivered`);
  }
});

test('a new run starting mid-run drops the old one', () => {
  const { r, got, logs } = setup();
  const a = chunk({ a: 'a'.repeat(50) }, 'A', 10);
  const b = chunk({ b: 2 }, 'B', 4);
  r.accept(a[0]);
  r.accept(a[1]);
  for (const c of b) r.accept(c);
  assert.deepEqual(got, [{ b: 2 }]);
  assert.match(logs[0], /"A"/);
});

test('decodeBase64 refuses what is not standard base64', () => {
  assert.deepEqual([...decodeBase64('aGk=')], [104, 105]);
  assert.equal(decodeBase64('aGk'), null);
  assert.equal(decodeBase64('a-_b'), null);
  assert.equal(decodeBase64(12), null);
  assert.deepEqual([...decodeBase64('')], []);
});
