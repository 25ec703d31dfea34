// Generates testdata/schema-cases.json: for every tool, argument objects and
// whether the tool's inputSchema accepted them when the file was written.
// tools-schema-cases.test.js holds today's schemas to those verdicts, so a
// definition may be shortened but never loosened (or tightened) by accident.
// Regenerate only for a change meant to alter what a tool accepts, and say so
// in the commit:
//   node --import ./test/fake-chrome.js test/schema-cases.mjs > test/testdata/schema-cases.json
import core from '../tools/core.js';
import pageTools from '../tools/page.js';
import { validate } from '../sw/schema.js';

// Values that satisfy schema s, as far as a sample can.
function good(s) {
  if (!s || typeof s !== 'object') return [1];
  if (s.enum) return s.enum;
  if (s.const !== undefined) return [s.const];
  const t = Array.isArray(s.type) ? s.type[0] : s.type;
  switch (t) {
    case 'string':
      if (s.pattern?.startsWith('^ref_')) return ['ref_1'];
      return ['x'.repeat(Math.max(1, s.minLength ?? 1))];
    case 'integer':
    case 'number': {
      const v = [s.minimum ?? 1];
      if (s.maximum !== undefined) v.push(s.maximum);
      return v;
    }
    case 'boolean':
      return [true, false];
    case 'array': {
      const n = Math.max(1, s.minItems ?? 1);
      return [Array.from({ length: n }, () => good(s.items)[0])];
    }
    case 'object':
      return [fill(s)];
    default:
      return ['x'];
  }
}

// Values meant to probe each constraint of s; the verdict is recorded, not assumed.
function probes(s) {
  const out = ['x', 1, 1.5, true, null, [], {}, ''];
  if (!s || typeof s !== 'object') return out;
  if (s.enum) out.push(`${s.enum[0]}_not`);
  if (s.minimum !== undefined) out.push(s.minimum - 1);
  if (s.maximum !== undefined) out.push(s.maximum + 1);
  if (s.minLength !== undefined) out.push('x'.repeat(Math.max(0, s.minLength - 1)));
  if (s.maxLength !== undefined) out.push('x'.repeat(s.maxLength + 1));
  if (s.pattern) out.push('ref_x', 'ref_12', 'nope');
  if (s.type === 'array' || (Array.isArray(s.type) && s.type.includes('array'))) {
    const item = good(s.items)[0];
    out.push(['x'], [1], [item]);
    if (s.minItems !== undefined) out.push(Array.from({ length: Math.max(0, s.minItems - 1) }, () => item));
    if (s.maxItems !== undefined) out.push(Array.from({ length: s.maxItems + 1 }, () => item));
  }
  if (s.type === 'object' && s.properties) {
    const base = fill(s);
    out.push(base, { ...base, bogus: 1 });
    for (const k of Object.keys(s.properties)) {
      const { [k]: _drop, ...without } = base;
      out.push(without);
      for (const p of probes(s.properties[k]).slice(0, 8)) out.push({ ...base, [k]: p });
    }
  }
  return out;
}

// An object with every required property of s set to a good value.
function fill(s) {
  const o = {};
  for (const k of s.required || []) o[k] = good(s.properties?.[k])[0];
  return o;
}

function cases(schema) {
  const props = Object.keys(schema.properties || {});
  const base = fill(schema);
  const list = [{}, base, { ...base, bogus: 1 }];
  for (const k of props) {
    for (const v of good(schema.properties[k])) list.push({ ...base, [k]: v });
    for (const v of probes(schema.properties[k])) list.push({ ...base, [k]: v });
    const { [k]: _drop, ...without } = base;
    list.push(without);
  }
  // Pairs catch anyOf/oneOf/dependentRequired between arguments.
  for (let i = 0; i < props.length; i++) {
    for (let j = i + 1; j < props.length; j++) {
      const a = props[i];
      const b = props[j];
      list.push({ [a]: good(schema.properties[a])[0], [b]: good(schema.properties[b])[0] });
      list.push({ ...base, [a]: good(schema.properties[a])[0], [b]: good(schema.properties[b])[0] });
    }
  }
  const seen = new Set();
  return list
    .map((args) => [args, validate(args, schema).length === 0])
    .filter(([args]) => {
      const key = JSON.stringify(args);
      return !seen.has(key) && seen.add(key);
    });
}

// Long strings and arrays are written as {$repeat: [value, n]}
// (tools-schema-cases.test.js expands them) to keep the file small.
function pack(v) {
  if (typeof v === 'string' && v.length > 16 && v === v[0].repeat(v.length)) return { $repeat: [v[0], v.length] };
  if (Array.isArray(v)) {
    if (v.length > 4 && v.every((x) => JSON.stringify(x) === JSON.stringify(v[0]))) {
      return { $repeat: [pack(v[0]), v.length] };
    }
    return v.map(pack);
  }
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, pack(x)]));
  return v;
}

const lines = [];
for (const t of [...core, ...pageTools]) {
  lines.push(
    `  ${JSON.stringify(t.name)}: [\n${cases(t.inputSchema)
      .map(([args, ok]) => `    [${JSON.stringify(pack(args))}, ${ok}]`)
      .join(',\n')}\n  ]`,
  );
}
process.stdout.write(`{\n${lines.join(',\n')}\n}\n`);
