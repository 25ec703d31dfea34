// The audit trail's pure parts (sw/audit.js): what is redacted, the bounds,
// the filter and the export; and the batched write through fake storage.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeChrome } from './fake-chrome.js';
import { redactArgs, bound, matches, toJsonLines, record, flush, configure } from '../sw/audit.js';
import * as store from '../sw/store.js';

test('typed text, keys and form values are redacted; the rest is kept, cut', () => {
  assert.deepEqual(redactArgs('computer', { action: 'type', text: 'hunter2', tabId: 3 }), {
    action: 'type',
    text: '[redacted: 7 characters]',
    tabId: 3,
  });
  assert.deepEqual(redactArgs('computer', { action: 'key', text: 'ctrl+a' }).text, '[redacted: 6 characters]');
  assert.deepEqual(redactArgs('form_input', { selector: '#pw', value: 'secret' }), {
    selector: '#pw',
    value: '[redacted: 6 characters]',
  });
  assert.deepEqual(redactArgs('form_input', { fields: [{ ref: 'ref_1', value: 'abc' }] }), {
    fields: [{ ref: 'ref_1', value: '[redacted: 3 characters]' }],
  });
  assert.equal(redactArgs('navigate', { url: 'x'.repeat(500) }).url.length, 200);
  assert.deepEqual(redactArgs('type', { text: 'abcd' }), { text: '[redacted: 4 characters]' }, 'the relay method');
});

test('the bounds keep the newest entries, none older than the days', () => {
  const now = 100 * 86_400_000;
  const e = (days, n) => ({ at: now - days * 86_400_000, n });
  const list = [e(9, 0), e(6, 1), e(3, 2), e(1, 3), e(0, 4)];
  assert.deepEqual(
    bound(list, { maxEntries: 10, maxDays: 7, now }).map((x) => x.n),
    [1, 2, 3, 4],
  );
  assert.deepEqual(
    bound(list, { maxEntries: 2, maxDays: 7, now }).map((x) => x.n),
    [3, 4],
  );
});

test('the filter and the JSON Lines export', () => {
  const a = { client: 'x', tool: 'navigate', decision: 'allowed', site: 'https://a.example' };
  const b = { client: 'y', tool: 'find', decision: 'blocked', site: 'https://b.example' };
  assert.equal(matches(a, { client: 'x' }), true);
  assert.equal(matches(b, { client: 'x' }), false);
  assert.equal(matches(b, { decision: 'blocked', text: 'B.EXAMPLE' }), true);
  const lines = toJsonLines([a, b]);
  assert.ok(lines.endsWith('\n'));
  assert.deepEqual(
    lines
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l)),
    [a, b],
  );
});

test('entries are written in batches, within the bounds, and told to the bridge', async () => {
  installFakeChrome();
  const heard = [];
  configure({ maxEntries: 10, maxDays: 7, notify: (e) => heard.push(e) });
  await store.set('local', store.LOCAL.audit, [{ at: Date.now() - 8 * 86_400_000, tool: 'old' }]);
  for (let i = 0; i < 12; i++) record({ at: Date.now(), tool: 'computer', args: { action: 'type', text: `t${i}` } });
  assert.equal(heard.length, 12, 'the bridge hears of each at once');
  assert.equal((await store.get('local', store.LOCAL.audit)).length, 1, 'nothing written yet: batched');
  await flush();
  const kept = await store.get('local', store.LOCAL.audit);
  assert.equal(kept.length, 10);
  assert.equal(kept[0].args.text, '[redacted: 2 characters]');
  assert.ok(!kept.some((e) => e.tool === 'old'), 'older than the days: gone');
});
