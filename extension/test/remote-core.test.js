// The remote-MCP core (extension/remote/*.js) stays portable: no chrome.*,
// no Node built-ins, no globals only one platform has. Everything
// platform-specific comes through the platform object.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const dir = join(dirname(fileURLToPath(import.meta.url)), '..', 'remote');

/** The code of a file without its comments (string contents stay). */
function code(src) {
  return src.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`\\])\/\/.*$/gm, '$1');
}

test('the core uses no chrome.*, node:*, process, require or Buffer', () => {
  const files = readdirSync(dir).filter((f) => f.endsWith('.js'));
  assert.ok(files.includes('client.js') && files.includes('ssrf.js'));
  const banned = [
    [/\bchrome\./, 'chrome.*'],
    [/from\s+['"]node:/, 'a node: import'],
    [/\brequire\s*\(/, 'require()'],
    [/\bprocess\./, 'process'],
    [/\bBuffer\b/, 'Buffer'],
    [/\bimport\s*\(/, 'a dynamic import'],
  ];
  for (const f of files) {
    const src = code(readFileSync(join(dir, f), 'utf8'));
    for (const [re, what] of banned) assert.ok(!re.test(src), `${f} uses ${what}`);
    for (const m of src.matchAll(/from\s+['"]([^'"]+)['"]/g)) {
      assert.match(m[1], /^\.\/[a-z-]+\.js$/, `${f} imports ${m[1]}: only sibling modules`);
    }
  }
});

test('the service worker could load the core: every module imports', async () => {
  for (const f of readdirSync(dir).filter((x) => x.endsWith('.js'))) {
    const mod = await import(pathToFileURL(join(dir, f)).href);
    assert.ok(Object.keys(mod).length > 0, f);
  }
});
