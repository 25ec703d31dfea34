// Pure helpers of the page tools: key chords, pagination, screenshot sizing
// and budget steps, image headers, capture filters and bounds, JS result
// rendering, benchmark statistics, shortcuts, element ref stability.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as cdp from '../sw/cdp.js';
import {
  fitScale,
  scaledSize,
  budgetSteps,
  fitToBudget,
  imageSize,
  imageToCss,
  putScreenshot,
  getScreenshot,
  readScreenshotResource,
} from '../sw/screenshot.js';
import { paginate, textHead } from '../tools/get_page_text.js';
import { needsWrap, renderResult, wrapAsFunction } from '../tools/javascript_tool.js';
import { summarize, nativeEchoBenchmark } from './overlay/tools/dev_utils_extra.js';
import { substitute, pickShortcut } from '../tools/shortcuts.js';
import { loadPageAgent } from './page-scripts.js';

// The page agent's op runner, as content/agent.js calls it in a page.
const pageAgent = (op, args) => loadPageAgent().run(op, args);

test('key chords parse with aliases, modifiers and punctuation', () => {
  let c = cdp.parseChord('ctrl+a');
  assert.equal(c.modifiers, 2);
  assert.deepEqual(c.modifierKeys, ['Control']);
  assert.equal(c.key.key, 'a');
  assert.equal(c.key.code, 'KeyA');
  assert.equal(c.key.keyCode, 65);
  c = cdp.parseChord('Enter');
  assert.equal(c.modifiers, 0);
  assert.deepEqual(c.key, { key: 'Enter', code: 'Enter', keyCode: 13, text: '\r' });
  c = cdp.parseChord('cmd+shift+k');
  assert.equal(c.modifiers, 4 | 8);
  assert.equal(c.key.key, 'K');
  assert.equal(cdp.parseChord('CTRL+Shift+Tab').key.key, 'Tab');
  assert.equal(cdp.parseChord('esc').key.key, 'Escape');
  assert.equal(cdp.parseChord('space').key.key, ' ');
  assert.equal(cdp.parseChord('pgdn').key.key, 'PageDown');
  assert.equal(cdp.parseChord('F5').key.keyCode, 116);
  assert.equal(cdp.parseChord('+').key.key, '+');
  const pp = cdp.parseChord('ctrl++');
  assert.equal(pp.modifiers, 2);
  assert.equal(pp.key.key, '+');
  assert.equal(cdp.parseChord('shift').key.key, 'Shift');
  assert.equal(cdp.parseChord('é').key.text, 'é');
  assert.throws(() => cdp.parseChord('ctrl+'), /malformed/);
  assert.throws(() => cdp.parseChord('a+b'), /not a modifier/);
  assert.throws(() => cdp.parseChord('Foo'), /unknown key/);
  assert.throws(() => cdp.parseChord(''), /empty/);
});

test('key sequences and the events of a chord', () => {
  const seq = cdp.parseKeySequence(' ctrl+a  Delete ');
  assert.equal(seq.length, 2);
  assert.throws(() => cdp.parseKeySequence('   '), /no keys/);
  const ev = cdp.chordEvents(cdp.parseChord('ctrl+a'));
  assert.deepEqual(
    ev.map((e) => `${e.type}:${e.key}:${e.modifiers}`),
    ['rawKeyDown:Control:2', 'rawKeyDown:a:2', 'keyUp:a:2', 'keyUp:Control:0'],
  );
  assert.deepEqual(ev[1].commands, ['selectAll']);
  assert.equal(ev[1].text, undefined, 'no text with ctrl');
  const enter = cdp.chordEvents(cdp.parseChord('Enter'));
  assert.equal(enter[0].type, 'keyDown');
  assert.equal(enter[0].text, '\r');
  const shiftA = cdp.chordEvents(cdp.parseChord('shift+a'));
  assert.equal(shiftA[1].text, 'A');
  const arrow = cdp.chordEvents(cdp.parseChord('ArrowDown'));
  assert.equal(arrow[0].type, 'rawKeyDown');
  assert.equal(arrow[0].windowsVirtualKeyCode, 40);
  const redo = cdp.chordEvents(cdp.parseChord('ctrl+shift+z'));
  assert.deepEqual(redo.find((e) => e.key === 'Z').commands, ['redo']);
});

