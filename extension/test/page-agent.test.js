// The page agent's pure parts, run as Chrome runs them (classic scripts in
// one global scope): loading the files again keeps the element refs, the
// worker's call function and its token, the line budget of read_page, and
// form filling that reports each field and goes on past a failure. Also the
// worker-side helpers of form_input and read_page.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadPageAgent } from './page-scripts.js';
import { callAgent, PAGE_SCRIPTS } from '../content/agent.js';
import { fieldsOf, fillResult, describeField, inputSchema as formSchema } from '../tools/form_input.js';
import { composeSnapshot, truncationNote, DEFAULT_MAX_CHARS, inputSchema as readSchema } from '../tools/read_page.js';
import { validate } from '../sw/schema.js';

test('the page scripts load in order into one namespace, and again without losing refs', () => {
  assert.equal(PAGE_SCRIPTS[0], 'page/base.js', 'base.js makes the namespace the others add to');
  const P = loadPageAgent();
  for (const op of [
    'refOf',
    'elOf',
    'snapshot',
    'text',
    'find',
    'fill',
    'locate',
    'elementAt',
    'describe',
    'upload',
    'permissions',
    'scrollInfo',
  ]) {
    assert.equal(typeof P.ops[op], 'function', `op ${op}`);
  }
  const a = { isConnected: true };
  const [ref] = P.run('refOf', { elements: [a] }).value;
  const registry = globalThis.__browserBridgeAgent;
  const oldFind = P.ops.find;
  // Injected again (a new worker, an update): classic scripts in the same
  // world must not throw "already declared", and the refs stay.
  const again = loadPageAgent();
  assert.equal(again, P, 'the same namespace object');
  assert.notEqual(again.ops.find, oldFind, 'the code is replaced');
  assert.equal(globalThis.__browserBridgeAgent, registry, 'the ref registry is kept');
  assert.equal(again.run('elOf', { ref }).value, a);
  assert.deepEqual(again.run('refOf', { elements: [a] }).value, [ref]);
  assert.deepEqual(again.run('nope', {}), { ok: false, error: 'unknown page agent op nope' });
});

test('callAgent runs only code of its own token, and marks a fresh injection', () => {
  const P = loadPageAgent();
  delete P.token;
  assert.deepEqual(callAgent('t1', 'refOf', { elements: [] }, false), { missing: true }, 'files of an unknown worker');
  assert.deepEqual(callAgent('t1', 'refOf', { elements: [] }, true), { ok: true, value: [] });
  assert.equal(P.token, 't1');
  assert.deepEqual(callAgent('t1', 'refOf', { elements: [] }, false), { ok: true, value: [] });
  assert.deepEqual(
    callAgent('t2', 'refOf', { elements: [] }, false),
    { missing: true },
    'files of another worker start',
  );
  const saved = globalThis.__browserBridgePage;
  delete globalThis.__browserBridgePage;
  try {
    assert.deepEqual(callAgent('t1', 'refOf', {}, false), { missing: true }, 'a new document');
    assert.deepEqual(callAgent('t1', 'refOf', {}, true), { missing: true }, 'the injection did not land (navigated)');
  } finally {
    globalThis.__browserBridgePage = saved;
  }
});

test("refs given inside scratch (the warm-up) are forgotten, and the page's refs go on from the same number", () => {
  const P = loadPageAgent();
  const page = { isConnected: true };
  const sample = { isConnected: true };
  const [before] = P.run('refOf', { elements: [page] }).value;
  const inside = P.refs.scratch(() => P.refs.refOf(sample));
  assert.equal(P.refs.elOf(inside), null, 'the sample element has no ref after scratch');
  const [next] = P.run('refOf', { elements: [{ isConnected: true }] }).value;
  assert.equal(next, inside, 'the next element of the page gets the number the sample had');
  assert.equal(P.refs.elOf(before), page, 'refs given before are kept');
  assert.throws(
    () =>
      P.refs.scratch(() => {
        P.refs.refOf({ isConnected: true });
        throw new Error('boom');
      }),
    /boom/,
  );
  const [after] = P.run('refOf', { elements: [{ isConnected: true }] }).value;
  assert.equal(Number(after.slice(4)), Number(next.slice(4)) + 1, 'a failed scratch forgets its refs too');
});

test('the line budget keeps whole lines, cuts the one that does not fit, and takes nothing after', () => {
  const { lineBuffer } = loadPageAgent().util;
  const b = lineBuffer(100);
  assert.equal(b.push('a'.repeat(49)), true); // 50 with its newline
  assert.equal(b.push('b'.repeat(80)), false);
  assert.equal(b.truncated, true);
  assert.equal(b.push('c'), false, 'nothing after the cut');
  const text = b.text();
  assert.ok(text.length <= 100, `${text.length} characters`);
  assert.match(text, /^a{49}\nb+…$/);
  // Too little room for a useful part: the line is left out.
  const small = lineBuffer(60);
  small.push('a'.repeat(40));
  small.push('b'.repeat(50));
  assert.equal(small.text(), 'a'.repeat(40));
  // Never half a surrogate pair.
  const emoji = lineBuffer(60);
  emoji.push('😀'.repeat(40));
  assert.doesNotMatch(emoji.text(), /[\ud800-\udbff]…$/);
});

