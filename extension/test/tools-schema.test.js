// Every page tool: a valid MCP tool definition with an object schema whose
// properties all have descriptions, additionalProperties false, annotations,
// and argument checking through the core's validator.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as tools from '../sw/tools.js';
import { validate } from '../sw/schema.js';
import pageTools from '../tools/page.js';
import devExtra from './overlay/tools/dev_utils_extra.js';

const EXPECTED = [
  'computer',
  'read_page',
  'find',
  'form_input',
  'get_page_text',
  'read_console_messages',
  'read_network_requests',
  'javascript_tool',
  'resize_window',
  'update_plan',
  'turn_answer_start',
  'turn_answer_complete',
  'dev_utils',
  'permissions_check',
  'gif_creator',
  'upload_image',
  'shortcuts_list',
  'shortcuts_execute',
];

// Every argument is explained once: by its own description, by the tool's
// description naming it, by the values of its enum, by its name and type
// (SELF_EXPLANATORY), or, for the items of an array, by the array's description.
const SELF_EXPLANATORY = new Set([
  'tabId',
  'url',
  'url_pattern',
  'method',
  'only_errors',
  'mime_type',
  'depth',
  'offset',
  'shortcut',
  'screenshot_id',
  'filename',
  'explanation',
]);
function checkSchema(schema, where, toolDescription, nested = false) {
  assert.equal(schema.type, 'object', `${where}: type object`);
  assert.equal(
    schema.additionalProperties === false || typeof schema.additionalProperties === 'object',
    true,
    `${where}: additionalProperties set`,
  );
  const props = schema.properties || {};
  for (const r of schema.required || []) assert.ok(Object.hasOwn(props, r), `${where}: required ${r} is a property`);
  for (const [k, p] of Object.entries(props)) {
    if (p.description !== undefined) {
      assert.equal(typeof p.description, 'string', `${where}.${k} description is text`);
      assert.ok(p.description.length >= 10, `${where}.${k} description is useful`);
    } else {
      const said =
        SELF_EXPLANATORY.has(k) || nested || Array.isArray(p.enum) || new RegExp(`\\b${k}\\b`).test(toolDescription);
      assert.ok(said, `${where}.${k} is explained by its description or the tool's`);
    }
    if (p.type === 'object' && p.properties) checkSchema(p, `${where}.${k}`, toolDescription, nested);
    if (p.type === 'array' && p.items && p.items.type === 'object') {
      checkSchema(p.items, `${where}.${k}[]`, toolDescription, nested || p.description !== undefined);
    }
    if (p.enum) assert.ok(p.enum.length > 0, `${where}.${k} enum not empty`);
  }
}

test('all page tools are present with the exact names', () => {
  assert.deepEqual(pageTools.map((t) => t.name).sort(), [...EXPECTED].sort());
});

test('every tool has a good definition', () => {
  for (const t of pageTools) {
    assert.match(t.name, /^[A-Za-z0-9_.-]{1,128}$/);
    assert.ok(typeof t.description === 'string' && t.description.length >= 20, `${t.name}: a real description`);
    assert.equal(typeof t.run, 'function');
    checkSchema(t.inputSchema, t.name, t.description);
    assert.equal(typeof t.annotations, 'object');
    for (const k of ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint']) {
      assert.equal(typeof t.annotations[k], 'boolean', `${t.name}.annotations.${k}`);
    }
    assert.doesNotThrow(() => JSON.parse(JSON.stringify(t.inputSchema)));
  }
});

test('the core registry accepts every page tool and lists them', () => {
  tools.clear();
  assert.equal(tools.register(pageTools), EXPECTED.length);
  const listed = tools.list().tools.map((t) => t.name);
  for (const n of EXPECTED) assert.ok(listed.includes(n), n);
  tools.clear();
});

const byName = Object.fromEntries(pageTools.map((t) => [t.name, t]));
const ok = (name, args) =>
  assert.deepEqual(validate(args, byName[name].inputSchema), [], `${name} ${JSON.stringify(args)}`);
const bad = (name, args) =>
  assert.ok(validate(args, byName[name].inputSchema).length > 0, `${name} should refuse ${JSON.stringify(args)}`);

test('argument edge cases are checked by the schemas', () => {
  ok('computer', { action: 'left_click', coordinate: [10, 20] });
  ok('computer', { action: 'left_click', ref: 'ref_3' });
  ok('computer', { action: 'key', text: 'ctrl+a Delete', repeat: 2 });
  ok('computer', { action: 'zoom', region: [0, 0, 100, 50] });
  ok('computer', { action: 'screenshot', format: 'jpeg', quality: 60, max_edge: 0, full_resolution: true });
  bad('computer', {});
  bad('computer', { action: 'fly' });
  bad('computer', { action: 'left_click', coordinate: [1] });
  bad('computer', { action: 'left_click', ref: 'button' });
  bad('computer', { action: 'wait', duration: 31 });
  bad('computer', { action: 'screenshot', extra: 1 });
  ok('read_page', {});
  ok('read_page', { filter: 'interactive', depth: 5 });
  bad('read_page', { filter: 'buttons' });
  ok('find', { query: 'search box' });
  bad('find', { query: '' });
  ok('form_input', { ref: 'ref_1', value: true });
  ok('form_input', { ref: 'ref_1', value: ['a', 'b'] });
  ok('form_input', { ref: 'ref_1', value: 3 });
  bad('form_input', { ref: 'ref_1' });
  bad('form_input', { ref: 'ref_1', value: null });
  ok('get_page_text', { page: 2, page_size: 1000 });
  bad('get_page_text', { page: 0 });
  ok('read_network_requests', { status: '4xx', method: 'POST' });
  ok('read_network_requests', { status: 404 });
  bad('read_network_requests', { status: true });
  ok('read_console_messages', { level: 'warning+', pattern: 'err', clear: true });
  ok('update_plan', { plan: [{ step: 'open the site', status: 'in_progress' }] });
  bad('update_plan', { plan: [{ step: 'x', status: 'doing' }] });
  // The installed extension has no native_echo_benchmark: only the tests'
  // build adds it (test/overlay), with its own arguments.
  bad('dev_utils', { action: 'native_echo_benchmark', host: 'com.browserbridge.echo' });
  ok('dev_utils', { action: 'echo', message: { any: ['thing'] } });
  ok('gif_creator', { action: 'export', frame_delay_ms: 500 });
  ok('upload_image', { ref: 'ref_9', screenshot_id: 'shot_abc_1' });
  ok('shortcuts_execute', { shortcut: 'login', variables: { user: 'me', n: 2 } });
  ok('shortcuts_list', {});
  bad('shortcuts_list', { x: 1 });
  ok('resize_window', { width: 800, height: 600 });
  bad('resize_window', { width: 800 });
  ok('javascript_tool', { code: 'document.title' });
  bad('javascript_tool', {});
});

test("the tests' dev_utils overlay: native_echo_benchmark's arguments", () => {
  const schema = {
    type: 'object',
    properties: { action: { type: 'string' }, ...devExtra.native_echo_benchmark.properties },
    additionalProperties: false,
  };
  assert.deepEqual(
    validate({ action: 'native_echo_benchmark', host: 'com.browserbridge.echo', count: 10, size: 1024 }, schema),
    [],
  );
  assert.notDeepEqual(validate({ action: 'native_echo_benchmark', host: 'Bad Host' }, schema), []);
});
