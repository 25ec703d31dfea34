// read_page's line printing: what a line leaves out because another line, or
// the page's own text, already says it (content/page/snapshot.js's
// formatting helpers and read_page's head). The walk over a real page is
// tested in bridge/internal/e2e (pageset_test.go, page_agent_test.go).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadPageAgent } from './page-scripts.js';
import { originLine } from '../tools/read_page.js';

const { addressUpTo, elideRepeated, joinLinkRuns, restatesAddress } = loadPageAgent().outline;

test('a link address is cut after the part its visible address names', () => {
  for (const [name, href, cite, want] of [
    [
      'a redirect whose path names the destination: its tracking query goes',
      '/visit/harrow-canal.example/notices/winter-stoppages-2026?q=canal+lock+maintenance&pos=3&sig=7f3a9c03e41b',
      'https://harrow-canal.example › notices › winter-stoppages-2026',
      '/visit/harrow-canal.example/notices/winter-stoppages-2026…',
    ],
    [
      'a cite of the host alone keeps the whole path',
      'https://www.example.org/docs/guide/install?utm_source=news&utm_medium=email',
      'example.org',
      'https://www.example.org/docs/guide/install…',
    ],
    [
      'a redirect holding the destination in a parameter: up to the end of that parameter',
      '//duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.org%2Fdocs%2Fpage&rut=4f2a9c',
      'example.org › docs',
      '//duckduckgo.com/l/?uddg=https://example.org/docs/page…',
    ],
    [
      'nothing after the named part: as it is',
      'https://example.org/docs',
      'example.org › docs',
      'https://example.org/docs',
    ],
    [
      'a cite the address does not hold: as it is',
      '/search?q=canal+lock&start=10',
      'https://other.example › page',
      '/search?q=canal+lock&start=10',
    ],
  ]) {
    assert.equal(addressUpTo(href, cite), want, name);
  }
});

test('only a text that is an address in the link restates it', () => {
  const href = 'http://127.0.0.1:8000/visit/canal-trust.example/get-involved/lock-keepers?q=x&pos=5';
  assert.ok(restatesAddress('https://canal-trust.example › get-involved › lock-keepers', href));
  assert.ok(!restatesAddress('https://harrow-marine.example', '#ad-1'), 'an ad whose cite is not in its href');
  assert.ok(!restatesAddress('› Harbour redesign', href), 'a breadcrumb is no address');
});

test('a control name repeating the last control name says the repetition as an ellipsis', () => {
  const title = 'Lock maintenance: winter stoppages on the Harrow Canal';
  for (const [name, prev, want, why] of [
    [`About this result: ${title}`, title, 'About this result: …', 'a suffix'],
    [`${title} (PDF, 2 pages)`, title, '… (PDF, 2 pages)', 'a prefix'],
    ['Reply', 'Reply', 'Reply', 'equal names are each said whole'],
    ['Edit Settings', 'Settings', 'Edit Settings', 'a short name is read as easily as "…"'],
    [`${title}.`, title, `${title}.`, 'nothing but punctuation would be left'],
    [`Share ${title} now`, title, `Share ${title} now`, 'repeated in the middle: said whole'],
    [`About: ${title}…`, `${title}…`, `About: ${title}…`, 'a name cut to its length is no whole name'],
    ['Save changes', '', 'Save changes', 'no control before it'],
  ]) {
    assert.equal(elideRepeated(name, prev), want, why);
  }
});

test("read_page's head names the origin only where the address does not", () => {
  assert.equal(originLine('https://example.org/a?b', 'https://example.org', ''), '');
  assert.equal(
    originLine('https://example.org/a', 'https://example.org', '2 hidden elements left out (display 2).'),
    '2 hidden elements left out (display 2).\n',
  );
  assert.equal(originLine('about:blank', 'https://opener.example', ''), 'Origin: https://opener.example\n');
  assert.equal(originLine('data:text/html,hi', 'null', 'x.'), 'Origin: null. x.\n');
});

test('side-by-side links with nothing else shown share a line, each with its ref', () => {
  const pages = ['- navigation "Pages" [ref_65]', '  - "1"'];
  for (let n = 2; n <= 10; n++) pages.push(`  - link "${n}" [ref_${64 + n}]`);
  pages.push('  - link "Next" [ref_75]', '- contentinfo [ref_76]');
  assert.deepEqual(joinLinkRuns(pages), [
    '- navigation "Pages" [ref_65]',
    '  - "1"',
    '  - link "2" [ref_66], "3" [ref_67], "4" [ref_68], "5" [ref_69], "6" [ref_70], "7" [ref_71]',
    '  - link "8" [ref_72], "9" [ref_73], "10" [ref_74], "Next" [ref_75]',
    '- contentinfo [ref_76]',
  ]);
  for (const [lines, why] of [
    [['- link "a" [ref_1]', '- "text"', '- link "b" [ref_2]'], 'text between ends the run'],
    [['- link "a" [ref_1]', '  - link "b" [ref_2]'], 'a link at another indent is no sibling'],
    [['- link "a" [ref_1]', '  - img "Logo" [ref_2]', '- link "b" [ref_3]'], 'a link with a line under it stays alone'],
    [['- link "a" [href=/a] [ref_1]', '- link "b" [href=/b] [ref_2]'], 'an address shown keeps its line'],
    [['- link "a" [h3] [ref_1]', '- link "b" [ref_2] [hidden: display]'], 'a mark keeps its line'],
    [['- button "a" [ref_1]', '- button "b" [ref_2]'], 'buttons are not joined'],
    [['- "link \\"a\\" [ref_1]"', '- link "b" [ref_2]'], 'page text that looks like a link is text'],
  ]) {
    assert.deepEqual(joinLinkRuns(lines), lines, why);
  }
  assert.deepEqual(
    joinLinkRuns(['- link "Say \\"hi\\"" [ref_1]', '- link "Bye" [ref_2]']),
    ['- link "Say \\"hi\\"" [ref_1], "Bye" [ref_2]'],
    'an escaped quote in a name',
  );
});