// A text input as far as form.js looks at one.
class FakeInput {
  constructor(id, attrs = {}) {
    this.id = id;
    this.tagName = 'INPUT';
    this.attrs = { type: 'text', ...attrs };
    this.events = [];
    this.v = '';
    this.isConnected = true;
    this.labels = [];
  }
  get value() {
    return this.v;
  }
  set value(v) {
    this.v = v;
  }
  getAttribute(n) {
    return this.attrs[n] ?? null;
  }
  hasAttribute(n) {
    return n in this.attrs;
  }
  closest() {
    return null;
  }
  scrollIntoView() {}
  focus() {}
  dispatchEvent(e) {
    this.events.push(e.type);
    return true;
  }
}

test('fill sets each field by ref or selector, reports each, and goes on past a failure', async () => {
  const P = loadPageAgent();
  const name = new FakeInput('name', { 'aria-label': 'Name' });
  const email = new FakeInput('email', { type: 'email', 'aria-label': 'Email' });
  const ro = new FakeInput('ro', { 'aria-label': 'Fixed' });
  ro.readOnly = true;
  const byId = { '#email': [email], '#ro': [ro], input: [name, email] };
  globalThis.HTMLInputElement = FakeInput;
  globalThis.document = {
    querySelectorAll(s) {
      if (s.includes('[[')) throw new SyntaxError(`'${s}' is not a valid selector`);
      return byId[s] || [];
    },
  };
  try {
    const [nameRef] = P.run('refOf', { elements: [name] }).value;
    const res = await P.run('fill', {
      fields: [
        { ref: nameRef, value: 'Ada' },
        { selector: '#missing', value: 'x' },
        { selector: 'a[[', value: 'x' },
        { ref: 'ref_987654', value: 'x' },
        { selector: '#ro', value: 'x' },
        { selector: '#email', value: 'ada@example.org' },
        { selector: 'input', value: 'first of two' },
      ],
    });
    assert.equal(res.ok, true, JSON.stringify(res));
    const r = res.value;
    assert.equal(r.length, 7, 'a result for each field, in order');
    assert.deepEqual(
      r.map((x) => x.ok),
      [true, false, false, false, false, true, true],
    );
    assert.deepEqual(
      r.map((x) => x.field),
      [nameRef, '#missing', 'a[[', 'ref_987654', '#ro', '#email', 'input'],
    );
    assert.equal(name.value, 'first of two');
    assert.equal(email.value, 'ada@example.org');
    assert.equal(ro.value, '', 'a read-only field is left alone');
    assert.deepEqual(email.events, ['input', 'change']);
    assert.match(r[1].error, /no element matches the selector #missing/);
    assert.match(r[2].error, /"a\[\[" is not a valid CSS selector/);
    assert.match(r[3].error, /element ref_987654 not found/);
    assert.match(r[4].error, /#ro is read-only/);
    assert.equal(r[0].before, '');
    assert.equal(r[0].value, 'Ada');
    assert.match(r[5].ref, /^ref_\d+$/, 'a field named by selector reports its ref');
    assert.equal(r[6].ref, nameRef, 'the same element keeps its ref');
    assert.match(r[6].note, /2 elements match input; this is the first/);
  } finally {
    delete globalThis.document;
    delete globalThis.HTMLInputElement;
  }
});

test('form_input takes one field by ref or selector, or several with fields', () => {
  assert.deepEqual(fieldsOf({ ref: 'ref_1', value: 'a' }), { fields: [{ ref: 'ref_1', value: 'a' }], single: true });
  assert.deepEqual(fieldsOf({ selector: '#q', value: false }), {
    fields: [{ selector: '#q', value: false }],
    single: true,
  });
  assert.deepEqual(
    fieldsOf({
      fields: [
        { ref: 'ref_1', value: 1 },
        { selector: '#q', value: 'b' },
      ],
    }),
    {
      fields: [
        { ref: 'ref_1', value: 1 },
        { selector: '#q', value: 'b' },
      ],
      single: false,
    },
  );
  assert.throws(
    () => fieldsOf({ ref: 'ref_1', value: 'a', fields: [{ ref: 'ref_2', value: 'b' }] }),
    /either fields, or ref/,
  );
  assert.throws(() => fieldsOf({ value: 'a' }), /the field: name it by ref or by selector/);
  assert.throws(() => fieldsOf({ ref: 'ref_1', selector: '#q', value: 'a' }), /by ref or by selector \(one of them\)/);
  assert.throws(
    () => fieldsOf({ fields: [{ ref: 'ref_1', value: 'a' }, { selector: '#q' }] }),
    /fields\[1\]: value is required/,
  );
  assert.throws(() => fieldsOf({ fields: [] }), /fields is empty/);
  assert.throws(() => fieldsOf({}), /name it by ref or by selector/);
});

test('form_input schema: fields, selector, and value needed with a ref or selector', () => {
  const ok = (args) => assert.deepEqual(validate(args, formSchema), [], JSON.stringify(args));
  const bad = (args, re) => assert.match(validate(args, formSchema).join('; '), re, JSON.stringify(args));
  ok({ ref: 'ref_1', value: 'x' });
  ok({ selector: '#email', value: 'x' });
  ok({
    fields: [
      { ref: 'ref_1', value: true },
      { selector: 'select', value: ['a', 'b'] },
    ],
    tabId: 3,
  });
  bad({ ref: 'ref_1' }, /value: is required with ref/);
  bad({ selector: '#a' }, /value: is required with selector/);
  bad({ fields: [] }, /fields: needs at least 1 items/);
  bad({ fields: [{ ref: 'ref_1' }] }, /fields\[0\]\.value: is required/);
  bad({ fields: [{ ref: 'ref_1', value: 'x', extra: 1 }] }, /fields\[0\]\.extra: is not a known argument/);
  assert.equal(formSchema.anyOf, undefined, 'no combinator at the top of a tool schema: clients refuse it');
});

test('form_input results: each field named, an error only when all failed', () => {
  const good = { field: 'ref_1', ok: true, ref: 'ref_1', role: 'textbox', name: 'Name', before: 'old', value: 'Ada' };
  const box = { field: '#agree', ok: true, ref: 'ref_2', role: 'checkbox', name: 'I agree', checked: true };
  const bad = { field: '#nope', ok: false, error: 'no element matches the selector #nope' };
  assert.equal(describeField(good), 'textbox "Name" [ref_1]: "Ada" (was "old").');
  assert.equal(describeField(box), 'checkbox "I agree" [ref_2]: checked.');
  assert.equal(describeField(bad), '#nope: not set: no element matches the selector #nope');

  const all = fillResult([good, box]);
  assert.equal(all.isError, undefined);
  assert.match(all.content[0].text, /^Set 2 fields:\n- textbox "Name"/);
  // The text is the whole result (Claude Code would hand a model a structured copy in its place).
  assert.deepEqual(all, {
    content: [
      {
        type: 'text',
        text: 'Set 2 fields:\n- textbox "Name" [ref_1]: "Ada" (was "old").\n- checkbox "I agree" [ref_2]: checked.',
      },
    ],
  });

  const some = fillResult([good, bad, box]);
  assert.equal(some.isError, undefined, 'one failure among successes is not a tool error');
  assert.match(some.content[0].text, /^Set 2 of 3 fields; 1 failed \(#nope\):/);
  assert.match(some.content[0].text, /- #nope: not set: no element matches/);

  const none = fillResult([bad, { field: 'ref_9', ok: false, error: 'element ref_9 not found' }]);
  assert.equal(none.isError, true);
  assert.match(
    none.content[0].text,
    /^None of the 2 fields was set:\n- #nope: not set: .*\n- ref_9: not set: element ref_9 not found$/,
  );
});

test('read_page: whole under the budget; past it cut to max_chars with a note on how to read the rest', () => {
  assert.equal(DEFAULT_MAX_CHARS, 50000);
  assert.equal(readSchema.properties.max_chars.default, 50000);
  const head = 'Page: P — http://x/\nTab 1.';
  const para = `- paragraph [ref_3]\n  - "${'w '.repeat(750).trim()}"`;
  const whole = composeSnapshot({ head, text: para, truncated: false, cut: null, maxChars: DEFAULT_MAX_CHARS });
  assert.deepEqual(whole, { text: `${head}\n\n${para}`, truncated: false });

  const cut = {
    chars: 900,
    inside: [
      { ref: 'ref_1', role: 'main', name: '' },
      { ref: 'ref_3', role: 'paragraph', name: '' },
    ],
  };
  const small = composeSnapshot({ head, text: para, truncated: true, cut, maxChars: 1000 });
  assert.equal(small.truncated, true);
  assert.ok(small.text.length <= 1000, `${small.text.length} characters`);
  assert.ok(small.text.startsWith(`${head}\n\n- paragraph [ref_3]\n  - "w w`), 'the outline up to the cut is kept');
  const note = small.text.slice(small.text.indexOf('… truncated'));
  assert.match(
    note,
    /^… truncated at max_chars 1000: the outline stops here inside main \[ref_1\] > paragraph \[ref_3\]\./,
  );
  assert.match(note, /read_page with a larger max_chars \(up to 500000\)/);
  assert.match(note, /read_page with ref "ref_3" for the rest of that element \(or "ref_1" for all of the main\)/);
  assert.match(
    note,
    /get_page_text for the plain text, all of it in pages \(its page parameter\) or only that part \(ref "ref_3"\)/,
  );

  // The page said whole, but head and outline together pass the budget: cut here too, and say so.
  const over = composeSnapshot({ head, text: 'x'.repeat(2000), truncated: false, cut: null, maxChars: 1500 });
  assert.equal(over.truncated, true);
  assert.ok(over.text.length <= 1500);
  assert.match(
    truncationNote({ maxChars: 500000, cut: null }),
    /^… truncated at max_chars 500000: the outline stops here\. For the rest: read_page with the ref of a subtree;/,
  );
});