test('pagination math', () => {
  const text = 'x'.repeat(45);
  let p = paginate(text, { page: 1, pageSize: 20 });
  assert.deepEqual([p.offset, p.end, p.page, p.totalPages, p.hasMore], [0, 20, 1, 3, true]);
  p = paginate(text, { page: 3, pageSize: 20 });
  assert.deepEqual([p.offset, p.end, p.text.length, p.hasMore], [40, 45, 5, false]);
  p = paginate(text, { page: 4, pageSize: 20 });
  assert.equal(p.text, '');
  p = paginate(text, { offset: 10, limit: 5 });
  assert.deepEqual([p.offset, p.end, p.text.length], [10, 15, 5]);
  p = paginate(text, { offset: 100 });
  assert.equal(p.text, '');
  p = paginate('', {});
  assert.deepEqual([p.total, p.totalPages, p.hasMore], [0, 1, false]);
  p = paginate(text, {});
  assert.equal(p.text.length, 45);
  // A surrogate pair is never split.
  const emoji = 'ab😀cd';
  p = paginate(emoji, { page: 1, pageSize: 3 });
  assert.equal(p.text, 'ab');
  const p2 = paginate(emoji, { offset: p.end, limit: 3 });
  assert.equal(p2.text.startsWith('😀'), true);
});

test("get_page_text's head: where the text is from, what it leaves out and how to get it, which characters", async (t) => {
  const url = 'https://news.example/2026/locks?ref=home';
  const origin = 'https://news.example';
  const one = paginate('x'.repeat(5198), {});
  const first = paginate('x'.repeat(28430), { page: 1 });
  const frame = [
    { kind: 'banner', chars: 300 },
    { kind: 'navigation', chars: 120 },
    { kind: 'complementary', chars: 400 },
    { kind: 'navigation', chars: 40 },
    { kind: 'contentinfo', chars: 200 },
  ];
  const cases = [
    {
      name: 'the article of a page with its frame left out, in one page',
      r: { url, origin, source: 'article', leftOut: frame },
      p: one,
      want:
        'Origin: https://news.example, /2026/locks?ref=home\n' +
        'Text of article: 5198 characters. Left out: header, navigation, sidebar, footer (1060 characters; whole_page: true for all).',
    },
    {
      name: 'a page without a main part: the body, nothing said left out',
      r: { url, origin, source: 'body', leftOut: [] },
      p: one,
      want: 'Origin: https://news.example, /2026/locks?ref=home\nText of body: 5198 characters.',
    },
    {
      name: 'the first of two pages says which characters and pages',
      r: {
        url: 'https://shop.example/',
        origin: 'https://shop.example',
        source: 'main',
        leftOut: [{ kind: 'other', chars: 9 }],
      },
      p: first,
      want:
        'Origin: https://shop.example\n' +
        'Text of main: characters 0–20000 of 28430, page 1 of 2. Left out: other text (9 characters; whole_page: true for all).',
    },
    {
      name: 'an opaque origin keeps the whole address',
      r: { url: 'data:text/html,hi', origin: 'null', source: 'body' },
      p: paginate('hi', {}),
      want: 'Origin: null, data:text/html,hi\nText of body: 2 characters.',
    },
    {
      name: 'hidden text left out is said after the origin',
      r: { url, origin, source: 'ref_7' },
      p: one,
      note: '2 hidden elements left out (display:none 2); get_page_text with include_hidden: true shows them, marked.',
      want:
        'Origin: https://news.example, /2026/locks?ref=home. 2 hidden elements left out (display:none 2); get_page_text with include_hidden: true shows them, marked.\n' +
        'Text of ref_7: 5198 characters.',
    },
  ];
  for (const c of cases) {
    await t.test(c.name, () => assert.equal(textHead(c.r, c.p, c.note || ''), c.want));
  }
});

test('screenshot scaling to the long edge', () => {
  assert.equal(fitScale(1280, 800, 1568), 1);
  assert.equal(fitScale(3136, 1000, 1568), 0.5);
  assert.equal(fitScale(1000, 3136, 1568), 0.5);
  assert.equal(fitScale(5000, 4000, 0), 1);
  assert.deepEqual(scaledSize(2560, 1440, fitScale(2560, 1440, 1568)), { width: 1568, height: 882 });
  assert.deepEqual(scaledSize(1, 1, 0.01), { width: 1, height: 1 });
  assert.deepEqual(imageToCss([784, 441], { scale: 0.6125 }), [1280, 720]);
  assert.deepEqual(imageToCss([10, 20], null), [10, 20]);
});

