// The pure parts of what an agent may read (content/page/hidden.js): which
// styles hide text from the person, and the scrubbing of password values
// from results; and the worker's side: the secrets opt-in, the hidden note.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadPageAgent } from './page-scripts.js';
import { normalisePolicy, secretsAllowed } from '../sw/policy.js';
import { hiddenNote } from '../tools/read_page.js';

const H = loadPageAgent().hidden;
const shown = {
  display: 'block',
  visibility: 'visible',
  opacity: '1',
  fontSize: '16px',
  overflow: 'visible',
  textIndent: '0px',
};
const box = { width: 100, height: 20, left: 10, top: 10, right: 110, bottom: 30 };
const page = { width: 1280 };

test('styles that hide an element from the person, each named', () => {
  const cases = [
    ['shown', {}, {}, ''],
    ['display none', { display: 'none' }, {}, 'display:none'],
    ['visibility hidden', { visibility: 'hidden' }, {}, 'visibility:hidden'],
    ['opacity 0', { opacity: '0' }, {}, 'opacity:0'],
    ['clip rect 0', { clip: 'rect(0px, 0px, 0px, 0px)', position: 'absolute' }, {}, 'clipped'],
    ['clip-path inset 50%', { clipPath: 'inset(50%)' }, {}, 'clipped'],
    [
      '1x1 with overflow hidden (sr-only)',
      { overflow: 'hidden' },
      { width: 1, height: 1, right: 11, bottom: 11 },
      'clipped',
    ],
    ['zero size, no children', {}, { width: 0, height: 0, right: 10, bottom: 10 }, 'zero-size'],
    ['zero height clipping its children', { overflow: 'hidden' }, { height: 0, bottom: 10 }, 'zero-size'],
    ['font size 0', { fontSize: '0px' }, {}, 'font-size:0'],
    ['text-indent -9999px', { textIndent: '-9999px' }, {}, 'off-screen'],
    ['left of the page', {}, { left: -10010, right: -9910 }, 'off-screen'],
    ['above the page', {}, { top: -500, bottom: -480 }, 'off-screen'],
    ['below the fold is not hidden', {}, { top: 5000, bottom: 5020 }, ''],
  ];
  for (const [name, style, b, want] of cases) {
    assert.equal(H.reasonFromStyle({ ...shown, ...style }, { ...box, ...b }, page, false), want, name);
  }
  assert.equal(
    H.reasonFromStyle(shown, { ...box, width: 0, height: 0 }, page, true),
    '',
    'a zero-size wrapper still shows its children',
  );
});

test('the rules read only the style properties they need (a read costs about 1 µs an element)', () => {
  const reads = (opts, b = box) => {
    const seen = [];
    const s = new Proxy(shown, { get: (o, k) => (seen.push(k), o[k]) });
    H.reasonFromStyle(s, b, page, true, opts);
    return seen.sort();
  };
  assert.deepEqual(reads({ checked: true, text: false }), ['clip', 'clipPath'], 'a wrapper of normal size');
  assert.deepEqual(reads({ checked: true, text: true }), ['clip', 'clipPath', 'fontSize', 'textIndent'], 'with text');
  assert.deepEqual(
    reads({ checked: true, text: false }, { ...box, height: 1, bottom: 11 }),
    ['clip', 'clipPath', 'overflow'],
    'overflow only for a box of 1px or less',
  );
  assert.ok(reads({}).includes('display'), 'unchecked: display, visibility and opacity too');
  const inherited = { ...shown, fontSize: '0px', textIndent: '-9999px' };
  assert.equal(H.reasonFromStyle(inherited, box, page, true, { text: false }), '', 'a wrapper without text of its own');
  assert.equal(H.reasonFromStyle(inherited, box, page, true, { text: true }), 'font-size:0', 'its text, inheriting');
});

test('text the colour of its background, or transparent, is unreadable', () => {
  const white = H.parseColour('rgb(255, 255, 255)');
  assert.deepEqual(H.parseColour('rgba(1, 2, 3, 0.5)'), [1, 2, 3, 0.5]);
  assert.equal(H.parseColour('transparent'), null);
  assert.equal(H.unreadable(H.parseColour('rgb(254, 254, 254)'), white), true);
  assert.equal(H.unreadable(H.parseColour('rgba(0, 0, 0, 0)'), white), true);
  assert.equal(H.unreadable(H.parseColour('rgb(0, 0, 0)'), white), false);
  assert.equal(H.unreadable(H.parseColour('rgb(250, 250, 250)'), null), false, 'an image may be behind it');
});

test('password values are taken out of every string of a result, keys included', () => {
  const secrets = ['hunter2-secret', 'abc'];
  const v = { text: 'x hunter2-secret y', list: ['hunter2-secret'], n: 3, ['k-hunter2-secret']: 'abc' };
  assert.deepEqual(H.redactDeep(v, secrets), {
    text: `x ${H.SECRET_MARK} y`,
    list: [H.SECRET_MARK],
    n: 3,
    [`k-${H.SECRET_MARK}`]: 'abc', // shorter than MIN_SCAN: masked in its field only
  });
  assert.equal(H.redactDeep('same', []), 'same');
});

test("typing secrets needs the site rule's opt-in", () => {
  const p = normalisePolicy({
    sites: [
      { pattern: 'login.example', secrets: true },
      { pattern: 'other.example', secrets: 'yes' },
    ],
  });
  assert.equal(secretsAllowed(p, 'https://login.example/signin'), true);
  assert.equal(secretsAllowed(p, 'https://other.example/'), false, 'only true opts in');
  assert.equal(secretsAllowed(p, 'https://unlisted.example/'), false, 'no rule, no secrets');
});

test('the hidden note says how much was left out and how to see it', () => {
  assert.equal(hiddenNote({ count: 0, reasons: {} }, false, 'read_page'), '');
  assert.equal(
    hiddenNote({ count: 2, reasons: { 'display:none': 1, 'aria-hidden': 1 } }, false, 'get_page_text'),
    '2 hidden elements left out (display:none 1, aria-hidden 1); get_page_text with include_hidden: true shows them, marked.',
  );
  assert.match(hiddenNote({ count: 1, reasons: { clipped: 1 } }, true, 'read_page'), /^1 hidden element shown, marked/);
});
