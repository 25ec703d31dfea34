// A small JSON Schema checker for tool arguments. It knows the keywords tool
// schemas use: type (one or a list of object, string, number, integer,
// boolean, array, null), properties, required, additionalProperties (false or
// a schema), enum, const, minimum, maximum, exclusiveMinimum,
// exclusiveMaximum, minLength, maxLength, pattern, items, minItems, maxItems,
// dependentRequired, anyOf, oneOf. Other keywords (description, default,
// format, …) are ignored.

/**
 * Checks a value against a schema.
 * @param {*} value
 * @param {object} schema
 * @param {string} [path] the value's name in messages; "" for the root
 * @returns {string[]} problems, each naming the argument ("url: expected a string, got 42")
 */
export function validate(value, schema, path = '') {
  const errs = [];
  check(value, schema || {}, path, errs);
  return errs;
}

function typeOf(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

function matchesType(v, t) {
  const actual = typeOf(v);
  if (t === 'number') return actual === 'number' || actual === 'integer';
  return actual === t;
}

function show(v) {
  const s = JSON.stringify(v);
  if (s === undefined) return String(v);
  return s.length > 60 ? `${s.slice(0, 60)}…` : s;
}

const article = (t) => (/^[aeiou]/.test(t) ? `an ${t}` : `a ${t}`);

function check(v, s, path, errs) {
  const where = path || 'arguments';
  const fail = (msg) => errs.push(`${where}: ${msg}`);
  if (s === true || s === undefined) return;
  if (s === false) return fail('is not allowed');

  if (s.type !== undefined) {
    const types = Array.isArray(s.type) ? s.type : [s.type];
    if (!types.some((t) => matchesType(v, t))) {
      return fail(`expected ${types.map(article).join(' or ')}, got ${show(v)}`);
    }
  }
  if (s.const !== undefined && JSON.stringify(v) !== JSON.stringify(s.const)) fail(`must be ${show(s.const)}`);
  if (Array.isArray(s.enum) && !s.enum.some((e) => JSON.stringify(e) === JSON.stringify(v))) {
    fail(`must be one of ${s.enum.map(show).join(', ')}; got ${show(v)}`);
  }

  if (typeof v === 'number') {
    if (s.minimum !== undefined && v < s.minimum) fail(`must be at least ${s.minimum}, got ${v}`);
    if (s.maximum !== undefined && v > s.maximum) fail(`must be at most ${s.maximum}, got ${v}`);
    if (typeof s.exclusiveMinimum === 'number' && v <= s.exclusiveMinimum) {
      fail(`must be more than ${s.exclusiveMinimum}, got ${v}`);
    }
    if (typeof s.exclusiveMaximum === 'number' && v >= s.exclusiveMaximum) {
      fail(`must be less than ${s.exclusiveMaximum}, got ${v}`);
    }
  }
  if (typeof v === 'string') {
    const n = [...v].length;
    if (s.minLength !== undefined && n < s.minLength) fail(`must be at least ${s.minLength} characters long`);
    if (s.maxLength !== undefined && n > s.maxLength) fail(`must be at most ${s.maxLength} characters long`);
    if (s.pattern !== undefined && !new RegExp(s.pattern, 'u').test(v)) fail(`must match ${s.pattern}`);
  }
  if (Array.isArray(v)) {
    if (s.minItems !== undefined && v.length < s.minItems) fail(`needs at least ${s.minItems} items`);
    if (s.maxItems !== undefined && v.length > s.maxItems) fail(`takes at most ${s.maxItems} items`);
    if (s.items && typeof s.items === 'object') v.forEach((item, i) => check(item, s.items, `${where}[${i}]`, errs));
  }
  if (typeOf(v) === 'object') {
    const props = s.properties || {};
    const prefix = path ? `${path}.` : '';
    for (const name of s.required || []) {
      if (!Object.hasOwn(v, name)) errs.push(`${prefix}${name}: is required`);
    }
    for (const [name, needs] of Object.entries(s.dependentRequired || {})) {
      if (!Object.hasOwn(v, name)) continue;
      for (const n of needs) if (!Object.hasOwn(v, n)) errs.push(`${prefix}${n}: is required with ${name}`);
    }
    for (const [name, val] of Object.entries(v)) {
      if (Object.hasOwn(props, name)) check(val, props[name], prefix + name, errs);
      else if (s.additionalProperties === false) errs.push(`${prefix}${name}: is not a known argument${known(props)}`);
      else if (s.additionalProperties && typeof s.additionalProperties === 'object') {
        check(val, s.additionalProperties, prefix + name, errs);
      }
    }
  }
  for (const key of ['anyOf', 'oneOf']) {
    if (!Array.isArray(s[key])) continue;
    const results = s[key].map((sub) => validate(v, sub, path));
    const passing = results.filter((r) => r.length === 0).length;
    if (passing === 0) {
      // Report the branch that came closest: its problems name the argument best.
      const best = results.reduce((a, b) => (b.length < a.length ? b : a));
      errs.push(...best);
    } else if (key === 'oneOf' && passing > 1) {
      fail('matches more than one of the allowed forms');
    }
  }
}

function known(props) {
  const names = Object.keys(props);
  return names.length ? ` (known: ${names.join(', ')})` : ' (this tool takes none)';
}