test('size budget steps: png, then jpeg qualities, then smaller', () => {
  const s = budgetSteps('png');
  assert.deepEqual(s[0], { format: 'png', scaleFactor: 1 });
  assert.deepEqual(
    s.slice(1, 5).map((x) => x.quality),
    [85, 70, 55, 40],
  );
  assert.ok(s.slice(5).every((x) => x.format === 'jpeg' && x.quality === 40 && x.scaleFactor < 1));
  const w = budgetSteps('webp', 60);
  assert.deepEqual(w.map((x) => x.quality).slice(0, 3), [60, 55, 40]);
  assert.ok(w.every((x) => x.format === 'webp'));
  const k = budgetSteps('png', undefined, { keepFormat: true });
  assert.ok(k.every((x) => x.format === 'png'));
});

test('fitToBudget stops at the first attempt that fits', async () => {
  const seen = [];
  const capture = async (step) => {
    seen.push(step);
    const size = step.format === 'png' ? 3000 : step.quality * 20 * step.scaleFactor;
    return { data: 'A'.repeat(Math.round(size)) };
  };
  let r = await fitToBudget(capture, { format: 'png', budget: 1200 });
  assert.equal(r.step.format, 'jpeg');
  assert.equal(r.step.quality, 55);
  assert.equal(r.overBudget, false);
  assert.equal(r.attempts, 4);
  r = await fitToBudget(capture, { format: 'png', budget: 10 });
  assert.equal(r.overBudget, true);
  assert.equal(r.attempts, budgetSteps('png').length);
  r = await fitToBudget(capture, { format: 'png', budget: 0 });
  assert.equal(r.attempts, 1);
  assert.ok(seen.length > 0);
});

test('image headers give the size', () => {
  const png = new Uint8Array(33);
  png.set([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52]);
  new DataView(png.buffer).setUint32(16, 1568);
  new DataView(png.buffer).setUint32(20, 882);
  const b64 = Buffer.from(png).toString('base64');
  assert.deepEqual(imageSize(b64), { format: 'png', width: 1568, height: 882 });
  const jpeg = Uint8Array.from([
    0xff, 0xd8, 0xff, 0xe0, 0, 4, 0, 0, 0xff, 0xc0, 0, 11, 8, 0x01, 0x2c, 0x02, 0x58, 3, 0, 0, 0, 0,
  ]);
  assert.deepEqual(imageSize(Buffer.from(jpeg).toString('base64')), { format: 'jpeg', width: 600, height: 300 });
  assert.equal(imageSize(Buffer.from('hello world!').toString('base64')), null);
});

test('screenshot store and resource reading', () => {
  const id = putScreenshot({ data: 'QUJD', mimeType: 'image/png', width: 1, height: 1, tabId: 1 });
  assert.equal(getScreenshot(id).data, 'QUJD');
  const r = readScreenshotResource(`browserbridge://screenshots/${id}`);
  assert.deepEqual(r.contents[0], { uri: `browserbridge://screenshots/${id}`, mimeType: 'image/png', blob: 'QUJD' });
  assert.equal(readScreenshotResource('browserbridge://screenshots/nope'), null);
});

