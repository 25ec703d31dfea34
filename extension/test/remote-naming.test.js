// Tool names mcp_{server}_{tool} (spec 002): normalization, the 64-character
// limit, and deterministic collision handling.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TOOL_NAME_RE, assignToolNames, filterTools, sanitize, toolName } from '../remote/naming.js';

test('toolName normalizes each part', () => {
  const cases = [
    ['plain', 'brave_search_ab12cd', 'web_search', 'mcp_brave_search_ab12cd_web_search'],
    ['upper case and dashes', 'Notion-Work', 'create-Page', 'mcp_notion_work_create_page'],
    ['runs of punctuation', 'a..b', 'x  /  y', 'mcp_a_b_x_y'],
    ['leading and trailing junk', '__srv__', '--tool--', 'mcp_srv_tool'],
    ['objects instead of strings', { id: 'linear' }, { name: 'list issues' }, 'mcp_linear_list_issues'],
  ];
  for (const [name, server, tool, want] of cases) {
    assert.equal(toolName(server, tool), want, name);
    assert.match(toolName(server, tool), TOOL_NAME_RE, name);
  }
});

test('names stay within ^[a-zA-Z0-9_-]{1,64}$, deterministically', () => {
  const cases = [
    ['long tool', 'srv', 'x'.repeat(200)],
    ['long server', 's'.repeat(100), 'tool'],
    ['non-Latin tool', 'srv', '検索'],
    ['emoji only', '🙂', '🙃'],
    ['exactly 64', 'a', 'b'.repeat(58)],
  ];
  for (const [name, server, tool] of cases) {
    const got = toolName(server, tool);
    assert.match(got, TOOL_NAME_RE, name);
    assert.ok(got.length <= 64, name);
    assert.equal(toolName(server, tool), got, `${name}: same input, same name`);
  }
  assert.equal(toolName('a', 'b'.repeat(58)).length, 64);
  assert.notEqual(
    toolName('srv', `${'x'.repeat(80)}1`),
    toolName('srv', `${'x'.repeat(80)}2`),
    'long names differ by their hash',
  );
  assert.notEqual(toolName('srv', '検索'), toolName('srv', '翻訳'));
});

test('assignToolNames resolves collisions the same way in any order', () => {
  const entries = [
    { server: 'brave-search', tool: 'search' },
    { server: 'brave_search', tool: 'search' },
    { server: 'Brave Search', tool: 'search' },
    { server: 'other', tool: 'search' },
    { server: 'other', tool: 'search' }, // the same tool twice is one name
  ];
  const a = assignToolNames(entries);
  const b = assignToolNames([...entries].reverse());
  assert.deepEqual([...a.entries()].sort(), [...b.entries()].sort());
  assert.equal(a.size, 4);
  for (const name of a.keys()) assert.match(name, TOOL_NAME_RE);
  // The one whose original sorts first keeps the plain name.
  assert.deepEqual(a.get('mcp_brave_search_search'), { server: 'Brave Search', tool: 'search' });
  assert.deepEqual(a.get('mcp_other_search'), { server: 'other', tool: 'search' });
  const hashed = [...a.keys()].filter((n) => /^mcp_brave_search_search_[0-9a-f]{8}$/.test(n));
  assert.equal(hashed.length, 2);
});

test('sanitize and filterTools', () => {
  assert.equal(sanitize('  Hello, World!  '), 'hello_world');
  const tools = [{ name: 'a' }, { name: 'b' }, { name: 'c' }];
  assert.deepEqual(
    filterTools(tools, ['b']).map((t) => t.name),
    ['a', 'c'],
  );
  assert.deepEqual(
    filterTools(tools).map((t) => t.name),
    ['a', 'b', 'c'],
  );
});
