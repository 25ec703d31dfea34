// Cost of the person's policy per tool call (issue 29), reported, not
// asserted: decide() alone, and sw/gate.js's whole check with the fake
// chrome.* of the unit tests (storage and tabs in memory, so Chrome's own
// API latency is not in these figures; the e2e TestPolicy measures that).
//
//   node extension/bench/policy.bench.mjs

import { installFakeChrome } from '../test/fake-chrome.js';
import { classify, decide, normalisePolicy } from '../sw/policy.js';
import * as gate from '../sw/gate.js';
import * as store from '../sw/store.js';

const fake = installFakeChrome();
fake.storage.onChanged.addListener((c, area) => gate.onStorageChanged(c, area));

function stats(name, times) {
  const s = [...times].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  const us = (ms) => `${(ms * 1000).toFixed(2)} µs`;
  console.log(`${name}: median ${us(q(0.5))}, p99 ${us(q(0.99))}, n=${s.length}`);
}

async function time(n, fn) {
  const out = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await fn(i);
    out.push(performance.now() - t0);
  }
  return out;
}

const rules = [{ pattern: '127.0.0.1', read: 'allow', act: 'allow', script: 'allow' }];
for (let i = 0; i < 49; i++) rules.push({ pattern: `*.site${i}.example`, read: 'ask', act: 'block', script: 'block' });
const session = { id: 'local-bench', client: 'bench', remote: false };
const call = classify('get_page_text', { tabId: 1 });

const plain = normalisePolicy({});
const ruled = normalisePolicy({ sites: rules });
const N = 200_000;
stats(
  'decide(), default policy',
  await time(N, () => decide({ policy: plain, paused: false, session, call, url: null })),
);
stats(
  'decide(), 50 rules',
  await time(N, () => decide({ policy: ruled, paused: false, session, call, url: 'http://127.0.0.1:8080/form.html' })),
);

const tab = fake.userTab('http://127.0.0.1:8080/form.html');
await new Promise((r) => setTimeout(r, 20));
const args = { tabId: tab.id };
await gate.check({ tool: 'get_page_text', args, session }); // warm the cache
stats('gate.check(), default policy', await time(20_000, () => gate.check({ tool: 'get_page_text', args, session })));
await store.set('local', store.LOCAL.policy, { sites: rules });
await gate.check({ tool: 'get_page_text', args, session });
stats(
  'gate.check(), 50 rules (tab lookup, rule match)',
  await time(20_000, () => gate.check({ tool: 'get_page_text', args, session })),
);