test('capture filters: console levels and patterns, network status forms', async () => {
  const tab = 901;
  cdp.handleEvent(tab, 'Runtime.consoleAPICalled', {
    type: 'log',
    args: [
      { type: 'string', value: 'hello' },
      { type: 'number', value: 3 },
    ],
    timestamp: 1,
  });
  cdp.handleEvent(tab, 'Runtime.consoleAPICalled', {
    type: 'warning',
    args: [{ type: 'string', value: 'careful' }],
    timestamp: 2,
  });
  cdp.handleEvent(tab, 'Runtime.consoleAPICalled', {
    type: 'error',
    args: [{ type: 'string', value: 'boom' }],
    timestamp: 3,
  });
  cdp.handleEvent(tab, 'Runtime.exceptionThrown', {
    timestamp: 4,
    exceptionDetails: { text: 'Uncaught', exception: { description: 'TypeError: x is undefined' } },
  });
  const r = await cdp.readConsole(tab, {});
  assert.equal(r.entries.length, 4);
  assert.equal(r.entries[0].text, 'hello 3');
  assert.equal((await cdp.readConsole(tab, { level: 'error' })).entries.length, 2);
  assert.equal((await cdp.readConsole(tab, { level: 'warning+' })).entries.length, 3);
  assert.equal((await cdp.readConsole(tab, { pattern: 'TYPEERROR' })).entries.length, 1);
  assert.equal((await cdp.readConsole(tab, { pattern: '([' })).entries.length, 0, 'a bad regex is a substring match');
  assert.equal((await cdp.readConsole(tab, { limit: 1 })).entries[0].text, 'TypeError: x is undefined');
  await cdp.readConsole(tab, { clear: true });
  assert.equal((await cdp.readConsole(tab, {})).entries.length, 0);

  const req = (id, url, method = 'GET') =>
    cdp.handleEvent(tab, 'Network.requestWillBeSent', {
      requestId: id,
      request: { url, method },
      type: 'Fetch',
      timestamp: 10,
      wallTime: 1700000000,
    });
  req('1', 'http://t/ok');
  cdp.handleEvent(tab, 'Network.responseReceived', {
    requestId: '1',
    response: { status: 200, statusText: 'OK', mimeType: 'text/plain' },
  });
  cdp.handleEvent(tab, 'Network.loadingFinished', { requestId: '1', timestamp: 10.25, encodedDataLength: 12 });
  req('2', 'http://t/missing', 'POST');
  cdp.handleEvent(tab, 'Network.responseReceived', { requestId: '2', response: { status: 404 } });
  req('3', 'http://t/down');
  cdp.handleEvent(tab, 'Network.loadingFailed', { requestId: '3', errorText: 'net::ERR_CONNECTION_REFUSED' });
  req('4', 'http://t/slow');
  const net = await cdp.readNetwork(tab, {});
  assert.equal(net.entries.length, 4);
  assert.equal(net.entries[0].durationMs, 250);
  assert.equal(net.entries[0].started, undefined);
  const n = async (f) => (await cdp.readNetwork(tab, f)).entries.map((e) => e.url.split('/').pop());
  assert.deepEqual(await n({ status: '4xx' }), ['missing']);
  assert.deepEqual(await n({ status: 404 }), ['missing']);
  assert.deepEqual(await n({ status: '>=400' }), ['missing']);
  assert.deepEqual(await n({ status: 'failed' }), ['missing', 'down']);
  assert.deepEqual(await n({ status: 'pending' }), ['slow']);
  assert.deepEqual(await n({ status: '200-299' }), ['ok']);
  assert.deepEqual(await n({ method: 'post' }), ['missing']);
  assert.deepEqual(await n({ urlPattern: 'sl.w' }), ['slow']);
  cdp.forgetTab(tab);
});

test('capture buffers are bounded', async () => {
  const tab = 902;
  for (let i = 0; i < cdp.BUFFER_LIMIT + 50; i++) {
    cdp.handleEvent(tab, 'Runtime.consoleAPICalled', { type: 'log', args: [{ type: 'string', value: `m${i}` }] });
    cdp.handleEvent(tab, 'Network.requestWillBeSent', {
      requestId: `r${i}`,
      request: { url: `http://t/${i}`, method: 'GET' },
    });
  }
  const c = await cdp.readConsole(tab, { limit: 0 });
  assert.equal(c.entries.length, cdp.BUFFER_LIMIT);
  assert.equal(c.dropped, 50);
  assert.equal(c.entries[0].text, 'm50');
  const n = await cdp.readNetwork(tab, { limit: 0 });
  assert.equal(n.entries.length, cdp.BUFFER_LIMIT);
  assert.equal(n.dropped, 50);
  cdp.forgetTab(tab);
});

