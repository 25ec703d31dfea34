// Server-sent events as both transports receive them: line endings, chunk
// boundaries, multi-line data, ids, retry, comments, and the legacy stream's
// endpoint event.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SSEParser, readEvents } from '../remote/sse.js';

function parse(chunks) {
  const events = [];
  const p = new SSEParser((ev) => events.push(ev));
  for (const c of chunks) p.push(c);
  p.end();
  return { events, parser: p };
}

test('SSEParser: the format, table-driven', () => {
  const cases = [
    ['LF', ['data: a\n\n'], [{ event: 'message', data: 'a', id: '' }]],
    ['CRLF', ['data: a\r\n\r\n'], [{ event: 'message', data: 'a', id: '' }]],
    ['CR', ['data: a\r\r'], [{ event: 'message', data: 'a', id: '' }]],
    ['CRLF split across chunks', ['data: a\r', '\n\r', '\n'], [{ event: 'message', data: 'a', id: '' }]],
    ['a line split across chunks', ['da', 'ta: he', 'llo\n', '\n'], [{ event: 'message', data: 'hello', id: '' }]],
    ['multi-line data', ['data: one\ndata: two\ndata\n\n'], [{ event: 'message', data: 'one\ntwo\n', id: '' }]],
    ['one space removed, not two', ['data:  x\ndata:y\n\n'], [{ event: 'message', data: ' x\ny', id: '' }]],
    [
      'event type',
      ['event: endpoint\ndata: /messages?sessionId=1\n\n'],
      [{ event: 'endpoint', data: '/messages?sessionId=1', id: '' }],
    ],
    [
      'comments and unknown fields are ignored',
      [': keep-alive\nfoo: bar\ndata: x\n\n'],
      [{ event: 'message', data: 'x', id: '' }],
    ],
    ['no data, no event', ['event: ping\n\n'], []],
    [
      'id persists across events',
      ['id: 7\ndata: a\n\ndata: b\n\n'],
      [
        { event: 'message', data: 'a', id: '7' },
        { event: 'message', data: 'b', id: '7' },
      ],
    ],
    ['an id with NUL is ignored', ['id: a\u0000b\ndata: x\n\n'], [{ event: 'message', data: 'x', id: '' }]],
    [
      'retry in digits only',
      ['retry: 500\ndata: x\n\nretry: soon\ndata: y\n\n'],
      [
        { event: 'message', data: 'x', id: '', retry: 500 },
        { event: 'message', data: 'y', id: '', retry: 500 },
      ],
    ],
    ['BOM is dropped', ['\ufeffdata: x\n\n'], [{ event: 'message', data: 'x', id: '' }]],
    ['unfinished event at the end is dropped', ['data: x\n\ndata: y\n'], [{ event: 'message', data: 'x', id: '' }]],
    [
      'event type resets after dispatch',
      ['event: a\ndata: 1\n\ndata: 2\n\n'],
      [
        { event: 'a', data: '1', id: '' },
        { event: 'message', data: '2', id: '' },
      ],
    ],
  ];
  for (const [name, chunks, want] of cases) assert.deepEqual(parse(chunks).events, want, name);
});

test('a priming event sets the last event id and retry; one with no data line is not dispatched', () => {
  const primed = parse(['id: prime-1\nretry: 250\ndata:\n\n']);
  assert.deepEqual(
    primed.events,
    [{ event: 'message', data: '', id: 'prime-1', retry: 250 }],
    'an empty data line is an event',
  );
  assert.equal(primed.parser.lastEventId, 'prime-1');
  assert.equal(primed.parser.retry, 250);
  const bare = parse(['id: prime-2\nretry: 100\n\n']);
  assert.deepEqual(bare.events, []);
  assert.equal(bare.parser.lastEventId, 'prime-2');
  assert.equal(bare.parser.retry, 100);
});

function streamOf(bytes, size) {
  let i = 0;
  return new ReadableStream({
    pull(c) {
      if (i >= bytes.length) return c.close();
      c.enqueue(bytes.slice(i, i + size));
      i += size;
    },
  });
}

test('readEvents decodes UTF-8 split between chunks and yields events in order', async () => {
  const text = 'event: message\ndata: {"text":"héllo wörld ✓"}\n\nid: 2\ndata: second\n\n';
  const bytes = new TextEncoder().encode(text);
  for (const size of [1, 2, 3, 7, bytes.length]) {
    const got = [];
    for await (const ev of readEvents(streamOf(bytes, size))) got.push(ev);
    assert.deepEqual(
      got,
      [
        { event: 'message', data: '{"text":"héllo wörld ✓"}', id: '' },
        { event: 'message', data: 'second', id: '2' },
      ],
      `chunks of ${size}`,
    );
  }
});

test('breaking out of readEvents cancels the body', async () => {
  let cancelled = false;
  const body = new ReadableStream({
    start(c) {
      c.enqueue(new TextEncoder().encode('data: 1\n\n'));
    },
    cancel() {
      cancelled = true;
    },
  });
  for await (const ev of readEvents(body)) {
    assert.equal(ev.data, '1');
    break;
  }
  assert.ok(cancelled);
});
