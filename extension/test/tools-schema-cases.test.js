// Every tool's inputSchema still accepts and refuses the arguments it did
// when testdata/schema-cases.json was written (by schema-cases.mjs, from the
// schemas before issue 32 shortened them): definitions may say less, but
// never accept more or less.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { validate } from '../sw/schema.js';
import core from '../tools/core.js';
import pageTools from '../tools/page.js';

const cases = JSON.parse(readFileSync(new URL('./testdata/schema-cases.json', import.meta.url), 'utf8'));

// unpack undoes schema-cases.mjs's {$repeat: [value, n]}.
function unpack(v) {
  if (Array.isArray(v)) return v.map(unpack);
  if (v && typeof v === 'object') {
    if (Object.hasOwn(v, '$repeat')) {
      const [item, n] = v.$repeat;
      const x = unpack(item);
      return typeof x === 'string' ? x.repeat(n) : Array.from({ length: n }, () => structuredClone(x));
    }
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, unpack(x)]));
  }
  return v;
}

const byName = new Map([...core, ...pageTools].map((t) => [t.name, t]));

test('every tool has its table of cases', () => {
  assert.deepEqual([...byName.keys()].sort(), Object.keys(cases).sort());
});

for (const [name, table] of Object.entries(cases)) {
  test(`${name}: accepts and refuses what it did`, () => {
    const tool = byName.get(name);
    assert.ok(tool, `${name} is registered`);
    for (const [packed, ok] of table) {
      const args = unpack(packed);
      const errs = validate(args, tool.inputSchema);
      assert.equal(errs.length === 0, ok, `${name} ${JSON.stringify(packed)}: ${ok ? 'refused' : 'accepted'} ${errs}`);
    }
  });
}