test('javascript_tool helpers', () => {
  assert.ok(needsWrap({ text: 'Uncaught', exception: { description: 'SyntaxError: Illegal return statement' } }));
  assert.ok(!needsWrap({ text: 'Uncaught', exception: { description: 'ReferenceError: x is not defined' } }));
  assert.match(wrapAsFunction('return 1'), /^\(async \(\) => \{\nreturn 1\n\}\)\(\)$/);
  assert.equal(renderResult({ type: 'undefined' }), 'undefined');
  assert.equal(renderResult({ type: 'string', value: 'a"b' }), '"a\\"b"');
  assert.equal(renderResult({ type: 'number', unserializableValue: 'NaN' }), 'NaN');
  assert.equal(renderResult({ type: 'object', value: { a: [1] } }), '{\n  "a": [\n    1\n  ]\n}');
  assert.equal(renderResult({ type: 'object', subtype: 'node', description: 'div#x' }), 'div#x');
});

test('benchmark statistics', () => {
  assert.deepEqual(summarize([]), { count: 0 });
  const s = summarize([5, 1, 3, 2, 4]);
  assert.equal(s.median, 3);
  assert.equal(s.min, 1);
  assert.equal(s.max, 5);
  assert.equal(s.p95, 5);
  assert.equal(summarize([1, 2, 3, 4]).median, 2.5);
  const hundred = summarize(Array.from({ length: 100 }, (_, i) => i + 1));
  assert.equal(hundred.p95, 95);
  assert.equal(hundred.p99, 99);
});

function fakeEchoPort({ dieAfter = Infinity } = {}) {
  const listeners = { msg: [], disc: [] };
  let n = 0;
  return {
    sent: [],
    onMessage: { addListener: (f) => listeners.msg.push(f) },
    onDisconnect: { addListener: (f) => listeners.disc.push(f) },
    postMessage(m) {
      this.sent.push(m);
      if (++n > dieAfter) {
        setTimeout(() => listeners.disc.forEach((f) => f()));
        return;
      }
      setTimeout(() => listeners.msg.forEach((f) => f(m)));
    },
    disconnect() {},
  };
}

test('native echo benchmark times round trips and reports a dead host', async () => {
  const port = fakeEchoPort();
  const r = await nativeEchoBenchmark({
    host: 'com.browserbridge.echo',
    count: 10,
    size: 100,
    warmup: 2,
    connect: () => port,
  });
  assert.equal(r.count, 10);
  assert.equal(port.sent.length, 12);
  assert.equal(port.sent[0].payload.length, 100);
  assert.ok(r.median >= 0 && r.p95 >= r.median);
  await assert.rejects(
    nativeEchoBenchmark({ host: 'h', count: 5, size: 1, warmup: 0, connect: () => fakeEchoPort({ dieAfter: 2 }) }),
    /native host h/,
  );
});

test('shortcut lookup and placeholders', () => {
  const list = [
    { id: 's1', name: 'Log in', steps: [] },
    { id: 's2', name: 'report', steps: [] },
  ];
  assert.equal(pickShortcut(list, 's2').name, 'report');
  assert.equal(pickShortcut(list, 'log in').id, 's1');
  assert.equal(pickShortcut(list, 'nope'), null);
  assert.deepEqual(
    substitute(
      { url: 'https://{{host}}/x', n: 3, list: ['{{ user }}', '{{missing}}'] },
      { host: 'h.test', user: 'me' },
    ),
    { url: 'https://h.test/x', n: 3, list: ['me', '{{missing}}'] },
  );
});

test('element refs are stable per element and never reused', () => {
  const a = { isConnected: true },
    b = { isConnected: true },
    c = { isConnected: true };
  const first = pageAgent('refOf', { elements: [a, b] });
  assert.equal(first.ok, true);
  const again = pageAgent('refOf', { elements: [b, a, c] });
  assert.deepEqual(again.value.slice(0, 2), [first.value[1], first.value[0]]);
  assert.notEqual(again.value[2], first.value[0]);
  assert.notEqual(again.value[2], first.value[1]);
  for (const r of again.value) assert.match(r, /^ref_\d+$/);
  assert.equal(pageAgent('elOf', { ref: first.value[0] }).value, a);
  c.isConnected = false;
  assert.equal(pageAgent('elOf', { ref: again.value[2] }).value, null, 'a detached element is not found');
  assert.equal(pageAgent('elOf', { ref: 'ref_999999' }).value, null);
  const err = pageAgent('locate', { ref: 'ref_999999' });
  assert.equal(err.ok, false);
  assert.match(err.error, /not found/);
});
