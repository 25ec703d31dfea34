// ESLint for the extension (flat config; `make ext-lint` runs it). The
// packages are pinned in tools/npm with the other test tools, so they are
// loaded from there, not from a node_modules beside this file.
import { createRequire } from 'node:module';

const require = createRequire(new URL('./tools/npm/package.json', import.meta.url));
const js = require('@eslint/js');
const globals = require('globals');

export default [
  { ignores: ['**/node_modules/**', 'bin/**', 'tools/**', 'artifacts/**'] },
  {
    files: ['extension/**/*.js', 'extension/**/*.mjs'],
    ...js.configs.recommended,
    languageOptions: {
      ecmaVersion: 'latest',
      sourceType: 'module',
      // The service worker, the pages and the tools' page functions run in
      // Chrome; the remote core also runs in Node, through its tests.
      globals: { ...globals.browser, ...globals.serviceworker, ...globals.webextensions },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      ...js.configs.recommended.rules,
      // `const { secret, ...rest } = x` is how an object loses a field here.
      'no-unused-vars': ['error', { ignoreRestSiblings: true }],
      eqeqeq: ['error', 'always', { null: 'ignore' }],
      'no-var': 'error',
      'prefer-const': 'error',
      'no-throw-literal': 'error',
      // Braces around any body that is not on its own line: prettier breaks a
      // long `if (x) return y;` in two, and eslint --fix then adds them.
      curly: ['error', 'multi-line'],
    },
  },
  {
    // The page agent: classic scripts that content/agent.js injects into a
    // page's isolated world with chrome.scripting.executeScript({files}).
    files: ['extension/content/page/**/*.js'],
    languageOptions: { sourceType: 'script' },
  },
  {
    // Unit tests and their helpers run in Node, with a fake chrome.* installed globally.
    files: ['extension/test/**/*.js', 'extension/test/**/*.mjs'],
    languageOptions: { globals: { ...globals.node, ...globals.webextensions } },
  },
  {
    files: ['eslint.config.js'],
    ...js.configs.recommended,
    languageOptions: { ecmaVersion: 'latest', sourceType: 'module', globals: globals.node },
  },
];
