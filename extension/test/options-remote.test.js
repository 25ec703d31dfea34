// The options page's words for remote MCP servers (issue 31, item 12).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { offHint } from '../options-remote.js';

test('a server that is off says what turning it on does', () => {
  const text = offHint({ title: 'Notion', url: 'https://mcp.notion.com/mcp', name: 'notion' });
  assert.match(text, /^Off: nothing is sent to https:\/\/mcp\.notion\.com\/mcp\./);
  assert.match(text, /"Sign in" button/);
  assert.match(text, /\/servers\/notion\/mcp/);
  assert.match(text, /mcp_notion_<tool>/);
  assert.match(text, /token stays in this browser/);
});
